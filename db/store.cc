// db/store.cc: schema, migrations and queries. A small Statement wrapper keeps binding and
// stepping readable; every statement is prepared, none is built from strings with values.
#include "db/store.h"

#include "db/sqlite_statement.h"

#include <unordered_map>

#include <sqlite3.h>

#include <string_view>

// A random (version 4) UUID, made by SQLite for each row it is evaluated for.
#define OOMTRIAGE_UUID_SQL                                                                       \
  "lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), " \
  "2) || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || " \
  "'-' || hex(randomblob(6)))"

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
};

// Every row a fleet store must see, queued by the write that makes or changes it: no code path
// can forget one. A row changed again before it is shipped is queued once, with a newer seq.
constexpr const char* kFleetTriggers = R"sql(
CREATE TRIGGER IF NOT EXISTS fleet_job_inserted AFTER INSERT ON jobs BEGIN
  INSERT OR REPLACE INTO fleet_outbox (kind, row_id) VALUES ('job', new.id);
END;
CREATE TRIGGER IF NOT EXISTS fleet_job_updated AFTER UPDATE ON jobs BEGIN
  INSERT OR REPLACE INTO fleet_outbox (kind, row_id) VALUES ('job', new.id);
END;
CREATE TRIGGER IF NOT EXISTS fleet_snapshot_inserted AFTER INSERT ON config_snapshots BEGIN
  INSERT OR REPLACE INTO fleet_outbox (kind, row_id) VALUES ('snapshot', new.id);
END;
CREATE TRIGGER IF NOT EXISTS fleet_run_inserted AFTER INSERT ON runs BEGIN
  INSERT OR REPLACE INTO fleet_outbox (kind, row_id) VALUES ('run', new.id);
END;
CREATE TRIGGER IF NOT EXISTS fleet_run_updated AFTER UPDATE ON runs
WHEN new.outcome IS NOT old.outcome OR new.snapshot_id IS NOT old.snapshot_id
  OR new.updated_at / 60 != old.updated_at / 60 BEGIN
  INSERT OR REPLACE INTO fleet_outbox (kind, row_id) VALUES ('run', new.id);
END;
CREATE TRIGGER IF NOT EXISTS fleet_event_inserted AFTER INSERT ON events BEGIN
  INSERT OR REPLACE INTO fleet_outbox (kind, row_id) VALUES ('event', new.id);
END;
CREATE TRIGGER IF NOT EXISTS fleet_attempt_inserted AFTER INSERT ON heal_attempts BEGIN
  INSERT OR REPLACE INTO fleet_outbox (kind, row_id) VALUES ('attempt', new.id);
END;
CREATE TRIGGER IF NOT EXISTS fleet_attempt_updated AFTER UPDATE ON heal_attempts BEGIN
  INSERT OR REPLACE INTO fleet_outbox (kind, row_id) VALUES ('attempt', new.id);
END;
)sql";

constexpr const char* kDropFleetTriggers = R"sql(
DROP TRIGGER IF EXISTS fleet_job_inserted; DROP TRIGGER IF EXISTS fleet_job_updated;
DROP TRIGGER IF EXISTS fleet_snapshot_inserted; DROP TRIGGER IF EXISTS fleet_run_inserted;
DROP TRIGGER IF EXISTS fleet_run_updated; DROP TRIGGER IF EXISTS fleet_event_inserted;
DROP TRIGGER IF EXISTS fleet_attempt_inserted; DROP TRIGGER IF EXISTS fleet_attempt_updated;
DELETE FROM meta WHERE key = 'fleet_outbox'; DELETE FROM fleet_outbox;
)sql";

}  // namespace

Result<std::unique_ptr<Store>> Store::open(const std::string& path, int busy_timeout_ms) {
  sqlite3* db = nullptr;
  const int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message =
        "cannot open store " + path + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return make_error(ErrorCode::kIo, message);
  }
  std::unique_ptr<Store> store(new Store(db));
  sqlite3_busy_timeout(db, busy_timeout_ms);
  for (const char* pragma :
       {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA foreign_keys=ON"}) {
    if (auto r = store->exec(pragma); !r) return r.error();
  }
  if (auto r = store->migrate(); !r) return r.error();
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

Result<int64_t> Store::upsert_job(const std::string& name, const std::string& home,
                                  const std::string& trainer, const std::string& log_dir,
                                  int64_t now) {
  if (!home.empty()) {
    // A job stored before jobs had homes becomes this one, once.
    Statement adopt(*statements_,
                    "UPDATE jobs SET home = ?2 WHERE name = ?1 AND home = '' AND NOT EXISTS "
                    "(SELECT 1 FROM jobs WHERE name = ?1 AND home = ?2)");
    adopt.bind(1, name).bind(2, home);
    if (adopt.step() != SQLITE_DONE) return adopt.error("upsert job " + name);
  }
  Statement s(*statements_,
              "INSERT INTO jobs (name, home, trainer, log_dir, first_seen, last_seen) VALUES (?1, "
              "?2, ?3, ?4, ?5, ?5) ON CONFLICT (name, home) DO UPDATE SET last_seen = ?5, "
              "log_dir = ?4, trainer = CASE WHEN ?3 = 'unknown' THEN trainer ELSE ?3 END "
              "RETURNING id");
  s.bind(1, name).bind(2, home).bind(3, trainer).bind(4, log_dir).bind(5, now);
  if (s.step() != SQLITE_ROW) return s.error("upsert job " + name);
  return s.integer(0);
}

Result<int64_t> Store::add_config_snapshot(int64_t job_id, const std::string& path,
                                           const std::string& sha256, const std::string& content,
                                           int64_t now) {
  {
    Statement find(*statements_,
                   "SELECT id FROM config_snapshots WHERE job_id = ?1 AND sha256 = ?2");
    find.bind(1, job_id).bind(2, sha256);
    if (find.step() == SQLITE_ROW) return find.integer(0);
  }
  Statement s(*statements_,
              "INSERT INTO config_snapshots (job_id, path, sha256, content, seen_at) VALUES (?1, "
              "?2, ?3, ?4, ?5) RETURNING id");
  s.bind(1, job_id).bind(2, path).bind(3, sha256).bind(4, content).bind(5, now);
  if (s.step() != SQLITE_ROW) return s.error("add config snapshot");
  return s.integer(0);
}

Result<int64_t> Store::start_run(int64_t job_id, const std::string& log_path,
                                 std::optional<int64_t> snapshot_id, int64_t now) {
  Statement s(
      *statements_,
      "INSERT INTO runs (job_id, log_path, snapshot_id, started_at, updated_at) VALUES (?1, "
      "?2, ?3, ?4, ?4) RETURNING id");
  s.bind(1, job_id).bind(2, log_path).bind(3, snapshot_id).bind(4, now);
  if (s.step() != SQLITE_ROW) return s.error("start run");
  return s.integer(0);
}

Result<std::optional<FileRow>> Store::find_file(uint64_t dev, uint64_t ino) {
  Statement s(*statements_,
              "SELECT id, path, fingerprint, fingerprint_len, offset, job_id, run_id, "
              "analyzer_state, generation, line, anchor FROM files WHERE dev = ?1 AND ino = ?2");
  s.bind(1, static_cast<int64_t>(dev)).bind(2, static_cast<int64_t>(ino));
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<FileRow>();
  if (rc != SQLITE_ROW) return s.error("find file");
  FileRow row;
  row.id = s.integer(0);
  row.path = s.text(1);
  row.dev = dev;
  row.ino = ino;
  row.fingerprint = s.text(2);
  row.fingerprint_len = s.integer(3);
  row.offset = static_cast<uint64_t>(s.integer(4));
  row.job_id = s.integer(5);
  row.run_id = s.integer(6);
  row.analyzer_state = s.text(7);
  row.generation = s.integer(8);
  row.line = s.integer(9);
  row.anchor = s.text(10);
  return std::optional<FileRow>(std::move(row));
}

Result<int64_t> Store::insert_file(const FileRow& file, int64_t now) {
  // A (dev, ino) seen before belongs to a file that is gone: the inode was reused.
  Statement s(
      *statements_,
      "INSERT INTO files (path, dev, ino, fingerprint, fingerprint_len, offset, job_id, "
      "run_id, analyzer_state, updated_at, generation, line, anchor, skipped_bytes) VALUES "
      "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14) ON CONFLICT (dev, ino) "
      "DO UPDATE SET path = ?1, fingerprint = ?4, fingerprint_len = ?5, offset = ?6, "
      "job_id = ?7, run_id = ?8, analyzer_state = ?9, state = 'active', updated_at = ?10, "
      "generation = ?11, line = ?12, anchor = ?13, skipped_bytes = ?14 RETURNING id");
  s.bind(1, file.path)
      .bind(2, static_cast<int64_t>(file.dev))
      .bind(3, static_cast<int64_t>(file.ino))
      .bind(4, file.fingerprint)
      .bind(5, file.fingerprint_len)
      .bind(6, static_cast<int64_t>(file.offset))
      .bind(7, file.job_id)
      .bind(8, file.run_id)
      .bind(9, file.analyzer_state)
      .bind(10, now)
      .bind(11, file.generation)
      .bind(12, file.line)
      .bind(13, file.anchor)
      .bind(14, static_cast<int64_t>(file.skipped_bytes));
  if (s.step() != SQLITE_ROW) return s.error("insert file " + file.path);
  return s.integer(0);
}

Result<std::vector<FileRow>> Store::active_files() {
  Statement s(*statements_,
              "SELECT id, path, dev, ino, fingerprint, fingerprint_len, offset, job_id, run_id, "
              "analyzer_state, generation, line, anchor FROM files WHERE state = 'active' ORDER BY "
              "id");
  std::vector<FileRow> rows;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    FileRow row;
    row.id = s.integer(0);
    row.path = s.text(1);
    row.dev = static_cast<uint64_t>(s.integer(2));
    row.ino = static_cast<uint64_t>(s.integer(3));
    row.fingerprint = s.text(4);
    row.fingerprint_len = s.integer(5);
    row.offset = static_cast<uint64_t>(s.integer(6));
    row.job_id = s.integer(7);
    row.run_id = s.integer(8);
    row.analyzer_state = s.text(9);
    row.generation = s.integer(10);
    row.line = s.integer(11);
    row.anchor = s.text(12);
    rows.push_back(std::move(row));
  }
  if (rc != SQLITE_DONE) return s.error("active files");
  return rows;
}

Result<Ok> Store::set_file_state(int64_t file_id, const std::string& state, int64_t now) {
  Statement s(*statements_, "UPDATE files SET state = ?2, updated_at = ?3 WHERE id = ?1");
  s.bind(1, file_id).bind(2, state).bind(3, now);
  if (s.step() != SQLITE_DONE) return s.error("set file state");
  return Ok{};
}

Result<int64_t> Store::commit_progress(const Progress& progress, int64_t now) {
  return commit_progress(std::vector<Progress>{progress}, now);
}

Result<int64_t> Store::commit_progress(const std::vector<Progress>& batch, int64_t now) {
  Transaction tx(db_);
  if (!tx.ok()) return busy_or_database(db_, "begin");
  int64_t inserted = 0;
  for (const Progress& progress : batch) {
    auto r = write_progress(progress, now);
    if (!r) return r.error();
    inserted += *r;
  }
  if (!tx.commit()) return busy_or_database(db_, "commit");
  return inserted;
}

Result<int64_t> Store::write_progress(const Progress& p, int64_t now) {
  int64_t inserted = 0;
  for (const EventRow& e : p.events) {
    Statement s(*statements_,
                "INSERT INTO events (job_id, run_id, file_id, snapshot_id, offset, kind, phase, "
                "step, recovered, event_json, fixes_json, created_at, generation, model_family, "
                "uuid) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
                "?14, " OOMTRIAGE_UUID_SQL
                ") ON CONFLICT (file_id, generation, offset) DO NOTHING "
                "RETURNING id");
    s.bind(1, p.job_id)
        .bind(2, p.run_id)
        .bind(3, p.file_id)
        .bind(4, p.snapshot_id)
        .bind(5, static_cast<int64_t>(e.offset))
        .bind(6, e.kind)
        .bind(7, e.phase)
        .bind(8, e.step)
        .bind(9, int64_t{e.recovered})
        .bind(10, e.event_json)
        .bind(11, e.fixes_json)
        .bind(12, now)
        .bind(13, p.generation)
        .bind(14, e.model_family);
    const int rc = s.step();
    if (rc == SQLITE_DONE) continue;  // already stored: the same bytes were read again
    if (rc != SQLITE_ROW) return s.error("insert event");
    const int64_t event_id = s.integer(0);
    ++inserted;
    for (const std::string& receiver : p.receivers) {
      Statement o(*statements_,
                  "INSERT INTO outbox (event_id, receiver, next_attempt_at) VALUES (?1, ?2, ?3) "
                  "ON CONFLICT DO NOTHING");
      o.bind(1, event_id).bind(2, receiver).bind(3, now);
      if (o.step() != SQLITE_DONE) return o.error("insert outbox row");
    }
  }
  Statement f(*statements_,
              "UPDATE files SET offset = ?2, analyzer_state = ?3, updated_at = ?4, line = ?5, "
              "generation = ?6, anchor = ?7 WHERE id = ?1");
  f.bind(1, p.file_id)
      .bind(2, static_cast<int64_t>(p.offset))
      .bind(3, p.analyzer_state)
      .bind(4, now)
      .bind(5, p.line)
      .bind(6, p.generation)
      .bind(7, p.anchor);
  if (f.step() != SQLITE_DONE) return f.error("update file offset");
  if (p.fingerprint) {
    Statement fp(*statements_,
                 "UPDATE files SET fingerprint = ?2, fingerprint_len = ?3 WHERE id = ?1");
    fp.bind(1, p.file_id).bind(2, p.fingerprint->first).bind(3, p.fingerprint->second);
    if (fp.step() != SQLITE_DONE) return fp.error("update file fingerprint");
  }
  if (p.run_id != 0 && !p.outcome.empty()) {
    Statement r(*statements_, "UPDATE runs SET outcome = ?2, updated_at = ?3 WHERE id = ?1");
    r.bind(1, p.run_id).bind(2, p.outcome).bind(3, now);
    if (r.step() != SQLITE_DONE) return r.error("update run");
  }
  return inserted;
}

Result<std::vector<JobSummary>> Store::list_jobs() {
  Statement s(*statements_,
              "SELECT j.id, j.name, j.trainer, j.log_dir, j.last_seen, "
              "(SELECT COUNT(*) FROM runs r WHERE r.job_id = j.id), "
              "(SELECT COUNT(*) FROM events e WHERE e.job_id = j.id), "
              "COALESCE((SELECT outcome FROM runs r WHERE r.job_id = j.id ORDER BY r.id DESC "
              "LIMIT 1), 'unknown'), "
              "COALESCE((SELECT event_json FROM events e WHERE e.job_id = j.id ORDER BY e.id "
              "DESC LIMIT 1), ''), "
              "COALESCE((SELECT fixes_json FROM events e WHERE e.job_id = j.id ORDER BY e.id "
              "DESC LIMIT 1), ''), j.home FROM jobs j ORDER BY j.last_seen DESC, j.id DESC");
  if (!s.ok()) return s.error("list jobs");
  std::vector<JobSummary> jobs;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    JobSummary job;
    job.id = s.integer(0);
    job.name = s.text(1);
    job.trainer = s.text(2);
    job.log_dir = s.text(3);
    job.last_seen = s.integer(4);
    job.runs = s.integer(5);
    job.events = s.integer(6);
    job.outcome = s.text(7);
    job.last_event_json = s.text(8);
    job.last_fixes_json = s.text(9);
    job.home = s.text(10);
    jobs.push_back(std::move(job));
  }
  if (rc != SQLITE_DONE) return s.error("list jobs");
  return jobs;
}

Result<std::optional<JobStory>> Store::job_story(const std::string& name,
                                                 const std::optional<std::string>& home) {
  auto jobs = list_jobs();
  if (!jobs) return jobs.error();
  std::vector<const JobSummary*> named;
  for (const auto& job : *jobs) {
    if (job.name == name && (!home || job.home == *home)) named.push_back(&job);
  }
  if (named.empty()) return std::optional<JobStory>();
  if (named.size() > 1) {
    std::string folders;
    for (const JobSummary* job : named) folders += (folders.empty() ? "" : ", ") + job->home;
    return make_error(ErrorCode::kBadInput, "job name '" + name + "' is used by " +
                                                std::to_string(named.size()) + " jobs, in " +
                                                folders);
  }
  return story_of(*named.front());
}

Result<std::optional<JobStory>> Store::job_story_by_id(int64_t job_id) {
  auto jobs = list_jobs();
  if (!jobs) return jobs.error();
  for (const auto& job : *jobs) {
    if (job.id == job_id) return story_of(job);
  }
  return std::optional<JobStory>();
}

Result<std::optional<JobStory>> Store::story_of(const JobSummary& summary) {
  JobStory story;
  story.job = summary;
  const int64_t id = story.job.id;
  Statement runs(*statements_,
                 "SELECT id, log_path, outcome, started_at, updated_at, snapshot_id FROM runs "
                 "WHERE job_id = ?1 ORDER BY id");
  runs.bind(1, id);
  while (runs.step() == SQLITE_ROW) {
    story.runs.push_back({runs.integer(0), runs.text(1), runs.text(2), runs.integer(3),
                          runs.integer(4), runs.optional_integer(5)});
  }
  Statement snaps(*statements_,
                  "SELECT id, path, sha256, content, seen_at FROM config_snapshots WHERE job_id = "
                  "?1 ORDER BY id");
  snaps.bind(1, id);
  while (snaps.step() == SQLITE_ROW) {
    story.snapshots.push_back(
        {snaps.integer(0), snaps.text(1), snaps.text(2), snaps.text(3), snaps.integer(4)});
  }
  Statement events(*statements_,
                   "SELECT id, COALESCE(run_id, 0), snapshot_id, event_json, fixes_json, "
                   "created_at FROM events WHERE job_id = ?1 ORDER BY id");
  events.bind(1, id);
  while (events.step() == SQLITE_ROW) {
    story.events.push_back({events.integer(0), events.integer(1), events.optional_integer(2),
                            events.text(3), events.text(4), events.integer(5)});
  }
  Statement attempts(*statements_,
                     "SELECT run_id, attempt, max_attempts, fix_id, change, argv_json, "
                     "resumed_step, outcome, verdict, started_at, ended_at FROM heal_attempts "
                     "WHERE job_id = ?1 ORDER BY id");
  attempts.bind(1, id);
  while (attempts.step() == SQLITE_ROW) {
    HealAttempt a;
    a.run_id = attempts.integer(0);
    a.attempt = static_cast<int>(attempts.integer(1));
    a.max_attempts = static_cast<int>(attempts.integer(2));
    a.fix_id = attempts.text(3);
    a.change = attempts.text(4);
    a.argv_json = attempts.text(5);
    a.resumed_step = attempts.optional_integer(6);
    a.outcome = attempts.text(7);
    a.verdict = attempts.text(8);
    a.started_at = attempts.integer(9);
    a.ended_at = attempts.integer(10);
    story.attempts.push_back(std::move(a));
  }
  Statement unread(*statements_,
                   "SELECT path FROM files WHERE job_id = ?1 AND skipped_bytes > 0 ORDER BY id "
                   "LIMIT 1");
  unread.bind(1, id);
  if (unread.step() == SQLITE_ROW) story.unread_log = unread.text(0);
  return std::optional<JobStory>(std::move(story));
}

Result<Ok> Store::record_heal_attempt(int64_t job_id, const HealAttempt& a) {
  Statement s(*statements_,
              "INSERT INTO heal_attempts (job_id, run_id, attempt, max_attempts, fix_id, change, "
              "argv_json, resumed_step, outcome, verdict, started_at, ended_at) VALUES (?1, ?2, "
              "?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12) ON CONFLICT (run_id) DO UPDATE SET "
              "outcome = ?9, verdict = ?10, ended_at = ?12");
  s.bind(1, job_id).bind(2, a.run_id).bind(3, int64_t{a.attempt}).bind(4, int64_t{a.max_attempts});
  s.bind(5, a.fix_id).bind(6, a.change).bind(7, a.argv_json).bind(8, a.resumed_step);
  s.bind(9, a.outcome).bind(10, a.verdict).bind(11, a.started_at).bind(12, a.ended_at);
  if (s.step() != SQLITE_DONE) return s.error("record heal attempt");
  return Ok{};
}

Result<std::optional<JobStory>> Store::job_story_of_log(const std::string& log_path) {
  Statement s(*statements_,
              "SELECT r.job_id FROM runs r WHERE r.log_path = ?1 ORDER BY r.id DESC LIMIT 1");
  s.bind(1, log_path);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<JobStory>();
  if (rc != SQLITE_ROW) return busy_or_database(db_, "job_story_of_log");
  return job_story_by_id(s.integer(0));
}

Result<std::optional<std::string>> Store::meta(const std::string& key) {
  Statement s(*statements_, "SELECT value FROM meta WHERE key = ?1");
  s.bind(1, key);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  if (rc != SQLITE_ROW) return busy_or_database(db_, "meta");
  return std::optional<std::string>(s.text(0));
}

Result<Ok> Store::set_meta(const std::string& key, const std::string& value) {
  Statement s(*statements_,
              "INSERT INTO meta (key, value) VALUES (?1, ?2) ON CONFLICT(key) DO UPDATE SET "
              "value = excluded.value");
  s.bind(1, key).bind(2, value);
  if (s.step() != SQLITE_DONE) return busy_or_database(db_, "set_meta");
  return Ok{};
}

Result<Ok> Store::record_applied_fix(const AppliedFix& fix) {
  Statement s(*statements_,
              "INSERT INTO applied_fixes (log_path, event_offset, fix_id, config_path, "
              "sha256_before, sha256_after, fix_json, applied_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
              "?7, ?8)");
  s.bind(1, fix.log_path)
      .bind(2, static_cast<int64_t>(fix.event_offset))
      .bind(3, fix.fix_id)
      .bind(4, fix.config_path)
      .bind(5, fix.sha256_before)
      .bind(6, fix.sha256_after)
      .bind(7, fix.fix_json)
      .bind(8, fix.applied_at);
  if (s.step() != SQLITE_DONE) return busy_or_database(db_, "record_applied_fix");
  return Ok{};
}

Result<std::vector<AppliedFix>> Store::applied_fixes(const std::string& log_path,
                                                     uint64_t event_offset) {
  Statement s(*statements_,
              "SELECT log_path, event_offset, fix_id, config_path, sha256_before, sha256_after, "
              "fix_json, applied_at FROM applied_fixes WHERE log_path = ?1 AND event_offset = ?2 "
              "ORDER BY id");
  s.bind(1, log_path).bind(2, static_cast<int64_t>(event_offset));
  std::vector<AppliedFix> out;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    out.push_back({s.text(0), static_cast<uint64_t>(s.integer(1)), s.text(2), s.text(3), s.text(4),
                   s.text(5), s.text(6), s.integer(7)});
  }
  if (rc != SQLITE_DONE) return busy_or_database(db_, "applied_fixes");
  return out;
}

Result<std::vector<OutboxItem>> Store::due_alerts(const std::string& receiver, int64_t now,
                                                  int limit) {
  Statement s(*statements_,
              "SELECT o.id, o.event_id, o.receiver, o.attempts, e.created_at, j.name, j.trainer, "
              "e.model_family, COALESCE(r.log_path, ''), e.recovered, e.event_json, e.fixes_json "
              "FROM outbox o JOIN events e ON e.id = o.event_id JOIN jobs j ON j.id = e.job_id "
              "LEFT JOIN runs r ON r.id = e.run_id WHERE o.receiver = ?1 AND o.state = 'pending' "
              "AND o.next_attempt_at <= ?2 ORDER BY o.id LIMIT ?3");
  s.bind(1, receiver).bind(2, now).bind(3, int64_t{limit});
  std::vector<OutboxItem> items;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    OutboxItem item;
    item.id = s.integer(0);
    item.event_id = s.integer(1);
    item.receiver = s.text(2);
    item.attempts = s.integer(3);
    item.created_at = s.integer(4);
    item.job = s.text(5);
    item.trainer = s.text(6);
    item.model_family = s.text(7);
    item.log_path = s.text(8);
    item.recovered = s.integer(9) != 0;
    item.event_json = s.text(10);
    item.fixes_json = s.text(11);
    items.push_back(std::move(item));
  }
  if (rc != SQLITE_DONE) return s.error("due alerts");
  return items;
}

Result<std::optional<int64_t>> Store::next_alert_due(const std::string& receiver) {
  Statement s(*statements_,
              "SELECT MIN(next_attempt_at) FROM outbox WHERE receiver = ?1 AND state = 'pending'");
  s.bind(1, receiver);
  if (s.step() != SQLITE_ROW) return s.error("next alert");
  return s.optional_integer(0);
}

Result<Ok> Store::mark_alerts(const std::vector<int64_t>& ids, const std::string& state,
                              int64_t attempts, int64_t next_attempt_at, const std::string& error) {
  Transaction tx(db_);
  if (!tx.ok()) return busy_or_database(db_, "begin");
  for (int64_t id : ids) {
    Statement s(*statements_,
                "UPDATE outbox SET state = ?2, attempts = ?3, next_attempt_at = ?4, last_error = "
                "NULLIF(?5, '') WHERE id = ?1");
    s.bind(1, id).bind(2, state).bind(3, attempts).bind(4, next_attempt_at).bind(5, error);
    if (s.step() != SQLITE_DONE) return s.error("mark alert");
  }
  if (!tx.commit()) return busy_or_database(db_, "commit");
  return Ok{};
}

Result<int64_t> Store::count_alerts(const std::string& state) {
  Statement s(*statements_, "SELECT COUNT(*) FROM outbox WHERE state = ?1");
  s.bind(1, state);
  if (s.step() != SQLITE_ROW) return s.error("count alerts");
  return s.integer(0);
}

Result<std::vector<AlertRow>> Store::list_alerts(const std::string& state, int limit) {
  Statement s(*statements_,
              "SELECT o.id, o.receiver, o.state, o.attempts, o.next_attempt_at, "
              "COALESCE(o.last_error, ''), j.name, e.created_at, e.event_json FROM outbox o JOIN "
              "events e ON e.id = o.event_id JOIN jobs j ON j.id = e.job_id WHERE ?1 = '' OR "
              "o.state = ?1 ORDER BY o.id DESC LIMIT ?2");
  s.bind(1, state).bind(2, int64_t{limit});
  std::vector<AlertRow> rows;
  int rc;
  while ((rc = s.step()) == SQLITE_ROW) {
    rows.push_back({s.integer(0), s.text(1), s.text(2), s.integer(3), s.integer(4), s.text(5),
                    s.text(6), s.integer(7), s.text(8)});
  }
  if (rc != SQLITE_DONE) return s.error("list alerts");
  return rows;
}

Result<bool> Store::resend_alert(int64_t id, int64_t now) {
  Statement s(*statements_,
              "UPDATE outbox SET state = 'pending', attempts = 0, next_attempt_at = ?2, "
              "last_error = NULL WHERE id = ?1 RETURNING id");
  s.bind(1, id).bind(2, now);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return false;
  if (rc != SQLITE_ROW) return s.error("resend alert");
  return true;
}

Result<int64_t> Store::count_events() {
  Statement s(*statements_, "SELECT COUNT(*) FROM events");
  if (s.step() != SQLITE_ROW) return s.error("count events");
  return s.integer(0);
}

}  // namespace oomtriage::db

namespace oomtriage::db {

Result<Ok> Store::set_fleet_outbox(const std::string& target) {
  const bool on = !target.empty();
  Transaction tx(db_);
  if (!tx.ok()) return busy_or_database(db_, "begin");
  if (!on) {
    if (auto r = exec(kDropFleetTriggers); !r) return r.error();
  } else {
    if (auto r = exec(kFleetTriggers); !r) return r.error();
    bool newly_on = false;
    {
      // On for a new target (or another than before): it has seen nothing of this store.
      Statement s(*statements_,
                  "INSERT INTO meta (key, value) VALUES ('fleet_outbox', ?1) ON CONFLICT (key) "
                  "DO UPDATE SET value = excluded.value WHERE value IS NOT excluded.value "
                  "RETURNING key");
      s.bind(1, target);
      const int rc = s.step();
      if (rc != SQLITE_ROW && rc != SQLITE_DONE) return s.error("fleet outbox on");
      newly_on = rc == SQLITE_ROW;
    }
    if (newly_on) {
      // Newly on: what the store already holds, parents first, in the order it was made.
      if (auto r = exec(
              "INSERT OR IGNORE INTO fleet_outbox (kind, row_id) SELECT 'job', id FROM jobs "
              "ORDER BY id; INSERT OR IGNORE INTO fleet_outbox (kind, row_id) SELECT 'snapshot', "
              "id FROM config_snapshots ORDER BY id; INSERT OR IGNORE INTO fleet_outbox (kind, "
              "row_id) SELECT 'run', id FROM runs ORDER BY id; INSERT OR IGNORE INTO fleet_outbox "
              "(kind, row_id) SELECT 'event', id FROM events ORDER BY id; INSERT OR IGNORE INTO "
              "fleet_outbox (kind, row_id) SELECT 'attempt', id FROM heal_attempts ORDER BY id");
          !r) {
        return r.error();
      }
    }
  }
  if (!tx.commit()) return busy_or_database(db_, "commit");
  return Ok{};
}

Result<std::string> Store::store_id() {
  auto id = meta("store_id");
  if (!id) return id.error();
  if (!*id) return make_error(ErrorCode::kDatabase, "the store has no store_id");
  return **id;
}

namespace {

// One row by id: true when it is there, false when it is gone (never, today); any other answer
// is an error, so that its outbox entry stays queued rather than being forgotten unshipped.
Result<bool> row_found(Statement& s) {
  const int rc = s.step();
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return s.error("fleet batch");
}

}  // namespace

Result<FleetBatch> Store::fleet_batch(int limit) {
  FleetBatch batch;
  // One read transaction: the rows are one consistent picture even while the daemon writes.
  Transaction tx(db_, Transaction::kRead);
  if (!tx.ok()) return busy_or_database(db_, "begin");
  Statement queued(*statements_,
                   "SELECT seq, kind, row_id FROM fleet_outbox ORDER BY seq LIMIT ?1");
  queued.bind(1, int64_t{limit});
  std::vector<std::pair<std::string, int64_t>> entries;
  int rc;
  while ((rc = queued.step()) == SQLITE_ROW) {
    batch.last_seq = queued.integer(0);
    entries.emplace_back(queued.text(1), queued.integer(2));
  }
  if (rc != SQLITE_DONE) return queued.error("fleet outbox");
  // Parents before children whatever order the entries came in: jobs, snapshots, runs, events,
  // attempts. A row that is gone (never, today) is skipped.
  for (const char* kind : {"job", "snapshot", "run", "event", "attempt"}) {
    for (const auto& [entry_kind, id] : entries) {
      if (entry_kind != kind) continue;
      if (entry_kind == "job") {
        Statement s(*statements_,
                    "SELECT name, home, trainer, log_dir, first_seen, last_seen FROM jobs WHERE "
                    "id = ?1");
        s.bind(1, id);
        if (auto found = row_found(s); !found || !*found) {
          if (!found) return found.error();
          continue;
        }
        batch.jobs.push_back(
            {id, s.text(0), s.text(1), s.text(2), s.text(3), s.integer(4), s.integer(5)});
      } else if (entry_kind == "snapshot") {
        Statement s(*statements_,
                    "SELECT job_id, path, sha256, content, seen_at FROM config_snapshots WHERE "
                    "id = ?1");
        s.bind(1, id);
        if (auto found = row_found(s); !found || !*found) {
          if (!found) return found.error();
          continue;
        }
        batch.snapshots.emplace_back(
            s.integer(0), SnapshotRow{id, s.text(1), s.text(2), s.text(3), s.integer(4)});
      } else if (entry_kind == "run") {
        Statement s(*statements_,
                    "SELECT job_id, log_path, outcome, started_at, updated_at, snapshot_id FROM "
                    "runs WHERE id = ?1");
        s.bind(1, id);
        if (auto found = row_found(s); !found || !*found) {
          if (!found) return found.error();
          continue;
        }
        batch.runs.emplace_back(s.integer(0), RunRow{id, s.text(1), s.text(2), s.integer(3),
                                                     s.integer(4), s.optional_integer(5)});
      } else if (entry_kind == "event") {
        Statement s(*statements_,
                    "SELECT uuid, job_id, run_id, snapshot_id, event_json, fixes_json, "
                    "created_at, offset, model_family, kind, phase, step, recovered FROM events "
                    "WHERE id = ?1");
        s.bind(1, id);
        if (auto found = row_found(s); !found || !*found) {
          if (!found) return found.error();
          continue;
        }
        FleetEvent e;
        e.uuid = s.text(0);
        e.job_id = s.integer(1);
        e.stored = {id,
                    s.optional_integer(2).value_or(0),
                    s.optional_integer(3),
                    s.text(4),
                    s.text(5),
                    s.integer(6)};
        e.typed.offset = static_cast<uint64_t>(s.integer(7));
        e.typed.model_family = s.text(8);
        e.typed.kind = s.text(9);
        e.typed.phase = s.text(10);
        e.typed.step = s.optional_integer(11);
        e.typed.recovered = s.integer(12) != 0;
        batch.events.push_back(std::move(e));
      } else {
        Statement s(*statements_,
                    "SELECT job_id, run_id, attempt, max_attempts, fix_id, change, argv_json, "
                    "resumed_step, outcome, verdict, started_at, ended_at FROM heal_attempts "
                    "WHERE id = ?1");
        s.bind(1, id);
        if (auto found = row_found(s); !found || !*found) {
          if (!found) return found.error();
          continue;
        }
        HealAttempt a;
        a.run_id = s.integer(1);
        a.attempt = static_cast<int>(s.integer(2));
        a.max_attempts = static_cast<int>(s.integer(3));
        a.fix_id = s.text(4);
        a.change = s.text(5);
        a.argv_json = s.text(6);
        a.resumed_step = s.optional_integer(7);
        a.outcome = s.text(8);
        a.verdict = s.text(9);
        a.started_at = s.integer(10);
        a.ended_at = s.integer(11);
        batch.attempts.emplace_back(s.integer(0), std::move(a));
      }
    }
  }
  if (!tx.commit()) return busy_or_database(db_, "commit");
  return batch;
}

Result<Ok> Store::fleet_shipped(int64_t seq) {
  Statement s(*statements_, "DELETE FROM fleet_outbox WHERE seq <= ?1");
  s.bind(1, seq);
  if (s.step() != SQLITE_DONE) return s.error("fleet shipped");
  return Ok{};
}

Result<int64_t> Store::fleet_backlog() {
  Statement s(*statements_, "SELECT COUNT(*) FROM fleet_outbox");
  if (s.step() != SQLITE_ROW) return s.error("fleet backlog");
  return s.integer(0);
}

}  // namespace oomtriage::db
