// tests/db/store_test.cc: the SQLite store on a real file: migrations, snapshots only on a new
// hash, progress + events + outbox in one transaction, exactly-once events, and a reader that
// works while a writer holds the database; a job's story fails when one of its reads does.
#include "db/store.h"

#include <doctest/doctest.h>
#include <sqlite3.h>

#include <filesystem>

#include "tests/support/store_damage.h"

namespace fs = std::filesystem;
using namespace oomtriage;

namespace {

struct TempStore {
  fs::path dir;
  std::unique_ptr<db::Store> store;
  TempStore() {
    char tmpl[] = "/tmp/oomtriage-store-XXXXXX";
    dir = ::mkdtemp(tmpl);
    auto opened = db::Store::open((dir / "oomtriage.db").string());
    REQUIRE(opened);
    store = std::move(*opened);
  }
  ~TempStore() {
    store.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// Job "j" with a run and its log file (inode `ino`) in the store: the progress of that file,
// with nothing in it yet.
db::Progress progress_of_new_file(db::Store& store, uint64_t ino) {
  const int64_t job = *store.upsert_job("j", "/out/j", "ai-toolkit", "/out/j", 100);
  const int64_t run = *store.start_run(job, "/out/j/log.txt", std::nullopt, 100);
  db::FileRow file;
  file.path = "/out/j/log.txt";
  file.dev = 1;
  file.ino = ino;
  file.fingerprint = "f";
  file.job_id = job;
  file.run_id = run;
  db::Progress progress;
  progress.file_id = *store.insert_file(file, 100);
  progress.job_id = job;
  progress.run_id = run;
  return progress;
}

db::EventRow event_at(uint64_t offset) {
  db::EventRow row;
  row.offset = offset;
  row.kind = "cuda";
  row.phase = "sampling";
  row.step = 500;
  row.event_json = R"({"kind":"cuda"})";
  row.fixes_json = "[]";
  return row;
}

}  // namespace

TEST_SUITE("db::store") {
  TEST_CASE("a new store is migrated to the current schema, and reopening keeps it") {
    TempStore t;
    CHECK(t.store->schema_version() == 14);
    t.store.reset();
    auto again = db::Store::open((t.dir / "oomtriage.db").string());
    REQUIRE(again);
    CHECK((*again)->schema_version() == 14);
  }
  TEST_CASE("a store from a newer oomtriage is refused, not damaged") {
    TempStore t;
    t.store.reset();
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open((t.dir / "oomtriage.db").c_str(), &raw) == SQLITE_OK);
    sqlite3_exec(raw, "PRAGMA user_version=99", nullptr, nullptr, nullptr);
    sqlite3_close(raw);
    auto opened = db::Store::open((t.dir / "oomtriage.db").string());
    REQUIRE_FALSE(opened);
    CHECK(opened.error().message.find("newer") != std::string::npos);
  }
  TEST_CASE("a job is its name in its folder - a store of schema 7 keeps its jobs and their runs") {
    TempStore t;
    const int64_t a =
        *t.store->upsert_job("my_lora", "/col/a/my_lora", "ai-toolkit", "/col/a/my_lora", 1);
    const int64_t b =
        *t.store->upsert_job("my_lora", "/col/b/my_lora", "ai-toolkit", "/col/b/my_lora", 2);
    CHECK(a != b);
    CHECK(*t.store->upsert_job("my_lora", "/col/a/my_lora", "unknown", "/col/a/my_lora", 3) == a);
    CHECK((*t.store->job_story("my_lora", std::string("/col/b/my_lora")))->job.id == b);
    const auto ambiguous = t.store->job_story("my_lora");
    REQUIRE_FALSE(ambiguous);
    CHECK(ambiguous.error().message ==
          "job name 'my_lora' is used by 2 jobs, in /col/a/my_lora, /col/b/my_lora");

    // Back to schema 7 (jobs named uniquely, no home), with a run under the job, and reopened.
    const int64_t run = *t.store->start_run(a, "/col/a/my_lora/log.txt", std::nullopt, 3);
    t.store.reset();
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open((t.dir / "oomtriage.db").c_str(), &raw) == SQLITE_OK);
    REQUIRE(
        sqlite3_exec(
            raw,
            "PRAGMA foreign_keys=OFF; BEGIN; DELETE FROM jobs WHERE home = '/col/b/my_lora';"
            "CREATE TABLE jobs_v7 (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, "
            "trainer TEXT NOT NULL DEFAULT 'unknown', log_dir TEXT NOT NULL DEFAULT '', "
            "first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL) STRICT;"
            "INSERT INTO jobs_v7 SELECT id, name, trainer, log_dir, first_seen, last_seen FROM "
            "jobs;"
            "DROP TABLE jobs; ALTER TABLE jobs_v7 RENAME TO jobs; DROP TABLE preflight_checks;"
            "ALTER TABLE events DROP COLUMN revision; ALTER TABLE outbox DROP COLUMN revision;"
            "ALTER TABLE events DROP COLUMN resent; DROP TABLE gpu_memory;"
            "ALTER TABLE events DROP COLUMN top_fix; DROP TABLE live_state; DROP TABLE warnings;"
            "PRAGMA user_version=7; COMMIT;",
            nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(raw);
    auto reopened = db::Store::open((t.dir / "oomtriage.db").string());
    REQUIRE(reopened);
    t.store = std::move(*reopened);
    CHECK(t.store->schema_version() == 14);
    const auto story = *t.store->job_story("my_lora");
    REQUIRE(story);
    CHECK(story->job.id == a);
    CHECK(story->job.home.empty());
    REQUIRE(story->runs.size() == 1);
    CHECK(story->runs[0].id == run);
    // The job registered again from its folder is the old one; another folder makes another job.
    CHECK(*t.store->upsert_job("my_lora", "/col/a/my_lora", "ai-toolkit", "/col/a/my_lora", 4) ==
          a);
    CHECK(*t.store->upsert_job("my_lora", "/col/b/my_lora", "ai-toolkit", "/col/b/my_lora", 5) !=
          a);
    // Foreign keys are on again: a run of no job is refused.
    CHECK_FALSE(t.store->start_run(999, "/x/log.txt", std::nullopt, 6));
  }
  TEST_CASE("config snapshots are taken only when the hash changes") {
    TempStore t;
    const int64_t job = *t.store->upsert_job("j", "/out/j", "ai-toolkit", "/out/j", 100);
    const int64_t a = *t.store->add_config_snapshot(job, "/out/j/config.yaml", "aaa", "x: 1", 100);
    const int64_t same =
        *t.store->add_config_snapshot(job, "/out/j/config.yaml", "aaa", "x: 1", 200);
    const int64_t b = *t.store->add_config_snapshot(job, "/out/j/config.yaml", "bbb", "x: 2", 300);
    CHECK(a == same);
    CHECK(b != a);
    CHECK((*t.store->job_story("j"))->snapshots.size() == 2);
    // The trainer is kept when a later upsert does not know it.
    CHECK(*t.store->upsert_job("j", "/out/j", "unknown", "/out/j", 400) == job);
    CHECK((*t.store->list_jobs())[0].trainer == "ai-toolkit");
  }
  TEST_CASE("progress, events and outbox rows commit together, and an event is stored once") {
    TempStore t;
    db::Progress progress = progress_of_new_file(*t.store, 42);
    progress.offset = 5000;
    progress.line = 80;
    progress.analyzer_state = R"({"v":1})";
    progress.outcome = "crashed_oom";
    progress.events = {event_at(4000), event_at(4500)};
    progress.receivers = {"slack-1", "webhook-2"};
    CHECK(*t.store->commit_progress(progress, 200) == 2);
    // Read again after a restart (kill -9): the same offsets are not stored twice.
    CHECK(*t.store->commit_progress(progress, 300) == 0);
    progress.generation = 1;  // after copytruncate the same offsets are new bytes
    progress.events = {event_at(4000)};
    CHECK(*t.store->commit_progress(progress, 400) == 1);
    CHECK(*t.store->count_events() == 3);
    const auto row = *t.store->find_file(1, 42);
    REQUIRE(row);
    CHECK(row->offset == 5000);
    CHECK(row->line == 80);
    CHECK(row->generation == 1);
    CHECK(row->analyzer_state == R"({"v":1})");
    const auto story = *t.store->job_story("j");
    CHECK(story->runs.at(0).outcome == "crashed_oom");
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open_v2((t.dir / "oomtriage.db").c_str(), &raw, SQLITE_OPEN_READONLY,
                            nullptr) == SQLITE_OK);
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(raw, "SELECT COUNT(*) FROM outbox WHERE state = 'pending'", -1, &stmt,
                       nullptr);
    REQUIRE(sqlite3_step(stmt) == SQLITE_ROW);
    CHECK(sqlite3_column_int(stmt, 0) == 6);  // 3 events x 2 receivers
    sqlite3_finalize(stmt);
    sqlite3_close(raw);
  }
  TEST_CASE(
      "an amended event replaces the stored one - a delivered alert goes again if its advice "
      "changed") {
    TempStore t;
    db::Progress progress = progress_of_new_file(*t.store, 43);
    progress.receivers = {"hook"};
    db::EventRow first = event_at(4000);
    first.phase = "unknown";
    first.fixes_json = R"([{"id":"lower_batch"}])";
    progress.events = {first};
    REQUIRE(*t.store->commit_progress(progress, 200) == 1);
    const auto outbox = [&] { return *t.store->due_alerts("hook", 1000, 10); };
    const auto stored = [&] { return (*t.store->job_story("j"))->events.at(0); };

    // Amended while its alert is still pending: the row is updated, the alert carries it as
    // the first message (no update), nothing else is queued.
    db::EventRow second = event_at(4000);
    second.phase = "sampling";
    second.revision = 1;
    second.fixes_json = R"([{"id":"sample_cheaper"}])";
    progress.events = {second};
    CHECK(*t.store->commit_progress(progress, 210) == 0);
    REQUIRE(outbox().size() == 1);
    CHECK(outbox()[0].revision == 0);
    CHECK(outbox()[0].fixes_json == second.fixes_json);
    CHECK(*t.store->count_events() == 1);
    CHECK(stored().fixes_json == second.fixes_json);
    const int64_t outbox_id = outbox()[0].id;
    REQUIRE(t.store->mark_alerts({outbox_id}, "delivered", 1, 0, ""));

    // Delivered, amended with the same top fix: stored, no second message.
    db::EventRow third = second;
    third.revision = 2;
    third.step = 501;
    third.event_json = R"({"kind":"cuda","step":501})";
    progress.events = {third};
    CHECK(*t.store->commit_progress(progress, 220) == 0);
    CHECK(outbox().empty());
    CHECK(stored().event_json == third.event_json);

    // An older revision read again (a rewind) changes nothing.
    progress.events = {first};
    CHECK(*t.store->commit_progress(progress, 225) == 0);
    progress.events = {second};
    CHECK(*t.store->commit_progress(progress, 226) == 0);
    CHECK(stored().fixes_json == second.fixes_json);
    CHECK(stored().event_json == third.event_json);

    // Delivered, amended with another top fix: the same row goes again, marked as an update.
    db::EventRow fourth = third;
    fourth.revision = 3;
    fourth.fixes_json = R"([{"id":"gradient_checkpointing"}])";
    progress.events = {fourth};
    CHECK(*t.store->commit_progress(progress, 230) == 1);
    REQUIRE(outbox().size() == 1);
    CHECK(outbox()[0].id == outbox_id);
    CHECK(outbox()[0].revision == 3);
    CHECK(outbox()[0].attempts == 0);
    CHECK(outbox()[0].fixes_json == fourth.fixes_json);

    // An amendment whose first report was never stored is stored as it is.
    db::EventRow orphan = event_at(9000);
    orphan.revision = 1;
    progress.events = {orphan};
    CHECK(*t.store->commit_progress(progress, 240) == 1);
    CHECK(*t.store->count_events() == 2);

    // A row whose fixes were edited by hand into bytes that do not parse is still amended.
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open((t.dir / "oomtriage.db").c_str(), &raw) == SQLITE_OK);
    REQUIRE(sqlite3_exec(raw, "UPDATE events SET fixes_json = '[{not json' WHERE offset = 9000",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(raw);
    db::EventRow fixed = orphan;
    fixed.revision = 2;
    progress.events = {fixed};
    REQUIRE(t.store->commit_progress(progress, 250));
  }
  TEST_CASE(
      "a run's heal attempt is kept with its job, and its end updates it (also while its first "
      "write waits in the fleet outbox)") {
    TempStore t;
    REQUIRE(t.store->set_fleet_outbox("postgresql://fleet/x"));
    const int64_t job = *t.store->upsert_job("j", "/out/j", "ai-toolkit", "/out/j", 100);
    // Seen again before it was shipped (an upsert, like the attempt's below).
    REQUIRE(t.store->upsert_job("j", "/out/j", "ai-toolkit", "/out/j", 101));
    const int64_t run = *t.store->start_run(job, "/out/j/log.txt", std::nullopt, 100);
    db::HealAttempt attempt;
    attempt.run_id = run;
    attempt.attempt = 2;
    attempt.max_attempts = 3;
    attempt.fix_id = "lower_batch_size";
    attempt.change = "train.batch_size 4 -> 2";
    attempt.argv_json = R"(["python","run.py","job.oomtriage-2.yaml"])";
    attempt.resumed_step = 750;
    attempt.outcome = "running";
    attempt.started_at = 100;
    attempt.ended_at = 100;
    REQUIRE(t.store->record_heal_attempt(job, attempt));
    attempt.outcome = "completed";
    attempt.verdict = "healed";
    attempt.ended_at = 200;
    REQUIRE(t.store->record_heal_attempt(job, attempt));
    const auto story = t.store->job_story("j");
    REQUIRE(story);
    REQUIRE(*story);
    REQUIRE((*story)->attempts.size() == 1);
    const db::HealAttempt& kept = (*story)->attempts[0];
    CHECK(kept.run_id == run);
    CHECK(kept.fix_id == "lower_batch_size");
    CHECK(kept.resumed_step == 750);
    CHECK(kept.outcome == "completed");
    CHECK(kept.verdict == "healed");
    CHECK(kept.ended_at == 200);
    const auto batch = *t.store->fleet_batch(100);
    REQUIRE(batch.jobs.size() == 1);
    CHECK(batch.jobs[0].last_seen == 101);
    REQUIRE(batch.attempts.size() == 1);
    CHECK(batch.attempts[0].second.verdict == "healed");
  }

  TEST_CASE(
      "a run's GPU memory is one row per card, replaced as it grows - the job list shows the "
      "newest "
      "run's peak - a completed run's peak is history for the memory model") {
    TempStore t;
    const int64_t job = *t.store->upsert_job("j", "/out/j", "ai-toolkit", "/out/j", 100);
    const int64_t snapshot =
        *t.store->add_config_snapshot(job, "/out/j/config.yaml", "abc", "config: {}\n", 100);
    const int64_t first = *t.store->start_run(job, "/out/j/log.txt", snapshot, 100);
    const int64_t second = *t.store->start_run(job, "/out/j/log.txt", snapshot, 200);
    const auto row = [](int64_t run, unsigned gpu, uint64_t peak_gib) {
      return db::GpuMemoryRow{run, gpu,  24ull << 30, peak_gib << 30, "train_step",       10,
                              0,   "{}", 1,           std::nullopt,   /*from_start=*/true};
    };
    REQUIRE(t.store->record_gpu_memory(row(first, 0, 22)));
    REQUIRE(t.store->record_gpu_memory(row(second, 0, 12)));
    REQUIRE(t.store->record_gpu_memory(row(second, 1, 14)));
    REQUIRE(t.store->record_gpu_memory(row(second, 1, 15)));  // grew: replaces card 1's row
    const auto story = **t.store->job_story("j");
    REQUIRE(story.gpu_memory.size() == 3);
    CHECK(story.gpu_memory[0].run_id == first);
    CHECK(story.gpu_memory[2].peak_bytes == 15ull << 30);
    CHECK(story.job.gpu_peak_bytes == 15ull << 30);  // the newest run's, not the older 22
    CHECK(story.job.gpu_total_bytes == 24ull << 30);

    // Finished: the second run completed and is read back with its measured peak and card.
    db::Progress done;
    done.file_id = *t.store->insert_file(
        {.path = "/out/j/log.txt", .dev = 1, .ino = 2, .job_id = job, .run_id = second}, 200);
    done.job_id = job;
    done.run_id = second;
    done.outcome = "completed";
    REQUIRE(t.store->commit_progress(done, 300));
    const auto history = *t.store->fleet_history(10);
    REQUIRE(history.size() == 1);
    CHECK(history[0].run_id == second);
    CHECK(history[0].measured_peak == 15ull << 30);
    CHECK(history[0].card_bytes == 24ull << 30);
  }

  TEST_CASE("a reader sees the committed state while a writer holds a transaction") {
    TempStore t;
    (void)*t.store->upsert_job("visible", "/x", "unknown", "/x", 1);
    sqlite3* writer = nullptr;
    REQUIRE(sqlite3_open((t.dir / "oomtriage.db").c_str(), &writer) == SQLITE_OK);
    REQUIRE(sqlite3_exec(writer,
                         "BEGIN IMMEDIATE; INSERT INTO jobs (name, first_seen, last_seen) "
                         "VALUES ('pending', 1, 1);",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    auto reader = db::Store::open((t.dir / "oomtriage.db").string(), 200);
    REQUIRE(reader);
    const auto jobs = (*reader)->list_jobs();
    REQUIRE(jobs);
    REQUIRE(jobs->size() == 1);  // WAL: the uncommitted row is invisible, the reader not blocked
    CHECK((*jobs)[0].name == "visible");
    sqlite3_exec(writer, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(writer);
    CHECK((*(*reader)->list_jobs()).size() == 2);
  }
  TEST_CASE("an unknown job has no story") {
    TempStore t;
    CHECK_FALSE(*t.store->job_story("nope"));
    CHECK_FALSE(*t.store->job_story_of_log("/nope/log.txt"));
  }
  TEST_CASE("applied fixes are kept per log and crash, and a job's story is found by its log") {
    TempStore t;
    const db::AppliedFix fix{"/out/job/log.txt",
                             4096,
                             "cheapen_previews",
                             "/out/job/config.yaml",
                             "aaa",
                             "bbb",
                             R"({"id":"cheapen_previews"})",
                             1700000000};
    REQUIRE(t.store->record_applied_fix(fix));
    auto found = t.store->applied_fixes("/out/job/log.txt", 4096);
    REQUIRE(found);
    REQUIRE(found->size() == 1);
    CHECK((*found)[0].fix_id == "cheapen_previews");
    CHECK((*found)[0].sha256_after == "bbb");
    CHECK((*found)[0].fix_json == R"({"id":"cheapen_previews"})");
    CHECK(t.store->applied_fixes("/out/job/log.txt", 1)->empty());

    const auto job = t.store->upsert_job("job", "/out/job", "ai-toolkit", "/out/job", 1);
    REQUIRE(job);
    REQUIRE(t.store->start_run(*job, "/out/job/log.txt", std::nullopt, 1));
    const auto story = t.store->job_story_of_log("/out/job/log.txt");
    REQUIRE(story);
    REQUIRE(*story);
    CHECK((*story)->job.name == "job");
  }
  TEST_CASE("a read-only open migrates nothing: an older store is refused in one line naming it") {
    TempStore t;
    const fs::path path = t.dir / "oomtriage.db";
    const int current = t.store->schema_version();
    t.store.reset();
    {
      sqlite3* db = nullptr;
      REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
      const std::string older = "PRAGMA user_version=" + std::to_string(current - 1);
      REQUIRE(sqlite3_exec(db, older.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
      sqlite3_close(db);
    }
    for (const db::ReadOnly mode : {db::ReadOnly::kOneCommand, db::ReadOnly::kFollowWriter}) {
      auto reader = db::Store::open_read_only(path.string(), mode);
      REQUIRE_FALSE(reader);
      const std::string said = reader.error().message;
      CHECK(said.find(path.string()) != std::string::npos);
      CHECK(said.find("schema version " + std::to_string(current - 1)) != std::string::npos);
      CHECK(said.find('\n') == std::string::npos);
    }
    {
      // Still the older version: nothing was migrated.
      sqlite3* db = nullptr;
      REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
      sqlite3_stmt* s = nullptr;
      sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, nullptr);
      REQUIRE(sqlite3_step(s) == SQLITE_ROW);
      CHECK(sqlite3_column_int(s, 0) == current - 1);
      sqlite3_finalize(s);
      sqlite3_close(db);
    }
  }
  TEST_CASE("a job's story is an error when one of its steps fails, never a story told short") {
    // Each table only the story reads (find_jobs reads jobs, runs, events and gpu_memory first).
    for (const char* table : {"config_snapshots", "heal_attempts", "files"}) {
      CAPTURE(table);
      TempStore t;
      const fs::path path = t.dir / "oomtriage.db";
      db::Progress progress = progress_of_new_file(*t.store, 7);
      progress.snapshot_id =
          *t.store->add_config_snapshot(progress.job_id, "/out/j/config.yaml", "sha", "a: 1", 100);
      progress.events.push_back(event_at(100));
      REQUIRE(t.store->commit_progress(progress, 100));
      db::HealAttempt attempt;
      attempt.run_id = progress.run_id;
      attempt.outcome = "crashed_oom";
      REQUIRE(t.store->record_heal_attempt(progress.job_id, attempt));
      const std::string key = std::to_string(progress.job_id);
      {
        auto story = t.store->job_story_by_key(key);
        REQUIRE(story);
        REQUIRE(*story);
        CHECK((*story)->snapshots.size() == 1);
        CHECK((*story)->attempts.size() == 1);
      }
      t.store.reset();  // closed: everything is in the file
      // The table's root page garbled, as a bad disk would.
      int64_t root = 0;
      {
        sqlite3* db = nullptr;
        REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
        sqlite3_stmt* s = nullptr;
        sqlite3_prepare_v2(db, "SELECT rootpage FROM sqlite_schema WHERE name = ?1", -1, &s,
                           nullptr);
        sqlite3_bind_text(s, 1, table, -1, SQLITE_STATIC);
        if (sqlite3_step(s) == SQLITE_ROW) root = sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
        sqlite3_close(db);
      }
      REQUIRE(root > 1);
      testing::garble_pages(path, {root});
      auto reader = db::Store::open_read_only(path.string(), db::ReadOnly::kOneCommand);
      REQUIRE(reader);
      REQUIRE((*reader)->list_jobs());  // the job itself still reads
      auto story = (*reader)->job_story_by_key(key);
      REQUIRE_FALSE(story);
      CHECK(story.error().message.find("job story") != std::string::npos);
    }
  }
}
