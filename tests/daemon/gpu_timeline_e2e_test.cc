// tests/daemon/gpu_timeline_e2e_test.cc
//
// The GPU memory timeline end to end: the real daemon, a stand-in NVML (tests/support/
// fake_nvml.cc) loaded through OOMTRIAGE_NVML_LIBRARY whose cards the test scripts, a trainer
// that is a real process holding its log open for writing, a stranger process on the same card,
// and a webhook receiver on loopback. A run that climbs through training into a preview at 96%
// of what it may use gets exactly one TrainingNearOOM warning, before its OOM's alert; its
// timeline is stored with its steps and phases, the stranger named as another process, and
// `report` (text, HTML, JSON) and `jobs` show it. Without NVML the daemon says so once and works
// as before.
#include <doctest/doctest.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/support/e2e.h"
#include "tests/support/alert_bodies.h"
#include "tests/support/http_test_server.h"
#include "tests/support/log_samples.h"
#include "tests/support/skip.h"
#include "triage/gpu_timeline.h"

using namespace oomtriage;
using namespace oomtriage::testing;
using nlohmann::json;

namespace {

constexpr uint64_t kGiB = 1024ull * 1024 * 1024;
const ScriptedResponse kOk{};

// A process that sleeps with its stdout appended to `log` (a trainer holding its log), or to
// /dev/null (a stranger).
struct Sleeper {
  pid_t pid = -1;
  explicit Sleeper(const fs::path& log) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const char* argv[] = {"sleep", "120", nullptr};
    REQUIRE(posix_spawnp(&pid, "sleep", &actions, nullptr, const_cast<char**>(argv), environ) == 0);
    posix_spawn_file_actions_destroy(&actions);
  }
  void kill() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
  ~Sleeper() { kill(); }
};

// The stand-in NVML's cards, rewritten whole (write aside, rename) so a sample never reads half.
struct FakeCards {
  fs::path path;
  explicit FakeCards(fs::path p) : path(std::move(p)) {}
  // `extra`: lines after the cards ("hang 0", "error 0 15").
  void set(uint64_t total, const std::vector<std::pair<pid_t, uint64_t>>& processes,
           const std::string& extra = "") {
    uint64_t used = 0;
    std::string text = extra;
    for (const auto& [pid, bytes] : processes) {
      text += fmt::format("process 0 {} {}\n", pid, bytes);
      used += bytes;
    }
    const fs::path tmp = path.string() + ".tmp";
    std::ofstream(tmp, std::ios::trunc) << fmt::format("gpu 0 {} {}\n", total, used) << text;
    fs::rename(tmp, path);
  }
  // The samples of card 0 the stand-in has answered (a line each in <path>.samples).
  size_t samples() const {
    const std::string lines = slurp(path.string() + ".samples");
    return static_cast<size_t>(std::count(lines.begin(), lines.end(), '\n'));
  }
  // Waits until the daemon has taken `n` more samples: its own sampling is the clock here.
  bool sampled(size_t n) const {
    const size_t from = samples();
    return wait_until([&] { return samples() >= from + n; });
  }
};

void append(const fs::path& log, const std::string& text) {
  std::ofstream(log, std::ios::app | std::ios::binary) << text;
}

struct Rig {
  TempDir dir;
  fs::path out = dir.path / "output";
  fs::path job = out / "my_lora";
  fs::path log = job / "log.txt";
  fs::path config = dir.path / "oomtriage.yaml";
  Rig(const std::string& url) {
    fs::create_directories(job);
    std::ofstream(config) << "watch:\n  - logs: " << (out / "*" / "log.txt").string() << "\n"
                          << "gpu_sample_ms: 100\nalert_group_seconds: 0\n"
                          // A log written this often is busy: read it soon all the same.
                          << "read_interval_ms: 50\nburst_check_ms: 20\n"
                          << "metrics:\n  listen: 127.0.0.1:0\n"
                          << "alerts:\n  - name: hook\n    type: webhook\n    url: " << url
                          << "\n    retry_initial_ms: 200\n";
  }
  std::pair<int, std::string> says(const std::string& args) {
    return oomtriage_says("--state-dir " + (dir.path / "state").string() + " " + args);
  }
};

}  // namespace

TEST_SUITE("daemon::gpu timeline") {
  TEST_CASE(
      "a run climbing to 96% gets one near-OOM warning before its OOM - its timeline is stored "
      "with steps and phases, another process named as such, and shown by report and jobs") {
    if (!have_program("curl"))
      OOMTRIAGE_SKIP("curl is not installed (scripts/setup.sh installs it)");
    HttpTestServer server([](const ReceivedRequest&, size_t) { return kOk; });
    Rig rig(server.url());
    FakeCards cards(rig.dir.path / "cards");
    ScopedEnv library("OOMTRIAGE_NVML_LIBRARY", OOMTRIAGE_FAKE_NVML);
    ScopedEnv state("FAKE_NVML_STATE", cards.path.string());
    Sleeper stranger("/dev/null");
    // 22.75 GiB usable: 95% is 21.61 GiB.
    const uint64_t card = 24 * kGiB, others = kGiB + kGiB / 4;
    cards.set(card, {{stranger.pid, others}});
    std::optional<DaemonProcess> daemon;
    daemon.emplace(rig.dir.path / "state",
                   std::vector<std::string>{"daemon", "--config", rig.config.string()},
                   rig.dir.path / "err");
    INFO("the daemon's stderr: " << daemon->stderr_text());
    // The job starts after the daemon: its log appears, written by its trainer.
    Sleeper trainer(rig.log);
    append(rig.log, "Running 1 job\n");
    StoreView view{rig.dir.path / "state" / "oomtriage.db"};
    REQUIRE(wait_until([&] { return view.story("my_lora").has_value(); }));
    cards.set(card, {{trainer.pid, 6 * kGiB}, {stranger.pid, others}});
    append(rig.log,
           "#############################################\n# Running job: my_lora\n"
           "#############################################\nLoading Flux model\n");
    REQUIRE(cards.sampled(4));
    for (int step = 1; step <= 8; ++step) {
      cards.set(card, {{trainer.pid, (16 + step / 4) * kGiB}, {stranger.pid, others}});
      append(rig.log, test::bar("my_lora", step, 100) + "\n");
      REQUIRE(cards.sampled(3));
    }
    append(rig.log, "Sampling at step 8\n");
    REQUIRE(cards.sampled(2));  // read before the preview's memory is sampled
    const uint64_t preview = 21 * kGiB + 860 * (1ull << 20);  // 96.0% of 22.75 GiB
    cards.set(card, {{trainer.pid, preview}, {stranger.pid, others}});
    REQUIRE(wait_until([&] { return alerts_named(server, "TrainingNearOOM").size() == 1; }));
    // The gauges while the preview holds the card: the job's memory, and the stranger's apart.
    std::smatch said;
    const std::string err = daemon->stderr_text();
    REQUIRE(std::regex_search(err, said, std::regex(R"(serving /metrics on port (\d+))")));
    const fs::path scraped = rig.dir.path / "metrics.txt";
    REQUIRE(
        run_shell("curl -sf http://127.0.0.1:" + said[1].str() + "/metrics > " + scraped.string())
            .first == 0);
    const std::string metrics = slurp(scraped);
    CHECK(metrics.find(fmt::format("oomtriage_job_gpu_memory_bytes{{job=\"my_lora\",gpu=\"0\"}} {}",
                                   preview)) != std::string::npos);
    CHECK(metrics.find(fmt::format("oomtriage_gpu_other_processes_bytes{{gpu=\"0\"}} {}",
                                   others)) != std::string::npos);
    CHECK(metrics.find("oomtriage_near_oom_warnings_total 1") != std::string::npos);
    REQUIRE(cards.sampled(6));  // more samples at the same height: no second warning
    // Neither a reload nor a restart warns again for the same height.
    ::kill(daemon->pid(), SIGHUP);
    REQUIRE(wait_until([&] {
      return daemon->stderr_text().find("SIGHUP: config reloaded") != std::string::npos;
    }));
    REQUIRE(cards.sampled(6));
    CHECK(daemon->stop(SIGTERM) == 0);
    const std::string first_stderr = daemon->stderr_text();
    daemon.emplace(rig.dir.path / "state",
                   std::vector<std::string>{"daemon", "--config", rig.config.string()},
                   rig.dir.path / "err2");
    REQUIRE(cards.sampled(6));
    CHECK(alerts_named(server, "TrainingNearOOM").size() == 1);
    append(rig.log, test::traceback("  File \"run.py\", line 1, in <module>\n"));
    trainer.kill();
    cards.set(card, {{stranger.pid, others}});
    REQUIRE(wait_until([&] { return alerts_named(server, "TrainingOOM").size() == 1; }));

    const std::vector<std::string> order = alertnames(server);
    const auto near = std::find(order.begin(), order.end(), "TrainingNearOOM");
    const auto oom = std::find(order.begin(), order.end(), "TrainingOOM");
    CHECK(near < oom);
    const auto warnings = alerts_named(server, "TrainingNearOOM");
    REQUIRE(warnings.size() == 1);
    const json& warning = warnings[0];
    CHECK(warning["labels"]["severity"] == "warning");
    CHECK(warning["labels"]["training_job"] == "my_lora");
    CHECK(warning["labels"]["phase"] == "sampling");
    CHECK(warning["annotations"]["step"] == "8 of 100");
    CHECK(warning["annotations"]["peak"] == "21.84 GiB");
    CHECK(warning["annotations"]["usable_memory"].get<std::string>().find(
              "22.75 GiB of a 24.00 GiB card (1.25 GiB held by other processes)") !=
          std::string::npos);
    CHECK_FALSE(warning["annotations"]["top_change"].get<std::string>().empty());
    CHECK(first_stderr.find("job my_lora: near OOM in sampling at step 8 of 100") !=
          std::string::npos);

    // Stored once the trainer left the card.
    REQUIRE(wait_until([&] {
      const auto story = view.story("my_lora");
      return story && !story->gpu_memory.empty() && story->gpu_memory[0].peak_bytes == preview;
    }));
    const db::GpuMemoryRow row = view.story("my_lora")->gpu_memory[0];
    CHECK(row.gpu == 0);
    CHECK(row.total_bytes == card);
    CHECK(row.peak_phase == "sampling");
    CHECK(row.peak_step == 8);
    CHECK(row.others_peak_bytes == others);
    CHECK(row.warned_bytes == preview);
    CHECK(row.from_start);  // sampled while it loaded, before its first step
    const auto timeline = triage::GpuTimeline::from_json(row.timeline_json);
    REQUIRE(timeline);
    const auto peaks = timeline->phase_peaks();
    CHECK(peaks.contains(parsers::Phase::kTrainStep));
    CHECK(peaks.at(parsers::Phase::kTrainStep) == 18 * kGiB);
    CHECK(peaks.at(parsers::Phase::kSampling) == preview);
    int stepped = 0;
    for (const triage::GpuPoint& point : timeline->points()) stepped += point.step_from ? 1 : 0;
    CHECK(stepped >= 4);

    // Not structured bindings: INFO's lambda may not capture one (clang 14).
    const auto report = rig.says("report my_lora");
    const int text_code = report.first;
    const std::string& text = report.second;
    INFO("report: " << text);
    CHECK(text_code == 0);
    CHECK(text.find("GPU memory (sampled)") != std::string::npos);
    CHECK(text.find("peak 21.84 GiB of 24.00 GiB (91%) in sampling at step 8") !=
          std::string::npos);
    CHECK(text.find("other processes on GPU 0 held up to 1.25 GiB") != std::string::npos);
    const fs::path page = rig.dir.path / "report.html";
    REQUIRE(rig.says("report my_lora --html " + page.string()).first == 0);
    const std::string html = slurp(page);
    CHECK(html.find("id=\"gpu-timeline\"") != std::string::npos);
    CHECK(html.find("data-phase=\"sampling\"") != std::string::npos);
    CHECK(html.find("data-phase=\"train_step\"") != std::string::npos);
    CHECK(html.find("class=\"crash\"") != std::string::npos);
    CHECK(html.find("class=\"others\"") != std::string::npos);
    const std::string jobs = rig.says("jobs --json").second;
    const json listed = json::parse(jobs, nullptr, false);
    REQUIRE(listed.is_object());
    CHECK(listed["jobs"][0]["gpu_peak_bytes"] == preview);
    CHECK(listed["jobs"][0]["gpu_headroom_bytes"] == card - preview);
    CHECK(daemon->stop(SIGTERM) == 0);
  }

  TEST_CASE(
      "run: every process in the child's group is the job's - one warning at 96%, the timeline "
      "stored with the run") {
    TempDir dir;
    FakeCards cards(dir.path / "cards");
    cards.set(24 * kGiB, {});  // a card, no process yet
    ScopedEnv library("OOMTRIAGE_NVML_LIBRARY", OOMTRIAGE_FAKE_NVML);
    ScopedEnv state("FAKE_NVML_STATE", cards.path.string());
    std::ofstream(dir.path / "daemon.yaml")
        << "gpu_sample_ms: 100\nwatch:\n  - logs: " << (dir.path / "*.log").string() << "\n";
    // The trainer puts itself on the card ($$ leads the child's group), trains, previews at 96%
    // and completes.
    const std::string card = cards.path.string();
    std::ofstream(dir.path / "train.sh")
        << "card() { printf 'gpu 0 " << 24 * kGiB << " 0\\nprocess 0 %d %d\\n' $$ $1 > " << card
        << ".tmp; mv " << card << ".tmp " << card << "; }\n"
        << "for step in 1 2 3 4; do card " << 16 * kGiB << "; echo \"" << test::bar("steps", 1, 4)
        << "\" | sed \"s/ 1\\/4/ $step\\/4/\"; sleep 0.3; done\n"
        << "echo 'Sampling at step 4'; card " << static_cast<uint64_t>(24 * kGiB * 0.96)
        << "; sleep 0.8\n";
    const auto said = oomtriage_says(
        "--state-dir " + (dir.path / "state").string() + " run --job sh_job --daemon-config " +
        (dir.path / "daemon.yaml").string() + " --log " + (dir.path / "run.log").string() +
        " -- sh " + (dir.path / "train.sh").string());
    const int code = said.first;
    const std::string& out = said.second;
    INFO("run said: " << out);
    CHECK(code == 0);
    const std::string warning =
        "oomtriage run: warning: job sh_job: near OOM in sampling at step 4";
    CHECK(out.find(warning) != std::string::npos);
    CHECK(out.find(warning) == out.rfind(warning));
    StoreView view{dir.path / "state" / "oomtriage.db"};
    const auto story = view.story("sh_job");
    REQUIRE(story);
    REQUIRE(story->gpu_memory.size() == 1);
    const db::GpuMemoryRow& row = story->gpu_memory[0];
    CHECK(row.run_id == story->runs[0].id);
    CHECK(row.peak_phase == "sampling");
    CHECK(row.peak_bytes == static_cast<uint64_t>(24 * kGiB * 0.96));
    CHECK(row.others_peak_bytes == 0);
    CHECK(row.warned_bytes == row.peak_bytes);
  }

  TEST_CASE(
      "a card that does not answer holds nothing: OOMs are stored and alerted while NVML hangs, "
      "the card is said once, and the gap shows in report") {
    HttpTestServer server([](const ReceivedRequest&, size_t) { return kOk; });
    Rig rig(server.url());
    FakeCards cards(rig.dir.path / "cards");
    ScopedEnv library("OOMTRIAGE_NVML_LIBRARY", OOMTRIAGE_FAKE_NVML);
    ScopedEnv state("FAKE_NVML_STATE", cards.path.string());
    const uint64_t card = 24 * kGiB;
    cards.set(card, {});
    DaemonProcess daemon(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                         rig.dir.path / "err");
    INFO("the daemon's stderr: " << daemon.stderr_text());
    Sleeper trainer(rig.log);
    append(rig.log,
           "Running 1 job\n# Running job: my_lora\n" + test::bar("my_lora", 1, 100) + "\n");
    cards.set(card, {{trainer.pid, 10 * kGiB}});
    StoreView view{rig.dir.path / "state" / "oomtriage.db"};
    REQUIRE(wait_until([&] { return view.story("my_lora").has_value(); }));
    REQUIRE(cards.sampled(5));  // sampled a few times

    // A lost card's error is said once, and its return once.
    cards.set(card, {{trainer.pid, 10 * kGiB}}, "error 0 15\n");
    const std::string lost =
        "GPU 0: NVML error, its memory is not sampled: nvmlDeviceGetMemoryInfo: GPU is lost "
        "(NVML error 15)";
    REQUIRE(wait_until([&] { return daemon.stderr_text().find(lost) != std::string::npos; }));
    REQUIRE(cards.sampled(5));
    cards.set(card, {{trainer.pid, 10 * kGiB}});
    REQUIRE(wait_until([&] {
      return daemon.stderr_text().find("GPU 0: NVML answers again") != std::string::npos;
    }));
    CHECK(daemon.stderr_text().find(lost) == daemon.stderr_text().rfind(lost));

    // The driver wedges: nvmlDeviceGetMemoryInfo does not return until the test lets it.
    cards.set(card, {{trainer.pid, 10 * kGiB}}, "hang 0\n");
    const std::string silent = "GPU 0 is not answering: nvmlDeviceGetMemoryInfo has not returned";
    REQUIRE(wait_until([&] { return daemon.stderr_text().find(silent) != std::string::npos; }));
    // Three OOMs while it hangs, in three jobs, each stored and alerted while it still hangs.
    for (int n = 1; n <= 3; ++n) {
      const std::string job = n == 1 ? "my_lora" : fmt::format("job{}", n);
      const fs::path log = rig.out / job / "log.txt";
      fs::create_directories(log.parent_path());
      append(log, (n == 1 ? "" : "Running 1 job\n# Running job: " + job + "\n") +
                      test::bar(job, 10 * n, 100) + "\n" +
                      test::traceback("  File \"run.py\", line 1, in <module>\n"));
      REQUIRE(wait_until(
          [&] { return alerts_named(server, "TrainingOOM").size() == static_cast<size_t>(n); }));
      const auto story = view.story(job);
      REQUIRE(story);
      CHECK(story->events.size() == 1);
    }
    std::smatch port;
    const std::string err = daemon.stderr_text();
    REQUIRE(std::regex_search(err, port, std::regex(R"(serving /metrics on port (\d+))")));
    const fs::path scraped = rig.dir.path / "metrics.txt";
    REQUIRE(
        run_shell("curl -sf http://127.0.0.1:" + port[1].str() + "/metrics > " + scraped.string())
            .first == 0);
    CHECK(slurp(scraped).find("oomtriage_gpu_not_answering{gpu=\"0\"} 1") != std::string::npos);
    CHECK(daemon.stderr_text().find(silent) == daemon.stderr_text().rfind(silent));

    cards.set(card, {{trainer.pid, 10 * kGiB}});
    REQUIRE(wait_until([&] {
      return daemon.stderr_text().find("GPU 0 answers again after") != std::string::npos;
    }));
    trainer.kill();
    cards.set(card, {});
    REQUIRE(wait_until([&] {
      const auto story = view.story("my_lora");
      if (!story || story->gpu_memory.empty()) return false;
      const auto timeline = triage::GpuTimeline::from_json(story->gpu_memory[0].timeline_json);
      return timeline && timeline->gaps().size() == 1;
    }));
    const auto report = rig.says("report my_lora");
    const std::string text = report.second;
    INFO("report: " << text);
    CHECK(text.find("gap: GPU 0 did not answer NVML for") != std::string::npos);
    const json doc = json::parse(rig.says("report my_lora --json").second, nullptr, false);
    REQUIRE(doc.is_object());
    CHECK(doc["gpu_memory"][0]["gaps"].size() == 1);
    CHECK(daemon.stop(SIGTERM) == 0);
  }

  TEST_CASE("run: a card that does not answer never holds the trainer's output") {
    TempDir dir;
    FakeCards cards(dir.path / "cards");
    ScopedEnv library("OOMTRIAGE_NVML_LIBRARY", OOMTRIAGE_FAKE_NVML);
    ScopedEnv state("FAKE_NVML_STATE", cards.path.string());
    cards.set(24 * kGiB, {});  // a card, no process yet
    std::ofstream(dir.path / "daemon.yaml")
        << "gpu_sample_ms: 50\nwatch:\n  - logs: " << (dir.path / "*.log").string() << "\n";
    // The trainer wedges the card, writes far more than a pipe holds (the pass-through must keep
    // reading), and lets the card go only after its last line: were `run` to wait for NVML, the
    // trainer would block on its full pipe and never get there (`timeout` ends that case).
    const std::string path = cards.path.string();
    std::ofstream(dir.path / "train.sh")
        << "printf 'gpu 0 " << 24 * kGiB << " 0\\nprocess 0 %d 1000\\nhang 0\\n' $$ > " << path
        << "\nsleep 4\n"
        << "i=0; while [ $i -lt 3000 ]; do echo \"line $i of filler text to fill a pipe buffer "
           "quickly .......................................\"; i=$((i+1)); done\n"
        << "echo done-writing\nprintf 'gpu 0 " << 24 * kGiB << " 0\\n' > " << path << "\n";
    const auto said = run_shell(
        "timeout 60 " + std::string(OOMTRIAGE_BINARY) + " --state-dir " +
        (dir.path / "state").string() + " run --job hung_job --daemon-config " +
        (dir.path / "daemon.yaml").string() + " --log " + (dir.path / "run.log").string() +
        " -- sh " + (dir.path / "train.sh").string() + " 2>&1");
    const int code = said.first;
    const std::string& out = said.second;
    INFO("run said: " << out.substr(out.size() > 4000 ? out.size() - 4000 : 0));
    CHECK(code == 0);
    CHECK(out.find("done-writing") != std::string::npos);
    CHECK(out.find("oomtriage run: GPU 0 is not answering") != std::string::npos);
    CHECK(slurp(dir.path / "run.log").find("line 2999 of filler") != std::string::npos);
  }

  TEST_CASE("without NVML the daemon says so once and alerts as before") {
    HttpTestServer server([](const ReceivedRequest&, size_t) { return kOk; });
    Rig rig(server.url());
    ScopedEnv library("OOMTRIAGE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1");
    DaemonProcess daemon(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                         rig.dir.path / "err");
    append(rig.log,
           "Running 1 job\n" + test::traceback("  File \"run.py\", line 1, in <module>\n"));
    REQUIRE(wait_until([&] { return alerts_named(server, "TrainingOOM").size() == 1; }));
    const std::string err = daemon.stderr_text();
    const std::string line =
        "no GPU memory timeline: NVML is not available (/nonexistent/libnvidia-ml.so.1)";
    CHECK(err.find(line) != std::string::npos);
    CHECK(err.find(line) == err.rfind(line));
    CHECK(alerts_named(server, "TrainingNearOOM").empty());
  }
}
