// db/store_outbox.cc: the alert outbox: the rows due for a receiver with their events, when the
// next one is due, marking rows delivered, pending or failed, and what `oomtriage alerts` lists,
// counts and sends again. The rows themselves are written with their events
// (db/store_progress.cc).
#include "db/store.h"

#include "db/sqlite_statement.h"

#include <sqlite3.h>

namespace oomtriage::db {

Result<std::vector<OutboxItem>> Store::due_alerts(const std::string& receiver, int64_t now,
                                                  int limit) {
  Statement s(
      *statements_,
      "SELECT o.id, o.event_id, o.receiver, o.attempts, e.created_at, j.name, j.trainer, "
      "e.model_family, COALESCE(r.log_path, ''), e.recovered, e.event_json, e.fixes_json, "
      "o.revision, e.resent, o.next_attempt_at, e.uuid FROM outbox o JOIN events e ON e.id = "
      "o.event_id JOIN jobs j ON j.id = e.job_id "
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
    item.revision = s.integer(12);
    item.resent = s.integer(13) != 0;
    item.next_attempt_at = s.integer(14);
    item.event_uuid = s.text(15);
    items.push_back(std::move(item));
  }
  if (rc != SQLITE_DONE) return s.error("due alerts");
  return items;
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

}  // namespace oomtriage::db
