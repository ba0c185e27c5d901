// db/store_fleet_outbox.cc: the fleet outbox: the triggers that queue every row a fleet store
// must see while one is configured, the store's own id, and the batches read from the queue
// (parents before children) and forgotten once shipped. The fleet store's side is
// db/fleet_store.cc.
#include "db/store.h"

#include "db/sqlite_statement.h"
#include "db/store_internal.h"

#include <sqlite3.h>

namespace oomtriage::db {
namespace {

// Every row a fleet store must see, queued by the write that makes or changes it: no code path
// can forget one. A row changed again before it is shipped is queued once, with a newer seq.
// Each trigger deletes its row's entry and inserts it anew, rather than INSERT OR REPLACE:
// inside an upsert (INSERT ... ON CONFLICT DO UPDATE, as upsert_job and record_heal_attempt
// write) SQLite applies the upsert's ABORT to a trigger's own OR REPLACE, and a row written again
// before its entry was shipped failed the whole write. The triggers are dropped and made again
// each time, so a store made with the old ones gets these.
constexpr const char* kFleetTriggers = R"sql(
DROP TRIGGER IF EXISTS fleet_job_inserted;
CREATE TRIGGER fleet_job_inserted AFTER INSERT ON jobs BEGIN
  DELETE FROM fleet_outbox WHERE kind = 'job' AND row_id = new.id;
  INSERT INTO fleet_outbox (kind, row_id) VALUES ('job', new.id);
END;
DROP TRIGGER IF EXISTS fleet_job_updated;
CREATE TRIGGER fleet_job_updated AFTER UPDATE ON jobs BEGIN
  DELETE FROM fleet_outbox WHERE kind = 'job' AND row_id = new.id;
  INSERT INTO fleet_outbox (kind, row_id) VALUES ('job', new.id);
END;
DROP TRIGGER IF EXISTS fleet_snapshot_inserted;
CREATE TRIGGER fleet_snapshot_inserted AFTER INSERT ON config_snapshots BEGIN
  DELETE FROM fleet_outbox WHERE kind = 'snapshot' AND row_id = new.id;
  INSERT INTO fleet_outbox (kind, row_id) VALUES ('snapshot', new.id);
END;
DROP TRIGGER IF EXISTS fleet_run_inserted;
CREATE TRIGGER fleet_run_inserted AFTER INSERT ON runs BEGIN
  DELETE FROM fleet_outbox WHERE kind = 'run' AND row_id = new.id;
  INSERT INTO fleet_outbox (kind, row_id) VALUES ('run', new.id);
END;
DROP TRIGGER IF EXISTS fleet_run_updated;
CREATE TRIGGER fleet_run_updated AFTER UPDATE ON runs
WHEN new.outcome IS NOT old.outcome OR new.snapshot_id IS NOT old.snapshot_id
  OR new.updated_at / 60 != old.updated_at / 60 BEGIN
  DELETE FROM fleet_outbox WHERE kind = 'run' AND row_id = new.id;
  INSERT INTO fleet_outbox (kind, row_id) VALUES ('run', new.id);
END;
DROP TRIGGER IF EXISTS fleet_event_inserted;
CREATE TRIGGER fleet_event_inserted AFTER INSERT ON events BEGIN
  DELETE FROM fleet_outbox WHERE kind = 'event' AND row_id = new.id;
  INSERT INTO fleet_outbox (kind, row_id) VALUES ('event', new.id);
END;
DROP TRIGGER IF EXISTS fleet_event_amended;
CREATE TRIGGER fleet_event_amended AFTER UPDATE OF revision ON events BEGIN
  DELETE FROM fleet_outbox WHERE kind = 'event' AND row_id = new.id;
  INSERT INTO fleet_outbox (kind, row_id) VALUES ('event', new.id);
END;
DROP TRIGGER IF EXISTS fleet_attempt_inserted;
CREATE TRIGGER fleet_attempt_inserted AFTER INSERT ON heal_attempts BEGIN
  DELETE FROM fleet_outbox WHERE kind = 'attempt' AND row_id = new.id;
  INSERT INTO fleet_outbox (kind, row_id) VALUES ('attempt', new.id);
END;
DROP TRIGGER IF EXISTS fleet_attempt_updated;
CREATE TRIGGER fleet_attempt_updated AFTER UPDATE ON heal_attempts BEGIN
  DELETE FROM fleet_outbox WHERE kind = 'attempt' AND row_id = new.id;
  INSERT INTO fleet_outbox (kind, row_id) VALUES ('attempt', new.id);
END;
DROP TRIGGER IF EXISTS fleet_gpu_memory_inserted;
CREATE TRIGGER fleet_gpu_memory_inserted AFTER INSERT ON gpu_memory BEGIN
  DELETE FROM fleet_outbox WHERE kind = 'gpu_memory' AND row_id = new.id;
  INSERT INTO fleet_outbox (kind, row_id) VALUES ('gpu_memory', new.id);
END;
DROP TRIGGER IF EXISTS fleet_gpu_memory_updated;
CREATE TRIGGER fleet_gpu_memory_updated AFTER UPDATE ON gpu_memory BEGIN
  DELETE FROM fleet_outbox WHERE kind = 'gpu_memory' AND row_id = new.id;
  INSERT INTO fleet_outbox (kind, row_id) VALUES ('gpu_memory', new.id);
END;
)sql";

constexpr const char* kDropFleetTriggers = R"sql(
DROP TRIGGER IF EXISTS fleet_job_inserted; DROP TRIGGER IF EXISTS fleet_job_updated;
DROP TRIGGER IF EXISTS fleet_snapshot_inserted; DROP TRIGGER IF EXISTS fleet_run_inserted;
DROP TRIGGER IF EXISTS fleet_run_updated; DROP TRIGGER IF EXISTS fleet_event_inserted;
DROP TRIGGER IF EXISTS fleet_event_amended;
DROP TRIGGER IF EXISTS fleet_attempt_inserted; DROP TRIGGER IF EXISTS fleet_attempt_updated;
DROP TRIGGER IF EXISTS fleet_gpu_memory_inserted; DROP TRIGGER IF EXISTS fleet_gpu_memory_updated;
DELETE FROM meta WHERE key = 'fleet_outbox'; DELETE FROM fleet_outbox;
)sql";
}  // namespace

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
              "fleet_outbox (kind, row_id) SELECT 'attempt', id FROM heal_attempts ORDER BY id; "
              "INSERT OR IGNORE INTO fleet_outbox (kind, row_id) SELECT 'gpu_memory', id FROM "
              "gpu_memory ORDER BY id");
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
  // attempts, GPU memory. A row that is gone (never, today) is skipped.
  for (const char* kind : {"job", "snapshot", "run", "event", "attempt", "gpu_memory"}) {
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
      } else if (entry_kind == "gpu_memory") {
        Statement s(*statements_,
                    "SELECT r.job_id, " OOMTRIAGE_GPU_MEMORY_COLUMNS
                    "FROM gpu_memory g JOIN runs r ON r.id = g.run_id WHERE g.id = ?1");
        s.bind(1, id);
        if (auto found = row_found(s); !found || !*found) {
          if (!found) return found.error();
          continue;
        }
        batch.gpu_memory.emplace_back(s.integer(0), gpu_memory_row(s, 1));
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
