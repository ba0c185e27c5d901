// tests/daemon/old_store_test.cc: a store written by the release before events.top_fix
// (tests/testdata/stores/store-87e2712.sql, schema 12) opens, migrates and reads back through
// today's path: the top_fix column filled from the stored fixes, the jobs list, the report view,
// the job's history and the alert all read by the one event and fix decoders, and the stored
// JSON written again byte for byte by the encoders.
#include <doctest/doctest.h>
#include <sqlite3.h>

#include <filesystem>
#include <map>

#include "daemon/alerts/alert_payload.h"
#include "daemon/cli/store_views.h"
#include "daemon/service/job_history.h"
#include "db/store.h"
#include "parsers/event_codec.h"
#include "tests/support/files.h"
#include "triage/fix_codec.h"

namespace fs = std::filesystem;
using namespace oomtriage;

namespace {

struct OldStore {
  fs::path dir;
  std::string path;
  OldStore() {
    char tmpl[] = "/tmp/oomtriage-old-store-XXXXXX";
    dir = ::mkdtemp(tmpl);
    path = (dir / "oomtriage.db").string();
    const std::string sql = testing::slurp(fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "testdata" /
                                           "stores" / "store-87e2712.sql");
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
    char* message = nullptr;
    const int rc = sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, &message);
    CAPTURE(message ? message : "");
    sqlite3_free(message);
    sqlite3_close(raw);
    REQUIRE(rc == SQLITE_OK);
  }
  ~OldStore() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

}  // namespace

TEST_SUITE("daemon::old store") {
  TEST_CASE("a store the last release wrote migrates and reads back through the decoders") {
    OldStore old;
    auto opened = db::Store::open(old.path);
    REQUIRE(opened);
    db::Store& store = **opened;
    CHECK(store.schema_version() == 14);

    // The jobs list reads the filled top_fix column.
    const auto jobs = store.list_jobs();
    REQUIRE(jobs);
    REQUIRE(jobs->size() == 3);
    std::map<std::string, const db::JobSummary*> by_name;
    for (const auto& job : *jobs) by_name[job.name] = &job;
    REQUIRE(by_name.count("my_lora"));
    CHECK(by_name["my_lora"]->top_fix == "cheapen_previews");
    CHECK(by_name["my_lora"]->last_phase == "sampling");
    CHECK(by_name["qwen_recovered"]->top_fix == "drop_top_bucket");
    CHECK(by_name["zimage_buckets"]->top_fix == "drop_top_bucket");
    CHECK(by_name["zimage_buckets"]->last_step == 1340);

    // Every stored row decodes, and the encoders write its bytes again.
    int events = 0;
    for (const auto& job : *jobs) {
      const auto story = store.job_story(job.name);
      REQUIRE(story);
      REQUIRE(*story);
      for (const db::StoredEvent& stored : (*story)->events) {
        const auto event = parsers::decode_event(stored.event_json);
        REQUIRE(event);
        CHECK(parsers::encode_event_text(*event) == stored.event_json);
        const auto fixes = triage::decode_fixes(stored.fixes_json);
        REQUIRE(fixes);
        CHECK_FALSE(fixes->empty());
        CHECK(triage::encode_fixes_text(*fixes) == stored.fixes_json);
        ++events;
      }
    }
    CHECK(events == 6);

    const auto story = **store.job_story("my_lora");
    REQUIRE(story.events.size() == 1);
    const db::StoredEvent& crash = story.events.front();

    // `report`: the stored event as it was written, with where it is in the story.
    const daemon::ReportView view = daemon::build_view(story);
    REQUIRE(view.events.size() == 1);
    nlohmann::ordered_json event = view.events[0];
    for (const char* added : {"run_id", "snapshot_id", "stored_at"}) event.erase(added);
    CHECK(event.dump() == crash.event_json);
    CHECK(view.fixes.dump() == crash.fixes_json);
    CHECK(view.events[0]["phase"] == "sampling");

    // The next run's history: the crash and the fixes ranked for it.
    const auto previous = daemon::previous_crash(story, crash.run_id + 1);
    REQUIRE(previous);
    CHECK(previous->phase == "sampling");
    REQUIRE_FALSE(previous->fixes.empty());
    CHECK(previous->fixes.front().id == "cheapen_previews");

    // The alert it makes.
    const daemon::AlertContent alert =
        daemon::alert_content(crash.id, "my_lora", "", "ai-toolkit", "flux", "/x/log.txt",
                              crash.event_json, crash.fixes_json, "2026-12-05T09:00:00Z");
    CHECK(alert.kind == "cuda");
    CHECK(alert.phase == "sampling");
    CHECK(alert.step == "500 of 3000");
    REQUIRE_FALSE(alert.fixes.empty());
    CHECK(alert.fixes.front().id == "cheapen_previews");
    CHECK_FALSE(alert.fixes.front().changes.empty());
  }
}
