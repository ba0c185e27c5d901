// tests/daemon/serve_test.cc
//
// `oomtriage serve` as a user meets it: the real binary on a loopback port, asked by curl and
// looked at in headless Chromium. The jobs list with its filters and pages, a job's page as
// `report` draws it (and its .json and .md as `report` prints them), /fleet's charts, hostile
// job names and log text inert, the access file (tokens, users, its mode), loopback by default,
// the store never written, a fleet role that can write refused, and slow or silent clients cut
// off without holding the server.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <regex>

#include "daemon/common/clock.h"
#include "db/fleet_store.h"
#include "db/store.h"
#include "tests/support/browser.h"
#include "tests/support/e2e.h"
#include "tests/support/postgres.h"
#include "tests/support/store_rows.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

const std::string kHostileName = "<script>alert(1)</script>\"lora";
const std::string kHostileLine = "CUDA out of memory. <img src=x onerror=alert(2)>";

// `oomtriage serve` started with `args`; ready once it printed its address.
class ServeProcess {
 public:
  ServeProcess(std::vector<std::string> args, const fs::path& err) : err_(err) {
    fs::remove(err);
    pid_ = spawn_oomtriage(std::move(args), err);
    const std::regex address(R"(http://127\.0\.0\.1:(\d+)/)");
    wait_until([&] {
      std::smatch m;
      const std::string text = slurp(err_);
      if (std::regex_search(text, m, address)) port_ = std::stoi(m[1]);
      return port_ != 0 || !alive();
    });
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool alive() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      pid_ = -1;
      return false;
    }
    return true;
  }
  int stop() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // The exit code of a server that would not start.
  int exit_code() {
    wait_until([&] { return !alive(); });
    return exit_code_;
  }
  std::string url(const std::string& path = "/") const {
    return fmt::format("http://127.0.0.1:{}{}", port_, path);
  }
  unsigned short port() const { return static_cast<unsigned short>(port_); }
  std::string stderr_text() const { return slurp(err_); }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_code_ = -2;
  fs::path err_;
};

struct Fetched {
  int status = 0;
  std::string headers;
  std::string body;
};

Fetched get(const std::string& url, const std::string& curl_args = "") {
  static int n = 0;
  const fs::path base =
      fs::temp_directory_path() / fmt::format("oomtriage-serve-{}-{}", ::getpid(), n++);
  const auto [rc, code] =
      run_shell(fmt::format("curl -s -m 20 {} -D '{}.h' -o '{}.b' -w '%{{http_code}}' '{}'",
                            curl_args, base.string(), base.string(), url));
  Fetched out;
  out.status = std::atoi(code.c_str());
  out.headers = slurp(base.string() + ".h");
  out.body = slurp(base.string() + ".b");
  fs::remove(base.string() + ".h");
  fs::remove(base.string() + ".b");
  return out;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A job whose one run ended `outcome`, with an OOM in `phase` when it crashed.
void add_job(db::Store& store, const std::string& name, int64_t age, const std::string& outcome,
             uint64_t ino, const std::string& phase = "sampling",
             const std::string& message = "CUDA out of memory.") {
  const int64_t now = daemon::unix_now() - age;
  db::Progress progress = progress_for_new_job(store, name, ino, now);
  progress.outcome = outcome;
  if (outcome == "crashed_oom") {
    db::EventRow e;
    e.offset = 100;
    e.kind = "cuda";
    e.phase = phase;
    e.model_family = "flux.1";
    e.step = 500;
    nlohmann::json event = {{"kind", "cuda"},     {"phase", phase}, {"step", 500},
                            {"recovered", false}, {"line", 67},     {"message", message},
                            {"total_steps", 3000}};
    e.event_json = event.dump();
    e.fixes_json = R"([{"id":"cheapen_previews","rank":1,"title":"Cheaper previews",)"
                   R"("why":"w","changes":[],"cost":"c"}])";
    progress.events.push_back(e);
  }
  REQUIRE(store.commit_progress(progress, now));
}

// A node store of 60 jobs: 55 completed, 4 crashed in sampling or train_step, 1 hostile.
fs::path fill_store(const fs::path& state) {
  fs::create_directories(state);
  const fs::path db = state / "oomtriage.db";
  auto store = db::Store::open(db.string());
  REQUIRE(store);
  for (int i = 0; i < 55; ++i) {
    add_job(**store, fmt::format("done_{:02}", i), 3600 + i * 60, "completed", 100 + i);
  }
  add_job(**store, "flux_sampling", 120, "crashed_oom", 1, "sampling");
  add_job(**store, "flux_step", 60, "crashed_oom", 2, "train_step");
  add_job(**store, "old_sdxl", 40 * 86400, "crashed_oom", 3, "train_step");
  add_job(**store, kHostileName, 30, "crashed_oom", 4, "sampling", kHostileLine);
  return db;
}

std::string job_key(const std::string& list_page, const std::string& shown_name) {
  const std::regex link(R"re(<a class="job" href="/job/([^"]+)">([^<]*)</a>)re");
  for (auto it = std::sregex_iterator(list_page.begin(), list_page.end(), link);
       it != std::sregex_iterator(); ++it) {
    if ((*it)[2] == shown_name) return (*it)[1];
  }
  return "";
}

}  // namespace

TEST_SUITE("daemon::serve") {
  TEST_CASE("serve: the jobs list filters and pages, a job's page is its report, /fleet counts") {
    TempDir dir;
    const fs::path state = dir.path / "state";
    fill_store(state);
    ServeProcess serve({"--state-dir", state.string(), "serve", "--listen", "127.0.0.1:0"},
                       dir.path / "serve.err");
    INFO("serve's stderr: " << serve.stderr_text());
    REQUIRE(serve.port() != 0);

    const Fetched first = get(serve.url());
    REQUIRE(first.status == 200);
    CHECK(first.headers.find("Content-Security-Policy: default-src 'none'") != std::string::npos);
    CHECK(first.headers.find("X-Content-Type-Options: nosniff") != std::string::npos);
    // Newest first: the hostile job, then flux_step; 50 a page, a next page.
    CHECK(count(first.body, "<a class=\"job\"") == 50);
    CHECK(first.body.find("&lt;script&gt;alert(1)&lt;/script&gt;&quot;lora") <
          first.body.find(">flux_step<"));
    CHECK(first.body.find("<script") == std::string::npos);
    CHECK(first.body.find("rel=\"next\" href=\"/?page=2\"") != std::string::npos);
    const Fetched second = get(serve.url("/?page=2"));
    CHECK(count(second.body, "<a class=\"job\"") == 9);
    CHECK(second.body.find("rel=\"prev\" href=\"/\"") != std::string::npos);
    CHECK(second.body.find("rel=\"next\"") == std::string::npos);

    // The night's OOMs are one click from the front page, and their fix one more.
    CHECK(first.body.find("href=\"/?outcome=crashed_oom&amp;since=24h\"") != std::string::npos);
    const Fetched last_night = get(serve.url("/?outcome=crashed_oom&since=24h"));
    CHECK(count(last_night.body, "<a class=\"job\"") == 3);
    CHECK(last_night.body.find("href=\"/job/" + job_key(last_night.body, "flux_step") +
                               "#fixes\"><code>cheapen_previews</code>") != std::string::npos);

    // Each filter.
    const Fetched crashed = get(serve.url("/?outcome=crashed_oom"));
    CHECK(count(crashed.body, "<a class=\"job\"") == 4);
    const Fetched sampling = get(serve.url("/?outcome=crashed_oom&phase=sampling"));
    CHECK(count(sampling.body, "<a class=\"job\"") == 2);
    CHECK(sampling.body.find("<option selected>sampling</option>") != std::string::npos);
    const Fetched recent = get(serve.url("/?outcome=crashed_oom&since=7d"));
    CHECK(count(recent.body, "<a class=\"job\"") == 3);
    CHECK(recent.body.find(">old_sdxl<") == std::string::npos);
    const Fetched named = get(serve.url("/?q=FLUX_"));
    CHECK(count(named.body, "<a class=\"job\"") == 2);
    CHECK(count(get(serve.url("/?family=flux.1&trainer=ai-toolkit")).body, "<a class=\"job\"") ==
          4);
    CHECK(get(serve.url("/?trainer=kohya")).body.find("No jobs match") != std::string::npos);
    CHECK(get(serve.url("/?since=soon")).status == 400);

    // The job's page is `report --html`'s, with the way back and on; .json and .md are report's.
    const std::string key = job_key(first.body, "flux_step");
    REQUIRE(!key.empty());
    const Fetched page = get(serve.url("/job/" + key));
    CHECK(page.status == 200);
    CHECK(page.body.find("<a href=\"/\">← all jobs</a>") != std::string::npos);
    CHECK(page.body.find("<section id=\"fixes\">") != std::string::npos);
    CHECK(page.body.find("cheapen_previews") != std::string::npos);
    CHECK(page.body.find("<li id=\"run-1\">") != std::string::npos);
    const auto [rc_md, markdown] = oomtriage_says("--color never --state-dir " + state.string() +
                                                  " report flux_step --markdown");
    CHECK(rc_md == 0);
    CHECK(get(serve.url("/job/" + key + ".md")).body == markdown);
    const auto [rc_json, json] =
        oomtriage_says("--state-dir " + state.string() + " report flux_step --json");
    CHECK(rc_json == 0);
    const auto served = nlohmann::json::parse(get(serve.url("/job/" + key + ".json")).body);
    auto printed = nlohmann::json::parse(json);
    CHECK(served["job"] == printed["job"]);
    CHECK(served["events"] == printed["events"]);
    CHECK(get(serve.url("/job/999999")).status == 404);
    CHECK(get(serve.url("/job/" + key + "x")).status == 404);

    // The hostile job's page: its name and log line are text, never markup.
    const Fetched hostile = get(serve.url(
        "/job/" + job_key(first.body, "&lt;script&gt;alert(1)&lt;/script&gt;&quot;lora")));
    CHECK(hostile.status == 200);
    CHECK(hostile.body.find("<script") == std::string::npos);
    CHECK(hostile.body.find("<img") == std::string::npos);
    CHECK(hostile.body.find("&lt;img src=x onerror=alert(2)&gt;") != std::string::npos);

    // /fleet: one bar part per day and phase, counting the events of the window.
    const Fetched fleet = get(serve.url("/fleet"));
    CHECK(fleet.status == 200);
    const std::regex bar(
        R"re(class="bar" data-day="([0-9-]+)" data-key="([^"]+)" data-count="(\d+)")re");
    std::map<std::string, int> by_phase;
    for (auto it = std::sregex_iterator(fleet.body.begin(), fleet.body.end(), bar);
         it != std::sregex_iterator(); ++it) {
      by_phase[(*it)[2]] += std::stoi((*it)[3]);
    }
    // Two charts (phase, family); old_sdxl's OOM is 40 days old, outside the 30 shown.
    CHECK(by_phase["sampling"] == 2);
    CHECK(by_phase["train_step"] == 1);
    CHECK(by_phase["flux.1"] == 3);
    CHECK(fleet.body.find("this node") != std::string::npos);

    CHECK(get(serve.url("/nowhere")).status == 404);
    CHECK(get(serve.url(), "-X POST").status == 405);
    CHECK(serve.stop() == 0);
  }

  TEST_CASE("serve in Chromium: links and filters work without script, dark mode is dark") {
    if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
      OOMTRIAGE_SKIP("Chromium is not installed (Debian: chromium)");
    }
    TempDir dir;
    const fs::path state = dir.path / "state";
    fill_store(state);
    ServeProcess serve({"--state-dir", state.string(), "serve", "--listen", "127.0.0.1:0"},
                       dir.path / "serve.err");
    REQUIRE(serve.port() != 0);
    // The filter form as a browser submits it (GET, every field), then the job and its fix.
    const std::string dom = dumped_dom(
        serve.url("/?outcome=crashed_oom&phase=train_step&host=&trainer=&family=&since=&q="),
        dir.path);
    REQUIRE(!dom.empty());
    CHECK(count(dom, "<a class=\"job\"") == 2);
    CHECK(dom.find(">flux_step</a>") != std::string::npos);
    const std::string key = job_key(dom, "flux_step");
    const std::string job = dumped_dom(serve.url("/job/" + key), dir.path);
    CHECK(job.find("Cheaper previews") != std::string::npos);
    // Nothing ran: the hostile name is text in the DOM too.
    const std::string all = dumped_dom(serve.url("/?outcome=crashed_oom"), dir.path);
    CHECK(all.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);

    const auto light = screenshot(serve.url("/fleet"), dir.path, 1000, 900);
    const auto dark = screenshot(serve.url("/fleet"), dir.path, 1000, 900, true);
    REQUIRE(light);
    REQUIRE(dark);
    CHECK(light->at(5, 5).near(Rgb::hex("#ffffff")));
    CHECK(dark->at(5, 5).near(Rgb::hex("#14161b")));
    // The phase chart's bars are drawn: the sampling colour is on the screen.
    bool sampling_bar = false;
    for (int y = 0; y < light->height && !sampling_bar; ++y) {
      for (int x = 0; x < light->width && !sampling_bar; ++x) {
        sampling_bar = light->at(x, y).near(Rgb::hex("#f58518"), 3);
      }
    }
    CHECK(sampling_bar);
  }

  TEST_CASE("serve: loopback unless an access file says who may read; tokens and users") {
    TempDir dir;
    const fs::path state = dir.path / "state";
    fill_store(state);
    {
      ServeProcess open_to_all({"--state-dir", state.string(), "serve", "--listen", "0.0.0.0:0"},
                               dir.path / "open.err");
      CHECK(open_to_all.exit_code() == 1);
      CHECK(open_to_all.stderr_text().find("--access-file") != std::string::npos);
    }
    const fs::path access = dir.path / "access";
    const auto [rc, hash] = run_shell("openssl passwd -6 -salt s4ltS4lt 'hunter22'");
    REQUIRE(rc == 0);
    std::ofstream(access) << "# who may read\ntoken 0123456789abcdef0123\nalice:" << hash;
    fs::permissions(access, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    {
      ServeProcess loose({"--state-dir", state.string(), "serve", "--listen", "127.0.0.1:0",
                          "--access-file", access.string()},
                         dir.path / "loose.err");
      CHECK(loose.exit_code() == 1);
      INFO(loose.stderr_text());
      CHECK(loose.stderr_text().find("mode 0444") != std::string::npos);
    }
    fs::permissions(access, fs::perms::owner_read | fs::perms::owner_write);
    ServeProcess serve({"--state-dir", state.string(), "serve", "--listen", "127.0.0.1:0",
                        "--access-file", access.string()},
                       dir.path / "serve.err");
    INFO("serve's stderr: " << serve.stderr_text());
    REQUIRE(serve.port() != 0);
    const Fetched refused = get(serve.url());
    CHECK(refused.status == 401);
    CHECK(refused.headers.find("WWW-Authenticate: Basic realm=\"oomtriage\"") != std::string::npos);
    CHECK(refused.body.find("flux_step") == std::string::npos);
    CHECK(get(serve.url("/fleet")).status == 401);
    CHECK(get(serve.url("/job/1.json")).status == 401);
    CHECK(get(serve.url(), "-H 'Authorization: Bearer 0123456789abcdef0123'").status == 200);
    CHECK(get(serve.url(), "-H 'Authorization: Bearer 0123456789abcdef0124'").status == 401);
    CHECK(get(serve.url(), "-u alice:hunter22").status == 200);
    CHECK(get(serve.url(), "-u alice:hunter22").status == 200);  // the cached check
    CHECK(get(serve.url(), "-u alice:hunter23").status == 401);
    CHECK(get(serve.url(), "-u alice:hunter23").status == 401);  // the refusal remembered
    CHECK(get(serve.url(), "-u bob:hunter22").status == 401);
  }

  TEST_CASE("serve never writes the SQLite store, and slow or silent clients do not hold it") {
    TempDir dir;
    const fs::path state = dir.path / "state";
    const fs::path db = fill_store(state);
    const auto [rc_before, before] =
        run_shell("cd '" + state.string() + "' && sha256sum oomtriage.db");
    ServeProcess serve({"--state-dir", state.string(), "serve", "--listen", "127.0.0.1:0",
                        "--max-connections", "8", "--client-timeout", "1", "--threads", "2"},
                       dir.path / "serve.err");
    REQUIRE(serve.port() != 0);
    // Eight clients that connect and send half a request line, then nothing.
    std::vector<int> silent;
    for (int i = 0; i < 8; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_port = htons(serve.port());
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
      REQUIRE(::send(fd, "GET / HT", 8, 0) == 8);
      silent.push_back(fd);
    }
    // Full: the next client hears 503 at once instead of waiting in line.
    wait_until([&] { return get(serve.url("/healthz")).status == 503; }, std::chrono::seconds(2));
    const Fetched full = get(serve.url());
    CHECK(full.status == 503);
    CHECK(full.headers.find("Retry-After: 5") != std::string::npos);
    // Within their timeout the silent ones are cut off, and the server answers again.
    for (const int fd : silent) {
      timeval wait{5, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
      char byte;
      CHECK(::recv(fd, &byte, 1, 0) == 0);
      ::close(fd);
    }
    CHECK(wait_until([&] { return get(serve.url()).status == 200; }, std::chrono::seconds(3)));
    // An oversized request is refused, and the server goes on.
    const std::string huge(20000, 'a');
    CHECK(get(serve.url(), "-H 'X-Big: " + huge + "'").status != 200);
    CHECK(get(serve.url()).status == 200);
    for (const char* path : {"/", "/fleet", "/job/1", "/job/1.json", "/?outcome=completed"})
      CHECK(get(serve.url(path)).status == 200);
    CHECK(serve.stop() == 0);
    // The database is as it was; SQLite's read-only WAL reader may leave an empty -wal and its
    // -shm index beside it, nothing more.
    const auto [rc_after, after] =
        run_shell("cd '" + state.string() + "' && sha256sum oomtriage.db");
    CHECK(before == after);
    CHECK((!fs::exists(state / "oomtriage.db-wal") ||
           fs::file_size(state / "oomtriage.db-wal") == 0));
    // What serve reads through refuses to write.
    auto reader = db::Store::open_read_only(db.string());
    REQUIRE(reader);
    CHECK_FALSE((*reader)->upsert_job("new", "/out/new", "kohya", "/out", 1));
    CHECK_FALSE((*reader)->set_meta("k", "v"));
  }

  TEST_CASE("serve over the fleet store: a role that can write is refused, a read-only one reads") {
    PostgresCluster pg;
    if (!pg.ok()) OOMTRIAGE_SKIP(pg.error());
    TempDir dir;
    const fs::path state = dir.path / "state";
    fill_store(state);
    {
      // The node ships its store as its daemon would.
      auto node = db::Store::open((state / "oomtriage.db").string());
      REQUIRE(node);
      REQUIRE((*node)->set_fleet_outbox(pg.url()));
      auto fleet = db::FleetStore::open(pg.url());
      REQUIRE(fleet);
      const std::string id = *(*node)->store_id();
      for (;;) {
        auto batch = (*node)->fleet_batch(500);
        REQUIRE(batch);
        if (batch->empty()) break;
        REQUIRE((*fleet)->ship(*batch, id, "gpu-node-07"));
        REQUIRE((*node)->fleet_shipped(batch->last_seq));
      }
    }
    {
      ServeProcess owner({"--store", pg.url(), "serve", "--listen", "127.0.0.1:0"},
                         dir.path / "owner.err");
      CHECK(owner.exit_code() == 1);
      CHECK(owner.stderr_text().find("can write (role oomtriage is a superuser)") !=
            std::string::npos);
    }
    {
      ServeProcess allowed(
          {"--store", pg.url(), "serve", "--listen", "127.0.0.1:0", "--allow-writer-role"},
          dir.path / "allowed.err");
      REQUIRE(allowed.port() != 0);
      CHECK(allowed.stderr_text().find("WARNING: role oomtriage is a superuser") !=
            std::string::npos);
    }
    // The read-only role docs/serve.md makes.
    pg.query(
        "CREATE ROLE oomtriage_reader LOGIN PASSWORD 'reader-secret'; GRANT USAGE ON SCHEMA "
        "oomtriage TO oomtriage_reader; GRANT SELECT ON ALL TABLES IN SCHEMA oomtriage TO "
        "oomtriage_reader;");
    const fs::path passfile = dir.path / "reader.pgpass";
    std::ofstream(passfile) << "*:*:*:oomtriage_reader:reader-secret\n";
    fs::permissions(passfile, fs::perms::owner_read | fs::perms::owner_write);
    std::string url = pg.url();
    url.replace(url.find("oomtriage@"), 10, "oomtriage_reader@");
    url.replace(url.find("passfile=") + 9, std::string::npos, passfile.string());
    ServeProcess serve({"--store", url, "serve", "--listen", "127.0.0.1:0"},
                       dir.path / "serve.err");
    INFO("serve's stderr: " << serve.stderr_text());
    REQUIRE(serve.port() != 0);
    const Fetched list = get(serve.url("/?outcome=crashed_oom&host=gpu-node-07"));
    CHECK(count(list.body, "<a class=\"job\"") == 4);
    CHECK(list.body.find("<td>gpu-node-07</td>") != std::string::npos);
    CHECK(count(get(serve.url("/?host=gpu-node-08")).body, "<a class=\"job\"") == 0);
    const std::string key = job_key(list.body, "flux_step");
    REQUIRE(key.size() > 37);
    const Fetched page = get(serve.url("/job/" + key));
    CHECK(page.status == 200);
    CHECK(page.body.find("host gpu-node-07") != std::string::npos);
    const Fetched fleet = get(serve.url("/fleet"));
    CHECK(fleet.body.find("<td>gpu-node-07</td>") != std::string::npos);
    CHECK(fleet.body.find("data-key=\"train_step\" data-count=\"1\"") != std::string::npos);

    // `serve --host` shows that node only, whatever the URL asks.
    ServeProcess other(
        {"--store", url, "serve", "--listen", "127.0.0.1:0", "--host", "gpu-node-08"},
        dir.path / "other.err");
    REQUIRE(other.port() != 0);
    CHECK(count(get(other.url("/?host=gpu-node-07")).body, "<a class=\"job\"") == 0);
    CHECK(count(get(other.url("/")).body, "<a class=\"job\"") == 0);
    CHECK(get(other.url("/job/" + key)).status == 404);
    CHECK(get(other.url("/job/------------------------------------.1")).status == 404);
  }
}
