// db/loss_log.cc: reads the loss/loss rows of AI Toolkit's loss_log.db.
#include "db/loss_log.h"

#include <sqlite3.h>

#include <cmath>

namespace oomtriage::db {

Result<std::vector<parsers::LossPoint>> read_aitk_loss_log(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  const auto failed = [&](const char* what) {
    Error error =
        make_error(ErrorCode::kDatabase, "cannot " + std::string(what) + " " + path + ": " +
                                             (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
    sqlite3_close(db);
    return error;
  };
  if (rc != SQLITE_OK) return failed("open");
  sqlite3_busy_timeout(db, 500);
  sqlite3_stmt* stmt = nullptr;
  rc = sqlite3_prepare_v2(db,
                          "SELECT step, value_real FROM metrics WHERE key = 'loss/loss' AND "
                          "value_real IS NOT NULL ORDER BY step",
                          -1, &stmt, nullptr);
  if (rc != SQLITE_OK) return failed("read the loss from");
  std::vector<parsers::LossPoint> points;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    const double loss = sqlite3_column_double(stmt, 1);
    if (std::isfinite(loss)) points.push_back({sqlite3_column_int64(stmt, 0) + 1, loss});
  }
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) return failed("read the loss from");
  sqlite3_close(db);
  return points;
}

}  // namespace oomtriage::db
