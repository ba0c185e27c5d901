// tests/daemon/top_command_test.cc
//
// `oomtriage top` run as people and scripts run it: `--once` lists a store's jobs in plain text;
// away from a terminal it prints a frame each interval and `q` on its input ends it; and in a real
// terminal (tmux, Debian's package; skipped without it) it draws the jobs, quits on `q` or
// SIGTERM, and gives the terminal back as it found it.
#include <doctest/doctest.h>

#include <fstream>

#include "daemon/common/clock.h"
#include "db/store.h"
#include "tests/support/e2e.h"
#include "tests/support/skip.h"
#include "tests/support/store_rows.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

// A store as the daemon writes it: a job that crashed in sampling at step 500, one running and
// one completed.
fs::path store_with_jobs(const fs::path& dir) {
  const fs::path db = dir / "oomtriage.db";
  auto store = db::Store::open(db.string());
  REQUIRE(store);
  const int64_t now = daemon::unix_now();
  db::Progress crashed = progress_for_new_job(**store, "tmux_crash", 1, now - 60);
  crashed.outcome = "crashed_oom";
  db::EventRow e;
  e.offset = 100;
  e.kind = "cuda";
  e.phase = "sampling";
  e.step = 500;
  e.event_json = R"({"kind":"cuda","phase":"sampling","step":500,"total_steps":3000,)"
                 R"("recovered":false,"line":67,"message":"CUDA out of memory."})";
  e.fixes_json = R"([{"id":"cheapen_previews","rank":1,"title":"t","changes":[],"cost":"c"}])";
  crashed.events.push_back(e);
  REQUIRE((*store)->commit_progress(crashed, now - 60));
  db::Progress running = progress_for_new_job(**store, "still_going", 2, now);
  running.outcome = "running";
  REQUIRE((*store)->commit_progress(running, now));
  db::Progress done = progress_for_new_job(**store, "all_done", 3, now - 3600);
  done.outcome = "completed";
  REQUIRE((*store)->commit_progress(done, now - 3600));
  return db;
}

// A tmux server of the test's own (its own socket, no config read), killed when it goes.
class Tmux {
 public:
  explicit Tmux(const fs::path& dir) : socket_((dir / "tmux.sock").string()) {}
  ~Tmux() { run_shell("tmux -S " + socket_ + " kill-server >/dev/null 2>&1"); }
  Tmux(const Tmux&) = delete;
  Tmux& operator=(const Tmux&) = delete;
  std::pair<int, std::string> operator()(const std::string& args) const {
    return run_shell("tmux -S " + socket_ + " -f /dev/null " + args + " 2>&1");
  }
  std::string screen() const { return (*this)("capture-pane -p -t top").second; }

 private:
  std::string socket_;
};

}  // namespace

TEST_SUITE("daemon::top") {
  TEST_CASE("top --once lists the store's jobs in plain text, the one that crashed first") {
    TempDir dir;
    const fs::path db = store_with_jobs(dir.path);
    int code = 0;
    std::string out;
    std::tie(code, out) = oomtriage_says("top --once --store " + db.string());
    CAPTURE(out);
    CHECK(code == 0);
    CHECK(out.find("oomtriage top") == 0);
    CHECK(out.find("3 jobs: 1 crashed, 1 running") != std::string::npos);
    CHECK(out.find('\x1b') == std::string::npos);  // not a terminal: no escape code
    const size_t crash = out.find("tmux_crash");
    const size_t going = out.find("still_going");
    const size_t done = out.find("all_done");
    REQUIRE(crash != std::string::npos);
    REQUIRE(going != std::string::npos);
    REQUIRE(done != std::string::npos);
    CHECK(crash < going);
    CHECK(going < done);
    CHECK(out.find("sampling@500") != std::string::npos);
    CHECK(out.find("cheapen_previews") != std::string::npos);

    // No store yet: no jobs yet, not an error.
    std::tie(code, out) = oomtriage_says("top --once --store " + (dir.path / "none.db").string());
    CHECK(code == 0);
    CHECK(out.find("no jobs yet") != std::string::npos);
    std::tie(code, out) = oomtriage_says("top --once --interval 0 --store " + db.string());
    CHECK(code == 1);
  }

  TEST_CASE("away from a terminal top prints a frame each interval until q comes on its input") {
    TempDir dir;
    const fs::path db = store_with_jobs(dir.path);
    // `q` waits in the pipe: the first frame is printed, then the key read, then it ends.
    auto [code, out] = run_shell("printf q | " + std::string(OOMTRIAGE_BINARY) +
                                 " top --interval 0.2 --store " + db.string());
    CHECK(code == 0);
    CHECK(out.find("tmux_crash") != std::string::npos);
    CHECK(out.find('\x1b') == std::string::npos);
    // Its input at its end (not a terminal, nothing to read): the frames go on, no busy loop, until
    // SIGTERM ends it.
    const fs::path err = dir.path / "err";
    const fs::path frames = dir.path / "frames";
    const std::string command = std::string(OOMTRIAGE_BINARY) + " top --interval 0.1 --store " +
                                db.string() + " </dev/null >" + frames.string() + " 2>" +
                                err.string() + " & echo $!";
    const pid_t pid = std::stoi(run_shell(command).second);
    CHECK(wait_until([&] {
      const std::string text = slurp(frames);
      return std::count(text.begin(), text.end(), '\n') > 20;  // several frames
    }));
    ::kill(pid, SIGTERM);
    CHECK(wait_until([&] { return ::kill(pid, 0) != 0; }));
  }

  TEST_CASE("in a real terminal top draws the jobs, quits on q or SIGTERM, restores the terminal") {
    if (!have_program("tmux")) OOMTRIAGE_SKIP("tmux is missing (Debian's tmux package)");
    TempDir dir;
    const fs::path db = store_with_jobs(dir.path);
    const Tmux tmux(dir.path);
    // A shell in a terminal of a fixed size.
    REQUIRE(tmux("new-session -d -s top -x 120 -y 30 -c " + dir.path.string() + " sh").first == 0);
    const auto run = [&](const std::string& name, const std::string& how_it_ends) {
      CAPTURE(name);
      // The terminal's settings before and after, and the exit code; the process id to end it by.
      const fs::path before = dir.path / (name + ".before");
      const fs::path after = dir.path / (name + ".after");
      const fs::path pid = dir.path / (name + ".pid");
      const fs::path script = dir.path / (name + ".sh");
      std::ofstream(script) << "stty -g >" << before.string() << "\n"
                            << "sh -c 'echo $$ >" << pid.string() << "; exec " << OOMTRIAGE_BINARY
                            << " top --store " << db.string() << "'\n"
                            << "echo " << name << "=$?\n"
                            << "stty -g >" << after.string() << "\n";
      REQUIRE(tmux("send-keys -t top 'sh " + script.string() + "' Enter").first == 0);
      const bool drawn = wait_until(
          [&] {
            const std::string screen = tmux.screen();
            return screen.find("tmux_crash") != std::string::npos &&
                   screen.find("still_going") != std::string::npos;
          },
          20s);
      INFO("the screen: " << tmux.screen());
      REQUIRE(drawn);
      const std::string frame = tmux.screen();
      CHECK(frame.find("oomtriage top") != std::string::npos);
      CHECK(frame.find("crashed_oom") != std::string::npos);
      if (how_it_ends == "q") {
        REQUIRE(tmux("send-keys -t top q").first == 0);
      } else {
        ::kill(std::stoi(slurp(pid)), SIGTERM);
      }
      CHECK(wait_until([&] { return tmux.screen().find(name + "=0") != std::string::npos; }, 20s));
      CHECK(wait_until([&] { return fs::exists(after) && !slurp(after).empty(); }));
      // The terminal as it was: the same settings (canonical, echoing), and the shell's own
      // screen back, without the frame.
      CHECK(slurp(before) == slurp(after));
      CHECK(tmux.screen().find("tmux_crash") == std::string::npos);
    };
    run("quit_by_q", "q");
    REQUIRE(tmux("send-keys -t top clear Enter").first == 0);
    run("quit_by_sigterm", "SIGTERM");
  }
}
