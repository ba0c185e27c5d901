// tests/daemon/live_e2e_test.cc
//
// "Live" with the real daemon and a webhook receiver on loopback: a job written frame by frame
// shows its step rising in `jobs --json`, with `last_write` within a second of the last write;
// when the writer pauses past stalled_after_seconds the job is `stalled` and one TrainingStalled
// reaches the webhook, and it is `running` again, with a resolve, when the writer goes on; with
// web_url set every alert carries the job's page. And the warnings that stay: a predicted OOM is
// listed by `alerts` and marked in `jobs`.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <ctime>

#include "tests/support/alert_bodies.h"
#include "tests/support/e2e.h"
#include "tests/support/http_test_server.h"
#include "tests/support/serve_process.h"

using namespace oomtriage;
using namespace oomtriage::testing;
using nlohmann::json;

namespace {

const fs::path kSource(OOMTRIAGE_SOURCE_DIR);

// AI Toolkit's training bar at step n of 1000, ten steps a second.
std::string frame(int n) {
  return "my_lora:   " + std::to_string(n / 10) + "%|▏   | " + std::to_string(n) + "/1000 [00:0" +
         std::to_string(n % 10) + "<01:40, 10.00it/s, lr: 1.0e-04 loss: 4.5" +
         std::to_string(n % 10) + "e-01]\r";
}

int64_t parse_utc(const std::string& text) {
  std::tm tm{};
  REQUIRE(::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm) != nullptr);
  return ::timegm(&tm);
}

struct LiveRig {
  TempDir dir;
  fs::path out = dir.path / "output";
  fs::path config = dir.path / "oomtriage.yaml";
  fs::path store = dir.path / "state" / "oomtriage.db";
  explicit LiveRig(const std::string& url, const std::string& settings = "") {
    fs::create_directories(out / "my_lora");
    std::ofstream(config) << "watch:\n  - logs: " << (out / "*" / "log.txt").string() << "\n"
                          << "stalled_after_seconds: 4\nweb_url: http://oom.example.test/\n"
                          << settings
                          << "alerts:\n  - name: hook\n    type: webhook\n    url: " << url
                          << "\n    retry_initial_ms: 200\n";
  }
  // The job as `jobs --json` lists it (null when it is not listed yet).
  json job(const std::string& name = "my_lora") const {
    auto [rc, out] = oomtriage_says("jobs --json --store " + store.string());
    if (rc != 0) return nullptr;
    const json listed = json::parse(out, nullptr, false);
    if (!listed.is_object()) return nullptr;
    for (const json& job : listed["jobs"])
      if (job["name"] == name) return job;
    return nullptr;
  }
};

int64_t step_of(const json& job) {
  return job.is_object() && job["step"].is_number() ? job["step"].get<int64_t>() : -1;
}
std::string status_of(const json& job) { return job.is_object() ? job.value("status", "") : ""; }

}  // namespace

TEST_SUITE("daemon::live") {
  TEST_CASE(
      "a job written frame by frame: its step rises, last_write follows the writes, a pause is "
      "a stall alerted once and resolved when the log grows, and every alert links to its page") {
    HttpTestServer server([](const ReceivedRequest&, size_t) { return ScriptedResponse{}; });
    LiveRig rig(server.url());
    DaemonProcess daemon(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                         rig.dir.path / "err");
    INFO("the daemon's stderr: " << daemon.stderr_text());
    std::ofstream log(rig.out / "my_lora" / "log.txt", std::ios::binary);
    log << "Running 1 job\n" << std::flush;
    int n = 0;
    const auto write_frames = [&](int count) {
      for (int i = 0; i < count; ++i) {
        log << frame(++n) << std::flush;
        std::this_thread::sleep_for(20ms);
      }
      return std::chrono::system_clock::now();
    };

    write_frames(10);
    REQUIRE(wait_until([&] { return step_of(rig.job()) >= 5; }));
    const int64_t first = step_of(rig.job());
    const auto last_write = write_frames(20);
    REQUIRE(wait_until([&] { return step_of(rig.job()) == n; }));
    json job = rig.job();
    CHECK(step_of(job) > first);
    CHECK(job["total_steps"] == 1000);
    CHECK(job["status"] == "running");
    CHECK(job["rate"].get<double>() == doctest::Approx(10.0));
    CHECK(job["loss"].is_number());
    CHECK(job["eta_seconds"].get<int64_t>() == (1000 - n) / 10);
    CHECK(job["live_phase"] == "train_step");
    const int64_t written = std::chrono::system_clock::to_time_t(last_write);
    CHECK(std::llabs(parse_utc(job["last_write"].get<std::string>()) - written) <= 1);

    // The writer pauses: past 4 s (20 steps at 10 it/s are 2 s) the job is stalled, alerted once.
    // (4 s, not less: under ASan on two busy cores the checks above may take a few seconds.)
    REQUIRE(wait_until([&] { return status_of(rig.job()) == "stalled"; }, 15s));
    REQUIRE(wait_until([&] { return alerts_named(server, "TrainingStalled").size() == 1; }));
    const json stalled = alerts_named(server, "TrainingStalled")[0];
    CHECK(stalled["status"] == "firing");
    CHECK(stalled["labels"]["severity"] == "warning");
    CHECK(stalled["labels"]["training_job"] == "my_lora");
    CHECK(stalled["generatorURL"] == "http://oom.example.test/job/my_lora");
    CHECK(stalled["annotations"]["last_line"].get<std::string>().find("my_lora:") == 0);
    // Every face shows it: the job's page by its name (refreshing while the job is on), `top`,
    // and `report`, which prints the page's URL.
    {
      ServeProcess serve(
          {"--state-dir", (rig.dir.path / "state").string(), "serve", "--listen", "127.0.0.1:0"},
          rig.dir.path / "serve.err");
      REQUIRE(serve.port() != 0);
      const Fetched page = get(serve.url("/job/my_lora"));
      CHECK(page.status == 200);
      CHECK(page.body.find("stalled") != std::string::npos);
      CHECK(get(serve.url("/")).headers.find("Refresh: 10") != std::string::npos);
    }
    auto [top_rc, top] = oomtriage_says("top --once --store " + rig.store.string());
    CHECK(top_rc == 0);
    CHECK(top.find("my_lora") != std::string::npos);
    CHECK(top.find("stalled") != std::string::npos);
    auto [report_rc, report] = oomtriage_says("report my_lora --store " + rig.store.string() +
                                              " --config " + rig.config.string());
    CHECK(report_rc == 0);
    CHECK(report.find("Now: stalled") != std::string::npos);
    CHECK(report.find("Page: http://oom.example.test/job/my_lora") != std::string::npos);

    // Silence goes on: no second warning.
    std::this_thread::sleep_for(4500ms);
    CHECK(status_of(rig.job()) == "stalled");
    CHECK(alerts_named(server, "TrainingStalled").size() == 1);

    // The writer goes on: running again, and the stall resolved.
    write_frames(5);
    REQUIRE(wait_until([&] { return status_of(rig.job()) == "running"; }));
    REQUIRE(wait_until([&] { return alerts_named(server, "TrainingStalled").size() == 2; }));
    CHECK(alerts_named(server, "TrainingStalled")[1]["status"] == "resolved");

    // An OOM: its alert links to the same page.
    log << "\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB.\n"
        << std::flush;
    REQUIRE(wait_until([&] { return alerts_named(server, "TrainingOOM").size() == 1; }));
    for (const json& alert : received_alerts(server)) {
      CHECK(alert["generatorURL"] == "http://oom.example.test/job/my_lora");
      CHECK(alert["annotations"]["url"] == "http://oom.example.test/job/my_lora");
    }
    // A crashed job is not stalled however long it is silent.
    REQUIRE(wait_until([&] { return status_of(rig.job()) == "crashed_oom"; }));
    std::this_thread::sleep_for(4500ms);
    CHECK(status_of(rig.job()) == "crashed_oom");
    CHECK(alerts_named(server, "TrainingStalled").size() == 2);

    // The stall stays with the job: `alerts` lists it.
    auto [rc, listed] =
        oomtriage_says("--state-dir " + rig.store.parent_path().string() + " alerts");
    CHECK(rc == 0);
    CHECK(listed.find("stalled") != std::string::npos);
    CHECK(listed.find("Training stalled: my_lora") != std::string::npos);
  }
}
