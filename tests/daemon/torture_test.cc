// tests/daemon/torture_test.cc
//
// Torture, bounded to about a minute: 20 AI Toolkit-style jobs written at full speed, each crashing
// and restarting three times (60 incidents, each with its own allocation size); the real logrotate
// rotates every log every few rounds, create and copytruncate in turn; the daemon is killed with
// SIGKILL at random moments and restarted; the webhook receiver is down for a stretch. At the end
// every incident is in the store exactly once and reached the webhook (deduplicated by webhook-id,
// the event id; a send interrupted by a kill may repeat, which is what the id is for).
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <random>
#include <set>

#include "tests/support/e2e.h"
#include "tests/support/http_test_server.h"
#include "tests/support/skip.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

constexpr int kJobs = 20;
constexpr int kIncidentsPerJob = 3;

std::string frames(int job, int& step, int count) {
  std::string out;
  for (int i = 0; i < count; ++i) {
    out += fmt::format(
        "\rjob{:02d}:   1%|          | {}/3000 [00:01<10:00,  1.00s/it, lr: 1.0e-04 "
        "loss: 4.1e-01]",
        job, ++step);
  }
  return out;
}

std::string incident(int job, int mib) {
  const std::string message = fmt::format(
      "CUDA out of memory. Tried to allocate {}.00 MiB. GPU 0 has a total capacity of 23.55 GiB of "
      "which 10.00 MiB is free.",
      mib);
  return fmt::format(
      "Error running job: {}\n\n========================================\nResult:\n - 0 completed "
      "jobs\n - 1 failure\n========================================\nTraceback (most recent call "
      "last):\n  File \"/app/ai-toolkit/run.py\", line 120, in <module>\n    main()\n"
      "torch.OutOfMemoryError: {}\n\nJob process terminated with exit code 1.\n"
      "Running 1 job\n# Running job: job{:02d}\n",
      message, message, job);
}

}  // namespace

TEST_CASE("torture: fast writers, logrotate both ways, kill -9 at random, a receiver outage") {
  if (!have_program("logrotate")) {
    OOMTRIAGE_SKIP("logrotate is not installed");
  }
  TempDir dir;
  const fs::path out = dir.path / "output";
  for (int j = 0; j < kJobs; ++j) fs::create_directories(out / fmt::format("job{:02d}", j));
  std::map<std::string, size_t> by_id;
  std::mutex received_mutex;
  auto script = [&](const ReceivedRequest& request, size_t) {
    std::lock_guard<std::mutex> lock(received_mutex);
    // One key per alert, also inside a storm message that lists several (its webhook-id
    // header is the message's own).
    const auto body = nlohmann::json::parse(request.body, nullptr, false);
    if (body.is_object() && body.contains("alerts")) {
      for (const auto& alert : body["alerts"])
        ++by_id[alert["annotations"].value("webhook_id", "?")];
    } else {
      ++by_id["?"];
    }
    return ScriptedResponse{};
  };
  // One receiver for the whole run: down is a reset on its own port, never a port given back.
  HttpTestServer receiver(script);
  const unsigned short port = receiver.port();
  const fs::path config = dir.path / "oomtriage.yaml";
  std::ofstream(config)
      << "watch:\n  - logs: " << (out / "*" / "log.txt").string()
      << "\nrescan_seconds: 2\nalerts:\n  - name: hook\n    type: webhook\n"
      << "    url: http://127.0.0.1:" << port << "/oom\n"
      << "    retry_initial_ms: 200\n    retry_max_ms: 1000\n    timeout_ms: 1000\n";
  for (const char* mode : {"create", "copytruncate"}) {
    std::ofstream(dir.path / (std::string(mode) + ".conf"))
        << (out / "*" / "log.txt").string() << " {\n  " << mode
        << "\n  rotate 50\n  missingok\n  nocompress\n}\n";
  }
  std::mt19937 rng(7);
  auto daemon = std::make_unique<DaemonProcess>(
      dir.path / "state", std::vector<std::string>{"daemon", "--config", config.string()},
      dir.path / "err");

  std::vector<int> steps(kJobs, 0);
  std::set<int> expected_sizes;
  int kills = 0, rotations = 0;
  const int rounds = 30;
  for (int round = 0; round < rounds; ++round) {
    for (int j = 0; j < kJobs; ++j) {
      std::string chunk = frames(j, steps[j], 40);
      // Incidents at rounds 5, 15 and 25, each job a little later than the one before.
      if ((round == 5 || round == 15 || round == 25)) {
        const int mib = 100 + j * 10 + round / 10;
        expected_sizes.insert(mib);
        chunk += "\n" + incident(j, mib);
      }
      std::ofstream(out / fmt::format("job{:02d}", j) / "log.txt", std::ios::app) << chunk;
    }
    if (round == 8) receiver.set_down(true);    // the receiver goes down ...
    if (round == 20) receiver.set_down(false);  // ... and comes back
    if (rng() % 4 == 0) {
      // SIGKILL at a random moment, then a restart.
      std::this_thread::sleep_for(std::chrono::milliseconds(rng() % 200));
      daemon->stop(SIGKILL);
      ++kills;
      daemon = std::make_unique<DaemonProcess>(
          dir.path / "state", std::vector<std::string>{"daemon", "--config", config.string()},
          dir.path / ("err" + std::to_string(kills)));
    }
    if (round % 4 == 3) {
      // copytruncate loses what is written between its copy and its truncate, by design: the
      // writers pause (as between two of this loop's writes) while logrotate runs.
      std::this_thread::sleep_for(300ms);
      const std::string mode = rotations % 2 == 0 ? "create" : "copytruncate";
      const std::string command = "logrotate -f -s " + (dir.path / "lr.state").string() + " " +
                                  (dir.path / (mode + ".conf")).string() + " 2>&1";
      REQUIRE(std::system(command.c_str()) == 0);
      ++rotations;
    }
    std::this_thread::sleep_for(50ms);
  }
  receiver.set_down(false);
  const size_t incidents = expected_sizes.size();
  REQUIRE(incidents == kJobs * kIncidentsPerJob);

  const fs::path db = dir.path / "state" / "oomtriage.db";
  auto stored_sizes = [&] {
    std::multiset<int> sizes;
    auto store = db::Store::open(db.string());
    if (!store) return sizes;
    for (int j = 0; j < kJobs; ++j) {
      auto story = (*store)->job_story(fmt::format("job{:02d}", j));
      if (!story || !*story) continue;
      for (const auto& e : (*story)->events) {
        const auto event = nlohmann::json::parse(e.event_json);
        if (!event["tried_to_allocate_bytes"].is_null()) {
          sizes.insert(static_cast<int>(event["tried_to_allocate_bytes"].get<uint64_t>() >> 20));
        } else {
          sizes.insert(-1);
        }
      }
    }
    return sizes;
  };
  const bool all_stored = wait_until([&] { return stored_sizes().size() >= incidents; }, 60s);
  const bool all_received = wait_until(
      [&] {
        std::lock_guard<std::mutex> lock(received_mutex);
        return by_id.size() >= incidents;
      },
      60s);
  // Nothing more can be sent once no outbox row waits: a row is marked only after its answer.
  const bool all_answered = wait_until([&] {
    auto store = db::Store::open(db.string());
    if (!store) return false;
    auto pending = (*store)->count_alerts("pending");
    return pending && *pending == 0;
  });
  const std::multiset<int> sizes = stored_sizes();
  size_t receipts = 0, duplicates = 0;
  {
    std::lock_guard<std::mutex> lock(received_mutex);
    for (const auto& [id, n] : by_id) {
      receipts += n;
      duplicates += n - 1;
    }
  }
  MESSAGE("torture: " << incidents << " incidents written, " << sizes.size() << " events stored, "
                      << by_id.size() << " distinct alerts received (" << receipts << " receipts, "
                      << duplicates << " repeated sends), " << kills << " kill -9, " << rotations
                      << " rotations");
  CHECK(all_stored);
  CHECK(all_received);
  CHECK(all_answered);
  CHECK(sizes.size() == incidents);
  CHECK(std::set<int>(sizes.begin(), sizes.end()) == expected_sizes);
  CHECK(by_id.size() == incidents);
  CHECK(duplicates <= static_cast<size_t>(kills));
}
