// db/aitk_database.cc: the few statements the healer runs on AI Toolkit UI's database.
#include "db/aitk_database.h"

#include "db/sqlite_statement.h"
#include "parsers/bounded_document.h"

namespace oomtriage::db {
namespace {

// Prisma keeps DateTime in SQLite as milliseconds since the epoch (an integer) or as text,
// depending on its version; `updated_at` is written the way the row already holds it.
constexpr const char* kNowLikeUpdatedAt =
    "CASE typeof(updated_at) WHEN 'integer' "
    "THEN CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER) "
    "ELSE strftime('%Y-%m-%dT%H:%M:%fZ', 'now') END";

}  // namespace

AitkDatabase::AitkDatabase(sqlite3* db)
    : db_(db), statements_(std::make_unique<StatementCache>(db)) {}

AitkDatabase::~AitkDatabase() {
  statements_.reset();
  sqlite3_close(db_);
}

Result<std::unique_ptr<AitkDatabase>> AitkDatabase::open(const std::string& path,
                                                         int busy_timeout_ms) {
  sqlite3* db = nullptr;
  // Never created: a missing file is a wrong path, not an empty UI.
  const int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = "cannot open AI Toolkit's database " + path + ": " +
                          (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return make_error(ErrorCode::kIo, message);
  }
  sqlite3_busy_timeout(db, busy_timeout_ms);
  return std::unique_ptr<AitkDatabase>(new AitkDatabase(db));
}

Result<std::optional<AitkJob>> AitkDatabase::job_named(std::string_view name) {
  // The config is a document a user controls: at most one character past the limit is read, so
  // that its reader (triage/config_patch.h, parsers/bounded_document.h) refuses it as too large.
  Statement s(*statements_,
              "SELECT id, name, gpu_ids, substr(job_config, 1, ?), status, info FROM Job "
              "WHERE name = ?");
  if (!s.ok()) return s.error("read AI Toolkit's Job table");
  s.bind(1, static_cast<int64_t>(parsers::kMaxDocumentBytes + 1)).bind(2, name);
  const int rc = s.step();
  if (rc == SQLITE_DONE) return std::optional<AitkJob>{};
  if (rc != SQLITE_ROW) return s.error("read AI Toolkit job " + std::string(name));
  return std::optional<AitkJob>{
      AitkJob{s.text(0), s.text(1), s.text(2), s.text(3), s.text(4), s.text(5)}};
}

Result<bool> AitkDatabase::requeue(const AitkJob& job, std::string_view job_config,
                                   std::string_view info) {
  Transaction transaction(db_);
  if (!transaction.ok()) return busy_or_database(db_, "lock AI Toolkit's database");
  static const std::string kUpdate =
      std::string(
          "UPDATE Job SET job_config = ?, status = 'queued', stop = 0, return_to_queue = 0, "
          "info = ?, queue_position = COALESCE((SELECT MIN(queue_position) - 1 FROM Job "
          "WHERE status = 'queued' AND gpu_ids = ?), (SELECT COALESCE(MAX(queue_position), 0) + "
          "1000 FROM Job)), updated_at = ") +
      kNowLikeUpdatedAt + " WHERE id = ? AND status = 'error'";
  Statement update(*statements_, kUpdate.c_str());
  if (!update.ok()) return update.error("prepare the re-queue");
  update.bind(1, job_config).bind(2, info).bind(3, job.gpu_ids).bind(4, job.id);
  if (update.step() != SQLITE_DONE) return update.error("re-queue AI Toolkit job " + job.name);
  if (sqlite3_changes(db_) != 1) return false;
  Statement queue(*statements_,
                  "INSERT INTO Queue (gpu_ids, is_running) VALUES (?, 1) "
                  "ON CONFLICT (gpu_ids) DO UPDATE SET is_running = 1");
  if (!queue.ok()) return queue.error("prepare the queue start");
  queue.bind(1, job.gpu_ids);
  if (queue.step() != SQLITE_DONE) return queue.error("start AI Toolkit's queue " + job.gpu_ids);
  if (!transaction.commit()) return busy_or_database(db_, "commit the re-queue");
  return true;
}

Result<bool> AitkDatabase::stop(std::string_view job_id, std::string_view info) {
  static const std::string kStop = std::string("UPDATE Job SET stop = 1, info = ?, updated_at = ") +
                                   kNowLikeUpdatedAt + " WHERE id = ? AND status = 'running'";
  Statement s(*statements_, kStop.c_str());
  if (!s.ok()) return s.error("prepare the stop");
  s.bind(1, info).bind(2, job_id);
  if (s.step() != SQLITE_DONE) return s.error("stop AI Toolkit job");
  return sqlite3_changes(db_) == 1;
}

}  // namespace oomtriage::db
