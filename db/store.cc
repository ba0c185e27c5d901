// db/store.cc: the schema and its migrations, opening the store, and its meta facts. The
// queries are in the files beside it: jobs, runs, files and stories (db/store_jobs.cc), a read's
// progress (db/store_progress.cc), the alert outbox (db/store_outbox.cc) and the fleet outbox
// (db/store_fleet_outbox.cc) and pre-flight checks with the fleet's history
// (db/store_preflight.cc). A small Statement wrapper (db/sqlite_statement.h) keeps binding and
// stepping readable; every statement is prepared, none is built from strings with values.
#include "db/store.h"

#include "db/sqlite_statement.h"
#include "db/store_internal.h"

#include <sqlite3.h>

#include <cstdio>
#include <filesystem>
#include <string_view>
#include <utility>
#include <vector>

namespace oomtriage::db {
namespace {

// Each entry moves the schema one version up; user_version says how many have run.
constexpr const char* kMigrations[] = {
    R"sql(
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  trainer TEXT NOT NULL DEFAULT 'unknown',
  log_dir TEXT NOT NULL DEFAULT '',
  first_seen INTEGER NOT NULL,
  last_seen INTEGER NOT NULL
) STRICT;
CREATE TABLE config_snapshots (
  id INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  path TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  content TEXT NOT NULL,
  seen_at INTEGER NOT NULL,
  UNIQUE (job_id, sha256)
) STRICT;
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  log_path TEXT NOT NULL,
  snapshot_id INTEGER REFERENCES config_snapshots(id),
  outcome TEXT NOT NULL DEFAULT 'running',
  started_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE files (
  id INTEGER PRIMARY KEY,
  path TEXT NOT NULL,
  dev INTEGER NOT NULL,
  ino INTEGER NOT NULL,
  fingerprint TEXT NOT NULL,
  fingerprint_len INTEGER NOT NULL,
  generation INTEGER NOT NULL DEFAULT 0,
  offset INTEGER NOT NULL DEFAULT 0,
  line INTEGER NOT NULL DEFAULT 1,
  job_id INTEGER REFERENCES jobs(id),
  run_id INTEGER REFERENCES runs(id),
  analyzer_state TEXT NOT NULL DEFAULT '{}',
  state TEXT NOT NULL DEFAULT 'active',
  updated_at INTEGER NOT NULL,
  UNIQUE (dev, ino)
) STRICT;
CREATE TABLE events (
  id INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  run_id INTEGER REFERENCES runs(id),
  file_id INTEGER NOT NULL REFERENCES files(id),
  generation INTEGER NOT NULL,
  snapshot_id INTEGER REFERENCES config_snapshots(id),
  offset INTEGER NOT NULL,
  kind TEXT NOT NULL,
  phase TEXT NOT NULL,
  model_family TEXT NOT NULL DEFAULT 'unknown',
  step INTEGER,
  recovered INTEGER NOT NULL,
  event_json TEXT NOT NULL,
  fixes_json TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  UNIQUE (file_id, generation, offset)
) STRICT;
CREATE TABLE outbox (
  id INTEGER PRIMARY KEY,
  event_id INTEGER NOT NULL REFERENCES events(id),
  receiver TEXT NOT NULL,
  state TEXT NOT NULL DEFAULT 'pending',
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL,
  last_error TEXT,
  UNIQUE (event_id, receiver)
) STRICT;
CREATE INDEX events_by_job ON events (job_id, id);
CREATE INDEX outbox_due ON outbox (receiver, state, next_attempt_at);
CREATE INDEX runs_by_job ON runs (job_id, id);
)sql",
    // 2: fixes `oomtriage fix --write` applied, so that running it again on the same old log
    // proposes nothing already applied.
    R"sql(
CREATE TABLE applied_fixes (
  id INTEGER PRIMARY KEY,
  log_path TEXT NOT NULL,
  event_offset INTEGER NOT NULL,
  fix_id TEXT NOT NULL,
  config_path TEXT NOT NULL,
  sha256_before TEXT NOT NULL,
  sha256_after TEXT NOT NULL,
  fix_json TEXT NOT NULL,
  applied_at INTEGER NOT NULL
) STRICT;
CREATE INDEX applied_fixes_by_log ON applied_fixes (log_path, event_offset);
CREATE INDEX runs_by_log ON runs (log_path);
)sql",
    // 3: facts about the store itself. `first_scan_done` marks that a daemon has scanned its
    // globs once: only the very first scan reads present logs from their end (no alerts for old
    // crashes); an empty job table is not a first start. A store that already has jobs was
    // scanned before.
    R"sql(
CREATE TABLE meta (
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;
INSERT INTO meta (key, value) SELECT 'first_scan_done', 'migrated' WHERE EXISTS (SELECT 1 FROM jobs);
)sql",
    // 4: content identity. The anchor hashes the bytes just before the stored offset: a file
    // rewritten in place (copytruncate written past the old offset, `cp` over it, a reused
    // inode) no longer matches it and is read again from 0 as a new generation.
    R"sql(
ALTER TABLE files ADD COLUMN anchor TEXT NOT NULL DEFAULT '';
)sql",
    // 5: the attempts of `oomtriage run`, one per run it started: the fix applied before it, the
    // command, where it resumed, how it ended, and on the last one the verdict.
    R"sql(
CREATE TABLE heal_attempts (
  id INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  run_id INTEGER NOT NULL UNIQUE REFERENCES runs(id),
  attempt INTEGER NOT NULL,
  max_attempts INTEGER NOT NULL,
  fix_id TEXT NOT NULL,
  change TEXT NOT NULL,
  argv_json TEXT NOT NULL,
  resumed_step INTEGER,
  outcome TEXT NOT NULL,
  verdict TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  ended_at INTEGER NOT NULL
) STRICT;
)sql",
    // 6: the fleet store's outbox. Each event gets a UUID when it is stored (the fleet store's
    // key, so a retried shipment duplicates nothing) and the store an id of its own. The
    // triggers that fill the outbox exist only while a fleet store is configured
    // (set_fleet_outbox), so a node without one pays nothing per write. AUTOINCREMENT: a row
    // queued again after it was read must get a seq above every seq handed out, or
    // fleet_shipped() would drop it unshipped.
    R"sql(
ALTER TABLE events ADD COLUMN uuid TEXT NOT NULL DEFAULT '';
UPDATE events SET uuid = )sql" OOMTRIAGE_UUID_SQL R"sql(;
CREATE UNIQUE INDEX events_by_uuid ON events (uuid);
INSERT INTO meta (key, value) VALUES ('store_id', )sql" OOMTRIAGE_UUID_SQL R"sql();
CREATE TABLE fleet_outbox (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL,
  row_id INTEGER NOT NULL,
  UNIQUE (kind, row_id)
) STRICT;
)sql",
    // 7: how much of a file was there when the daemon first started and began at its end (no
    // backfill), so that `report` can say a crash before it was not read.
    R"sql(
ALTER TABLE files ADD COLUMN skipped_bytes INTEGER NOT NULL DEFAULT 0;
)sql",
    // 8: a job is its name in its folder (`home`), not its name alone: two jobs called my_lora
    // under two roots are two jobs. SQLite cannot drop a UNIQUE constraint, so the table is made
    // anew (migrate() turns foreign keys off around it). Jobs stored before keep home "" and are
    // taken by the first job of their name registered again (upsert_job).
    R"sql(
DROP TRIGGER IF EXISTS fleet_job_inserted;
DROP TRIGGER IF EXISTS fleet_job_updated;
CREATE TABLE jobs_v8 (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  home TEXT NOT NULL DEFAULT '',
  trainer TEXT NOT NULL DEFAULT 'unknown',
  log_dir TEXT NOT NULL DEFAULT '',
  first_seen INTEGER NOT NULL,
  last_seen INTEGER NOT NULL,
  UNIQUE (name, home)
) STRICT;
INSERT INTO jobs_v8 (id, name, home, trainer, log_dir, first_seen, last_seen)
  SELECT id, name, '', trainer, log_dir, first_seen, last_seen FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_v8 RENAME TO jobs;
)sql",
    // 9: pre-flight checks, one per job, config and card size: what the memory model predicted
    // when the job was first seen (triage/preflight.h), and whether a TrainingOOMPredicted alert
    // went out for it, so that a config read again, by a restarted daemon included, is not
    // alerted twice; the card size lets the fleet's correction (db/store_preflight.cc) read a
    // completed run against the memory it had.
    R"sql(
CREATE TABLE preflight_checks (
  id INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  config_sha256 TEXT NOT NULL,
  card_bytes INTEGER NOT NULL,
  family TEXT NOT NULL,
  verdict TEXT NOT NULL,
  phase TEXT NOT NULL,
  peak_bytes INTEGER NOT NULL,
  usable_bytes INTEGER NOT NULL,
  alerted INTEGER NOT NULL,
  checked_at INTEGER NOT NULL,
  UNIQUE (job_id, config_sha256, card_bytes)
) STRICT;
)sql",
    // 10: amended events. A follower reports an incident when its log goes quiet and again when
    // more of it (its traceback) changed the verdict: the event row is updated in place with the
    // higher revision. An outbox row that had delivered the event is sent again as an update,
    // marked with the revision it carries, when the top fix changed (db/store_progress.cc).
    R"sql(
ALTER TABLE events ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
ALTER TABLE outbox ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
)sql",
    // 11: an event found again in a log read from its start because a store recovery lost the
    // log's offset (db/store_recovery.h): its alert says it may have gone out before.
    R"sql(
ALTER TABLE events ADD COLUMN resent INTEGER NOT NULL DEFAULT 0;
)sql",
    // 12: each run's GPU memory per card, as the daemon or `run` sampled it through NVML
    // (triage/gpu_timeline.h): the peak with its phase and step, what other processes held, the
    // bounded timeline as JSON (written again as it grows: one row per run and card), and the
    // memory a TrainingNearOOM warning was last sent at, so a restarted daemon does not repeat it;
    // `from_start`: sampled from before its first step, so its peak measures its config.
    R"sql(
CREATE TABLE gpu_memory (
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES runs(id),
  gpu INTEGER NOT NULL,
  total_bytes INTEGER NOT NULL,
  peak_bytes INTEGER NOT NULL,
  peak_phase TEXT NOT NULL,
  peak_step INTEGER,
  others_peak_bytes INTEGER NOT NULL,
  timeline_json TEXT NOT NULL,
  warned_bytes INTEGER,
  from_start INTEGER NOT NULL DEFAULT 0,
  updated_at INTEGER NOT NULL,
  UNIQUE (run_id, gpu)
) STRICT;
)sql",
    // 13: the id of each event's top fix, written with the event (db/store_progress.cc), so that
    // the jobs list and amendments read a column and no SQL reads the fixes' JSON. The rows stored
    // before it are filled in C++ by fill_top_fix() below, from their fixes_json.
    R"sql(
ALTER TABLE events ADD COLUMN top_fix TEXT NOT NULL DEFAULT '';
)sql",
    // 14: what each run is doing now (db/store_live.cc): the training bar's step, total, rate and
    // loss, the phase, when its log last grew and its last line, and since when it is stalled;
    // one row per run, replaced once a second while its log grows. Not shipped to the fleet
    // store (a row a second per job); its jobs show no live state. And the warnings that stay
    // with a job: predicted OOM, near OOM, stalled, with when they were resolved.
    R"sql(
CREATE TABLE live_state (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id),
  step INTEGER,
  total_steps INTEGER,
  steps_per_second REAL,
  loss REAL,
  phase TEXT NOT NULL DEFAULT '',
  last_write INTEGER NOT NULL DEFAULT 0,
  last_line TEXT NOT NULL DEFAULT '',
  stalled_since INTEGER,
  updated_at INTEGER NOT NULL
) STRICT;
CREATE TABLE warnings (
  id INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  run_id INTEGER REFERENCES runs(id),
  kind TEXT NOT NULL,
  summary TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  resolved_at INTEGER
) STRICT;
CREATE INDEX warnings_by_job ON warnings (job_id, kind, resolved_at);
)sql",
};

// The migration after which the events' top_fix column is filled (migration 13).
constexpr int kTopFixVersion = 13;

// Fills top_fix for the events stored before the column existed, by the one fix decoder.
Result<Ok> fill_top_fix(StatementCache& statements) {
  std::vector<std::pair<int64_t, std::string>> filled;
  {
    Statement read(statements, "SELECT id, fixes_json FROM events");
    int rc;
    while ((rc = read.step()) == SQLITE_ROW) {
      std::string top_fix = top_fix_of(read.text(1));
      if (!top_fix.empty()) filled.emplace_back(read.integer(0), std::move(top_fix));
    }
    if (rc != SQLITE_DONE) return read.error("read the events' fixes");
  }
  for (const auto& [id, top_fix] : filled) {
    Statement write(statements, "UPDATE events SET top_fix = ?2 WHERE id = ?1");
    write.bind(1, id).bind(2, top_fix);
    if (write.step() != SQLITE_DONE) return write.error("fill the events' top fix");
  }
  return Ok{};
}

Result<sqlite3*> open_connection(const std::string& path, int flags, const std::string& name = "") {
  sqlite3* db = nullptr;
  const std::string& opened = name.empty() ? path : name;
  const int rc = sqlite3_open_v2(opened.c_str(), &db, flags | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message =
        "cannot open store " + path + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return make_error(ErrorCode::kIo, message);
  }
  return db;
}

// `path` as an SQLite URI, with what a URI gives a meaning (%, ?, #) escaped. A path that starts
// with "//" keeps it after an empty authority, which would otherwise name a host.
std::string file_uri(const std::string& path) {
  std::string uri = path.starts_with("//") ? "file://" : "file:";
  for (const char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char escaped[4];
      std::snprintf(escaped, sizeof escaped, "%%%02X", static_cast<unsigned char>(c));
      uri += escaped;
    } else {
      uri += c;
    }
  }
  return uri;
}

}  // namespace

Result<std::unique_ptr<Store>> Store::open(const std::string& path, int busy_timeout_ms) {
  OOMTRIAGE_ASSIGN_OR_RETURN(sqlite3 * db,
                             open_connection(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
  std::unique_ptr<Store> store(new Store(db));
  sqlite3_busy_timeout(db, busy_timeout_ms);
  for (const char* pragma :
       {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA foreign_keys=ON"}) {
    if (auto r = store->exec(pragma); !r) return r.error();
  }
  if (auto r = store->migrate(); !r) return r.error();
  return store;
}

Result<std::unique_ptr<Store>> Store::open_read_only(const std::string& path, ReadOnly mode,
                                                     int busy_timeout_ms) {
  // The last connection to close removes the -wal (and the -shm): without one no writer has the
  // store open, and what it holds is all in the file. SQLite would still make both to read it
  // (and fail where it may not); immutable reads the file as it stands and makes nothing. A
  // daemon that starts meanwhile writes to a WAL of its own, which this read does not see.
  std::error_code ec;
  const bool no_writer =
      mode == ReadOnly::kOneCommand && !std::filesystem::exists(path + "-wal", ec) && !ec;
  OOMTRIAGE_ASSIGN_OR_RETURN(
      sqlite3 * db, no_writer ? open_connection(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI,
                                                file_uri(path) + "?immutable=1")
                              : open_connection(path, SQLITE_OPEN_READONLY));
  std::unique_ptr<Store> store(new Store(db));
  sqlite3_busy_timeout(db, busy_timeout_ms);
  const auto unreadable = [&] {
    return make_error(ErrorCode::kDatabase,
                      "cannot read store " + path + ": " + sqlite3_errmsg(db));
  };
  // Belt and braces: even a statement that would write (none does) is refused. No journal mode
  // is set and nothing migrated: both would write.
  if (!store->exec("PRAGMA query_only=1")) return unreadable();
  int version = 0;
  {
    Statement s(*store->statements_, "PRAGMA user_version");
    if (s.step() != SQLITE_ROW) return unreadable();
    version = static_cast<int>(s.integer(0));
  }
  const int target = static_cast<int>(std::size(kMigrations));
  if (version != target) {
    return make_error(ErrorCode::kDatabase,
                      "store " + path + " has schema version " + std::to_string(version) +
                          ", this oomtriage reads version " + std::to_string(target) +
                          (version < target ? ": start the daemon once to migrate it" : ""));
  }
  return store;
}

Store::Store(sqlite3* db) : db_(db), statements_(std::make_unique<StatementCache>(db)) {}

Store::~Store() {
  statements_.reset();  // finalized before the connection closes
  sqlite3_close(db_);
}

Result<Ok> Store::exec(const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    Error error = busy_or_database(db_, std::string_view(sql).substr(0, 40));
    sqlite3_free(message);
    return error;
  }
  return Ok{};
}

Result<Ok> Store::set_auto_checkpoint(int pages) {
  return exec(("PRAGMA wal_autocheckpoint=" + std::to_string(pages)).c_str());
}

Result<Ok> Store::checkpoint_wal() {
  const int rc =
      sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  // Busy: a writer's checkpoint or a reader's snapshot holds what it needs; the next one goes on.
  if (rc != SQLITE_OK && rc != SQLITE_BUSY) return busy_or_database(db_, "checkpoint the WAL");
  return Ok{};
}

int Store::schema_version() const {
  Statement s(*statements_, "PRAGMA user_version");
  return s.step() == SQLITE_ROW ? static_cast<int>(s.integer(0)) : -1;
}

Result<Ok> Store::migrate() {
  const int current = schema_version();
  const int target = static_cast<int>(std::size(kMigrations));
  if (current > target) {
    return make_error(ErrorCode::kDatabase, "store schema version " + std::to_string(current) +
                                                " is newer than this oomtriage (" +
                                                std::to_string(target) + ")");
  }
  if (current == target) return Ok{};
  // A migration may make a table anew; foreign keys are checked once all have run. (The pragma
  // does nothing inside a transaction.)
  if (auto r = exec("PRAGMA foreign_keys=OFF"); !r) return r.error();
  for (int version = current; version < target; ++version) {
    Transaction tx(db_);
    if (!tx.ok()) return busy_or_database(db_, "migrate");
    // Another process may have migrated since the version was read: under the write lock, only
    // what is still missing runs.
    if (schema_version() > version) continue;
    if (auto r = exec(kMigrations[version]); !r) return r.error();
    if (version + 1 == kTopFixVersion) {
      if (auto r = fill_top_fix(*statements_); !r) return r.error();
    }
    const std::string bump = "PRAGMA user_version=" + std::to_string(version + 1);
    if (auto r = exec(bump.c_str()); !r) return r.error();
    if (!tx.commit()) return busy_or_database(db_, "migrate");
  }
  {
    Statement check(*statements_, "PRAGMA foreign_key_check");
    if (check.step() == SQLITE_ROW) {
      return make_error(ErrorCode::kDatabase,
                        "store migration left a row without its parent in " + check.text(0));
    }
  }
  return exec("PRAGMA foreign_keys=ON");
}

Result<std::optional<std::string>> Store::meta(const std::string& key) {
  Statement s(*statements_, "SELECT value FROM meta WHERE key = ?1");
  s.bind(1, key);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  if (rc != SQLITE_ROW) return busy_or_database(db_, "meta");
  return std::optional<std::string>(s.text(0));
}

Result<StorePosition> Store::position() {
  Statement s(*statements_, OOMTRIAGE_POSITION_SQL);
  if (s.step() != SQLITE_ROW) return s.error("store position");
  return StorePosition{s.text(0), s.integer(1), s.integer(2)};
}

Result<Ok> Store::set_meta(const std::string& key, const std::string& value) {
  Statement s(*statements_,
              "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET "
              "value = excluded.value");
  s.bind(1, key).bind(2, value);
  if (s.step() != SQLITE_DONE) return busy_or_database(db_, "set_meta");
  return Ok{};
}

}  // namespace oomtriage::db
