// tests/daemon/stall_test.cc
//
// Stalled jobs on the daemon's own loop with a virtual clock (tests/support/virtual_daemon.h):
// the default stalled_after_seconds (900) and the rule that a slow job gets 20 times its step
// time, passed without waiting them out; one warning per stall, none for a job that ended,
// none for a log found silent at the start, and none with stalled_after_seconds: 0.
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/support/alert_bodies.h"
#include "tests/support/e2e.h"
#include "tests/support/http_test_server.h"
#include "tests/support/virtual_daemon.h"

using namespace oomtriage;
using namespace oomtriage::testing;
using nlohmann::json;

namespace {

// A training bar at `seconds_per_step` s/it, at step n of 100.
std::string slow_frame(const std::string& job, int n, double seconds_per_step) {
  return fmt::format("{}:  {}%|▏   | {}/100 [00:10<10:00, {:.2f}s/it, lr: 1.0e-04 loss: 0.5]\n",
                     job, n, n, seconds_per_step);
}

struct StallRig {
  TempDir dir;
  fs::path out = dir.path / "output";
  fs::path config = dir.path / "oomtriage.yaml";
  StallRig(const std::string& url, const std::string& settings) {
    fs::create_directories(out);
    std::ofstream(config) << "watch:\n  - logs: " << (out / "*" / "log.txt").string() << "\n"
                          << settings
                          << "alerts:\n  - name: hook\n    type: webhook\n    url: " << url
                          << "\n    group_wait_ms: 0\n";
  }
  void write(const std::string& job, const std::string& text) {
    fs::create_directories(out / job);
    std::ofstream(out / job / "log.txt", std::ios::app) << text;
  }
};

std::vector<std::string> stalled_jobs(const HttpTestServer& server, const std::string& status) {
  std::vector<std::string> jobs;
  for (const json& alert : alerts_named(server, "TrainingStalled"))
    if (alert["status"] == status) jobs.push_back(alert["labels"]["training_job"]);
  return jobs;
}

}  // namespace

TEST_SUITE("daemon::live") {
  TEST_CASE("the default 900 s, or 20 times a slow job's step time: one warning each, resolved") {
    HttpTestServer server([](const ReceivedRequest&, size_t) { return ScriptedResponse{}; });
    StallRig rig(server.url(), "");
    rig.write("quick", "Running 1 job\n");
    rig.write("slow", "Running 1 job\n");
    rig.write("done", "Running 1 job\n");
    VirtualDaemon daemon(rig.dir.path / "state", rig.config, rig.dir.path / "err");
    for (int n = 1; n <= 3; ++n) {
      rig.write("quick", slow_frame("quick", n, 2.0));  // 20 x 2 s < 900 s
      rig.write("slow", slow_frame("slow", n, 60.0));   // 20 x 60 s = 1200 s
      rig.write("done", slow_frame("done", n, 2.0));
      daemon.pass(std::chrono::seconds(2), std::chrono::milliseconds(100));
    }
    // A job that ended is never stalled, however long its log stays silent.
    rig.write("done", "Training completed\nSaved to done.safetensors\n");
    daemon.pass(std::chrono::seconds(2), std::chrono::milliseconds(100));

    daemon.pass(std::chrono::seconds(880), std::chrono::seconds(1));
    CHECK(alerts_named(server, "TrainingStalled").empty());
    daemon.pass(std::chrono::seconds(30), std::chrono::seconds(1));
    CHECK(stalled_jobs(server, "firing") == std::vector<std::string>{"quick"});
    daemon.pass(std::chrono::seconds(300), std::chrono::seconds(1));
    CHECK(stalled_jobs(server, "firing") == std::vector<std::string>{"quick", "slow"});
    // Still silent an hour later: nothing more.
    daemon.pass(std::chrono::seconds(3600), std::chrono::seconds(10));
    CHECK(alerts_named(server, "TrainingStalled").size() == 2);

    rig.write("quick", slow_frame("quick", 4, 2.0));
    REQUIRE(daemon.run_until([&] { return stalled_jobs(server, "resolved").size() == 1; }));
    CHECK(stalled_jobs(server, "resolved") == std::vector<std::string>{"quick"});
    const std::string journal = daemon.stderr_text();
    CHECK(journal.find("quick: stalled:") != std::string::npos);
    CHECK(journal.find("quick: going on again after") != std::string::npos);
    CHECK(journal.find("done: stalled") == std::string::npos);
  }

  TEST_CASE("stalled_after_seconds: 0 turns it off") {
    HttpTestServer server([](const ReceivedRequest&, size_t) { return ScriptedResponse{}; });
    StallRig rig(server.url(), "stalled_after_seconds: 0\n");
    rig.write("quick", "Running 1 job\n");
    VirtualDaemon daemon(rig.dir.path / "state", rig.config, rig.dir.path / "err");
    rig.write("quick", slow_frame("quick", 1, 2.0));
    daemon.pass(std::chrono::seconds(2000), std::chrono::seconds(1));
    CHECK(alerts_named(server, "TrainingStalled").empty());
  }
}
