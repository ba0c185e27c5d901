// db/store_progress.cc: one read's progress committed in one transaction: its new events (each
// unique per file, generation and offset, with an outbox row per receiver) and amendments of
// stored ones (an update alert when the top fix changed), the file's offset,
// line, analyzer state and anchor, and the run's outcome. Several files' progress can share the
// transaction (the daemon's checkpoint).
#include "db/store.h"

#include "db/sqlite_statement.h"
#include "db/store_internal.h"

#include <sqlite3.h>

#include "triage/fix_codec.h"

namespace oomtriage::db {

std::string top_fix_of(std::string_view fixes_json) {
  const auto fixes = triage::decode_fixes(fixes_json);
  return fixes && !fixes->empty() ? fixes->front().id : "";
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
    if (e.revision > 0) {
      auto amended = amend_event(p, e, now);
      if (!amended) return amended.error();
      if (*amended) {
        inserted += **amended;
        continue;
      }
    }
    Statement s(
        *statements_,
        "INSERT INTO events (job_id, run_id, file_id, snapshot_id, offset, kind, phase, "
        "step, recovered, event_json, fixes_json, created_at, generation, model_family, "
        "revision, resent, top_fix, uuid) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, "
        "?12, ?13, ?14, ?15, ?16, ?17, " OOMTRIAGE_UUID_SQL
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
        .bind(14, e.model_family)
        .bind(15, e.revision)
        .bind(16, int64_t{e.resent})
        .bind(17, top_fix_of(e.fixes_json));
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

Result<std::optional<int64_t>> Store::amend_event(const Progress& p, const EventRow& e,
                                                  int64_t now) {
  int64_t event_id = 0;
  int64_t stored_revision = 0;
  std::string stored_top_fix;
  {
    Statement find(*statements_,
                   "SELECT id, revision, top_fix FROM events WHERE file_id = ?1 AND generation = "
                   "?2 AND offset = ?3");
    find.bind(1, p.file_id).bind(2, p.generation).bind(3, static_cast<int64_t>(e.offset));
    const int rc = find.step();
    if (rc == SQLITE_DONE) return std::optional<int64_t>();
    if (rc != SQLITE_ROW) return find.error("find amended event");
    event_id = find.integer(0);
    stored_revision = find.integer(1);
    stored_top_fix = find.text(2);
  }
  // The same amendment read again (a rewind), or an older one: the store keeps the newest.
  if (stored_revision >= e.revision) return std::optional<int64_t>(0);

  const std::string top_fix = top_fix_of(e.fixes_json);
  {
    Statement update(*statements_,
                     "UPDATE events SET kind = ?2, phase = ?3, step = ?4, recovered = ?5, "
                     "event_json = ?6, fixes_json = ?7, revision = ?8, top_fix = ?9 WHERE id = ?1");
    update.bind(1, event_id)
        .bind(2, e.kind)
        .bind(3, e.phase)
        .bind(4, e.step)
        .bind(5, int64_t{e.recovered})
        .bind(6, e.event_json)
        .bind(7, e.fixes_json)
        .bind(8, e.revision)
        .bind(9, top_fix);
    if (update.step() != SQLITE_DONE) return update.error("amend event");
  }
  // An alert not sent yet carries the amended event when it goes; one sent is sent again only
  // when its advice changed (a new phase with the same top fix is not worth a second message).
  if (top_fix == stored_top_fix) return std::optional<int64_t>(0);
  Statement requeue(*statements_,
                    "UPDATE outbox SET state = 'pending', attempts = 0, next_attempt_at = ?2, "
                    "last_error = NULL, revision = ?3 WHERE event_id = ?1 AND state = 'delivered'");
  requeue.bind(1, event_id).bind(2, now).bind(3, e.revision);
  if (requeue.step() != SQLITE_DONE) return requeue.error("queue the update alert");
  return std::optional<int64_t>(sqlite3_changes(db_) > 0 ? 1 : 0);
}

}  // namespace oomtriage::db
