// tests/daemon/store_damage_test.cc
//
// The real daemon on a store damaged while it was down, three ways (garbage over pages, the file
// cut to half, the events table's pages garbled): it starts, says so in one critical line and one
// OomtriageStoreRecovered alert, keeps the damaged file, and stores and alerts every later OOM
// once; a log whose read position was lost is read again with its alerts marked as possibly
// sent before. And the sink: a damaged store is handed over once, never retried.
#include <doctest/doctest.h>
#include <sqlite3.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>

#include "daemon/service/event_sink.h"
#include "db/store.h"
#include "tests/support/e2e.h"
#include "tests/support/store_damage.h"
#include "tests/support/http_test_server.h"

using namespace oomtriage;
using namespace oomtriage::testing;
using nlohmann::json;

namespace {

constexpr int kPage = testing::kStorePage;

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

enum class Damage { kPagesGarbled, kCutToHalf, kEventsTableGarbled };

void damage(const fs::path& store, Damage how) {
  switch (how) {
    case Damage::kPagesGarbled: {
      const int64_t pages = static_cast<int64_t>(fs::file_size(store)) / kPage;
      std::vector<int64_t> middle;
      for (int64_t p = 2; p <= pages; ++p) middle.push_back(p);
      garble_pages(store, middle);
      break;
    }
    case Damage::kCutToHalf: fs::resize_file(store, fs::file_size(store) / 2); break;
    case Damage::kEventsTableGarbled: garble_pages(store, pages_of(store, "events")); break;
  }
}

void run_damage_case(Damage how) {
  TempDir dir;
  const fs::path out = dir.path / "output";
  const fs::path state = dir.path / "state";
  const fs::path config = dir.path / "oomtriage.yaml";
  fs::create_directories(out);
  HttpTestServer server([](const ReceivedRequest&, size_t) { return ScriptedResponse{}; });
  std::ofstream(config) << "watch:\n  - logs: " << (out / "*" / "log.txt").string()
                        << "\nalerts:\n  - name: hook\n    type: webhook\n    url: "
                        << server.url("/oom") << "\n    group_wait_ms: 0\n";
  const std::vector<std::string> args = {"daemon", "--config", config.string()};
  const std::string crash = slurp(kGolden / "aitk_gc_off_oom_step2.log");
  {
    DaemonProcess daemon(state, args, dir.path / "err1");
    REQUIRE(
        wait_until([&] { return daemon.stderr_text().find("store ready") != std::string::npos; }));
    fs::create_directories(out / "before");
    write_slowly(out / "before" / "log.txt", crash, 4096);
    REQUIRE(wait_until([&] { return server.count() == 1; }, 15s));
    REQUIRE(daemon.stop(SIGTERM) == 0);
  }
  const fs::path store = state / "oomtriage.db";
  if (how == Damage::kEventsTableGarbled && pages_of(store, "events").empty()) {
    MESSAGE("skipped: this SQLite has no dbstat table to find the events' pages");
    return;
  }
  damage(store, how);
  DaemonProcess daemon(state, args, dir.path / "err2");
  REQUIRE(
      wait_until([&] { return daemon.stderr_text().find("store ready") != std::string::npos; }));
  const std::string said = daemon.stderr_text();
  INFO(said);
  CHECK(count_of(said, "<2>") == 1);
  CHECK(said.find("was damaged") != std::string::npos);
  bool kept = false;
  for (const auto& entry : fs::directory_iterator(state)) {
    kept = kept || entry.path().filename().string().starts_with("oomtriage.db.damaged-");
  }
  CHECK(kept);
  fs::create_directories(out / "after");
  write_slowly(out / "after" / "log.txt", crash, 4096);
  REQUIRE(wait_until(
      [&] {
        const auto requests = server.requests();
        for (const auto& r : requests) {
          if (r.body.find("\"training_job\":\"after\"") != std::string::npos) return true;
        }
        return false;
      },
      15s));
  // Nothing more can be sent once no outbox row waits: a row is marked only after its answer.
  REQUIRE(wait_until([&] {
    auto opened = db::Store::open(store.string());
    if (!opened) return false;
    auto pending = (*opened)->count_alerts("pending");
    return pending && *pending == 0;
  }));
  size_t after = 0;
  size_t recovered_alerts = 0;
  const std::string first_key = server.requests().front().headers.at("webhook-id");
  for (const auto& r : server.requests()) {
    const json alert = json::parse(r.body)["alerts"][0];
    const std::string job = alert["labels"].value("training_job", "");
    if (alert["labels"]["alertname"] == "OomtriageStoreRecovered") ++recovered_alerts;
    if (job == "after") ++after;
    // The old crash, read again only where its read position was lost: marked as such.
    if (job == "before" && r.headers.at("webhook-id") != first_key) {
      CHECK(alert["annotations"]["resent_after_store_recovery"] == "true");
    }
  }
  CHECK(after == 1);
  CHECK(recovered_alerts == 1);
  const std::string report_args = "--state-dir '" + state.string() + "' report after";
  const auto [rc, report] =
      run_shell(std::string(OOMTRIAGE_BINARY) + " " + report_args + " --json 2>/dev/null");
  CHECK(rc == 0);
  CHECK(json::parse(report)["events"].size() == 1);
  // The report says the store was recovered, on stderr beside the story.
  CHECK(oomtriage_says(report_args).second.find("note: this store was recovered from damage") !=
        std::string::npos);
  const auto [check_rc, checked] =
      oomtriage_says("--state-dir '" + state.string() + "' check-config '" + config.string() + "'");
  CHECK(check_rc == 0);
  CHECK(checked.find("note: this store was recovered from damage") != std::string::npos);
  CHECK(daemon.stop(SIGTERM) == 0);
}

}  // namespace

TEST_SUITE("daemon::store_damage") {
  TEST_CASE("fault: store pages garbled while down: it starts, says so once, alerts on") {
    run_damage_case(Damage::kPagesGarbled);
  }
  TEST_CASE("fault: store cut to half while down: it starts, says so once, alerts on") {
    run_damage_case(Damage::kCutToHalf);
  }
  TEST_CASE("fault: the events table's pages garbled while down: offsets kept, alerts on") {
    run_damage_case(Damage::kEventsTableGarbled);
  }

  TEST_CASE("the sink hands a damaged store over once and does not retry it") {
    TempDir dir;
    auto store = db::Store::open((dir.path / "s.db").string());
    REQUIRE(store);
    daemon::Metrics metrics;
    daemon::EventSink sink(**store, metrics, nullptr, [] { return int64_t{100}; });
    int handed = 0;
    sink.on_damaged([&](const std::string&) { ++handed; });
    sink.refused(make_error(ErrorCode::kDatabaseDamaged, "database disk image is malformed"));
    sink.refused(make_error(ErrorCode::kDatabaseDamaged, "database disk image is malformed"));
    CHECK(handed == 1);
    CHECK(metrics.store_damaged == 2);
    CHECK(!sink.failing());  // not a refusal to wait out
    sink.refused(make_error(ErrorCode::kDatabaseBusy, "database is locked"));
    CHECK(sink.failing());
    CHECK(handed == 1);
  }
}
