// tests/daemon/alert_timing_test.cc
//
// The dispatcher's waiting follows the steady clock, not the wall clock: a wall clock stepped
// back an hour or forward two days (injected) delays no retry past retry_max_ms and fails no
// alert before its horizon, live and across a restart (stored times clamped on load). The
// horizon also counts attempts. And storm control: 300 jobs dying within seconds reach a Slack
// receiver as a handful of messages listing every one of them, each with its own key. The
// dispatcher and the daemon's loop wait on a virtual clock here (tests/support/virtual_clock.h):
// a retry's delay is measured on the clock it waited on, and the storm's windows pass without
// being waited out.
#include <doctest/doctest.h>

#include <atomic>
#include <limits>
#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "daemon/alerts/alert_dispatcher.h"
#include "daemon/alerts/alert_payload.h"
#include "daemon/alerts/retry_policy.h"
#include "db/store.h"
#include "tests/support/e2e.h"
#include "tests/support/http_test_server.h"
#include "tests/support/store_rows.h"
#include "tests/support/virtual_clock.h"
#include "tests/support/virtual_daemon.h"

using namespace oomtriage;
using namespace oomtriage::testing;
using nlohmann::json;

namespace {

constexpr int64_t kT = 1764835200;  // the wall clock when the alert was queued

// A store holding one event with a pending outbox row for `hook`, queued at kT.
std::unique_ptr<db::Store> store_with_one_alert(const fs::path& path) {
  auto store = db::Store::open(path.string());
  REQUIRE(store);
  db::Progress progress = testing::progress_for_new_job(**store, "my_lora", 7, kT);
  db::EventRow row;
  row.offset = 100;
  row.kind = "cuda";
  row.phase = "train_step";
  row.event_json = R"({"kind":"cuda","phase":"train_step"})";
  row.fixes_json = "[]";
  progress.events = {row};
  progress.receivers = {"hook"};
  REQUIRE(*(*store)->commit_progress(progress, kT) == 1);
  return std::move(*store);
}

daemon::DaemonConfig config_for(const std::string& url) {
  daemon::DaemonConfig config;
  daemon::Receiver r;
  r.name = "hook";
  r.type = "webhook";
  r.url = url;
  r.timeout_ms = 1000;
  r.retry_initial_ms = 200;
  r.retry_max_ms = 1000;
  r.group_wait_ms = 0;
  config.alerts = {r};
  return config;
}

std::string state_of(db::Store& store) {
  auto rows = store.list_alerts("", 10);
  REQUIRE(rows);
  REQUIRE(rows->size() == 1);
  return rows->front().state;
}

// Runs the loop until the alert is delivered or failed, at most `limit` of the dispatcher's
// (virtual) time: each turn handles what came (the receiver's answer), then time moves on.
void run_until_settled(boost::asio::io_context& io, VirtualClock& clock, db::Store& store,
                       std::chrono::milliseconds limit) {
  const auto until = clock.now() + limit;
  const auto real_limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (clock.now() < until && state_of(store) == "pending" &&
         std::chrono::steady_clock::now() < real_limit) {
    io.restart();
    io.run_for(std::chrono::milliseconds(2));
    clock.advance(std::chrono::milliseconds(10));
  }
}

// The receiver refuses the first request (503) and takes the rest; the wall clock steps by
// `step` seconds right after that first answer.
void check_step(int64_t step) {
  TempDir dir;
  auto store = store_with_one_alert(dir.path / "s.db");
  std::atomic<int64_t> wall{kT};
  HttpTestServer server([&](const ReceivedRequest&, size_t index) {
    if (index == 0) {
      wall += step;
      return ScriptedResponse{503};
    }
    return ScriptedResponse{};
  });
  boost::asio::io_context io;
  VirtualClock clock(io);
  daemon::AlertDispatcher dispatcher(
      io, *store, config_for(server.url("/oom")), nullptr, [&] { return wall.load(); }, clock);
  REQUIRE(dispatcher.start());
  dispatcher.poke();
  const auto started = clock.now();
  run_until_settled(io, clock, *store, std::chrono::seconds(5));
  CHECK(state_of(*store) == "delivered");
  CHECK(server.count() == 2);
  // The retry came after the backoff (200 ms, jittered), not after the hour or as a failure.
  CHECK(clock.now() - started < std::chrono::seconds(3));
}

// A restarted dispatcher reads a row stored with next_attempt_at an hour away (the clock was
// stepped back after it was written) or queued two days "ago" (stepped forward): it sends the
// row within retry_max_ms, and delivers it.
void check_restart(int64_t wall_at_restart, int64_t stored_next = kT + 3600) {
  TempDir dir;
  auto store = store_with_one_alert(dir.path / "s.db");
  auto rows = store->due_alerts("hook", kT, 10);
  REQUIRE(rows);
  REQUIRE(rows->size() == 1);
  REQUIRE(store->mark_alerts({rows->front().id}, "pending", 1, stored_next, "HTTP 503"));
  HttpTestServer server([](const ReceivedRequest&, size_t) { return ScriptedResponse{}; });
  boost::asio::io_context io;
  VirtualClock clock(io);
  daemon::AlertDispatcher dispatcher(
      io, *store, config_for(server.url("/oom")), nullptr,
      [wall_at_restart] { return wall_at_restart; }, clock);
  REQUIRE(dispatcher.start());
  dispatcher.poke();
  const auto started = clock.now();
  run_until_settled(io, clock, *store, std::chrono::seconds(5));
  CHECK(state_of(*store) == "delivered");
  CHECK(clock.now() - started < std::chrono::milliseconds(2500));
}

}  // namespace

TEST_SUITE("daemon::alert_timing") {
  TEST_CASE("the wall clock stepped back an hour after a failure: the retry still comes at once") {
    check_step(-3600);
  }
  TEST_CASE("the wall clock stepped forward two days: the alert is retried, not failed as old") {
    check_step(2 * 86400);
  }
  TEST_CASE("restarted with a stored retry time an hour away: clamped to retry_max_ms") {
    check_restart(kT);
    check_restart(kT - 3600);
    check_restart(kT + 2 * 86400);
    // A row edited by hand to the ends of the integers is clamped too, without overflow.
    check_restart(kT, std::numeric_limits<int64_t>::max());
    check_restart(kT, std::numeric_limits<int64_t>::min());
  }
  TEST_CASE("the horizon counts attempts: the backoff's own count, then failed") {
    daemon::Receiver r;  // 1 s doubling to 5 min, 24 h
    const int64_t n = daemon::horizon_attempts(r);
    CHECK(n > 280);
    CHECK(n < 310);
    daemon::HttpResponse unavailable;
    unavailable.status = 503;
    using V = daemon::DeliveryVerdict;
    CHECK(daemon::judge_response(unavailable, r, n, 10, 1.0).kind == V::kRetry);
    CHECK(daemon::judge_response(unavailable, r, n + 1, 10, 1.0).kind == V::kFailed);
    CHECK(daemon::judge_response(unavailable, r, 2, 86401, 1.0).kind == V::kFailed);
  }

  TEST_CASE(
      "a storm's payloads list every member with its own key, within each platform's limits") {
    daemon::AlertContent storm;
    storm.host = "gpu-node-1";
    for (int i = 1; i <= 150; ++i) {
      daemon::AlertContent m;
      m.event_id = i;
      m.job = "job_" + std::to_string(i) + "_<@everyone>";
      m.host = storm.host;
      m.kind = "cuda";
      m.phase = "train_step";
      m.step = "12 of 3000";
      m.fixes.push_back({"lower_batch", "Lower the batch", {}, ""});
      storm.storm.push_back(m);
    }
    CHECK(storm.title() == "150 OOMs on gpu-node-1");
    CHECK(storm.webhook_id() == "storm_evt_1_150");
    const std::string slack = daemon::slack_payload(storm).dump();
    for (int i = 1; i <= 150; ++i)
      CHECK(slack.find("[evt_" + std::to_string(i) + "]") != std::string::npos);
    CHECK(slack.find("<@everyone>") == std::string::npos);
    const json slack_json = daemon::slack_payload(storm);
    for (const auto& block : slack_json["blocks"]) {
      if (block["type"] == "section")
        CHECK(block["text"]["text"].get<std::string>().size() <= 3000);
    }
    CHECK(slack_json["blocks"].size() <= 50);
    const json discord = daemon::discord_payload(storm);
    const std::string description = discord["embeds"][0]["description"];
    CHECK(description.size() <= 4096);
    CHECK(std::regex_search(description, std::regex("and [0-9]+ more")));
    const json hook = daemon::alertmanager_webhook_payload(storm, "hook");
    REQUIRE(hook["alerts"].size() == 150);
    CHECK(hook["alerts"][41]["annotations"]["webhook_id"] == "evt_42");
    CHECK(daemon::alertmanager_api_payload(storm).size() == 150);
  }

  TEST_CASE("fault: 300 jobs die within seconds: a handful of Slack messages list every one") {
    HttpTestServer slack([](const ReceivedRequest&, size_t) { return ScriptedResponse{}; });
    TempDir dir;
    const fs::path out = dir.path / "output";
    fs::create_directories(out);
    std::ofstream(dir.path / "slack.url") << slack.url("/services/T000/B000/SECRET") << "\n";
    std::ofstream(dir.path / "oomtriage.yaml")
        << "watch:\n  - logs: " << (out / "*" / "log.txt").string()
        << "\nalerts:\n  - type: slack\n    url_file: " << (dir.path / "slack.url").string()
        << "\n    group_wait_ms: 2000\n";
    constexpr int kJobs = 300;
    for (int i = 0; i < kJobs; ++i) {
      fs::create_directories(out / ("job" + std::to_string(i)));
      std::ofstream(out / ("job" + std::to_string(i)) / "log.txt") << "Running 1 job\n";
    }
    VirtualDaemon daemon(dir.path / "state", dir.path / "oomtriage.yaml", dir.path / "err");
    const std::string crash = slurp(kGolden / "aitk_host_sigkill.log");
    for (int i = 0; i < kJobs; ++i) {
      std::ofstream(out / ("job" + std::to_string(i)) / "log.txt", std::ios::app) << crash;
      if (i % 30 == 29) daemon.pass(std::chrono::milliseconds(500));
    }
    // Each OOM's key is its event's UUID (docs/alerts.md "Ids").
    const std::regex key("\\[evt_([0-9a-f]{8}-[0-9a-f-]{27})\\]");
    std::multiset<std::string> listed;
    const auto all_listed = [&] {
      listed.clear();
      for (const auto& request : slack.requests()) {
        const std::string& body = request.body;
        for (auto it = std::sregex_iterator(body.begin(), body.end(), key);
             it != std::sregex_iterator(); ++it)
          listed.insert((*it)[1]);
      }
      return listed.size() >= kJobs;
    };
    const bool complete = daemon.run_until(all_listed, std::chrono::seconds(60));
    daemon.pass(std::chrono::milliseconds(2500));  // nothing more may come
    all_listed();
    MESSAGE("posts: " << slack.count() << ", listed: " << listed.size());
    CHECK(complete);
    CHECK(listed.size() == kJobs);
    CHECK(std::set<std::string>(listed.begin(), listed.end()).size() == kJobs);  // each once
    CHECK(slack.count() <= 12);
  }
}
