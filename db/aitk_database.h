// db/aitk_database.h
//
// AI Toolkit UI's own database (<TOOLKIT_ROOT>/aitk_db.db, written by its Prisma client and its
// trainer), as the daemon's healing needs it: a job's row by name, and in one transaction its
// config patched, the job queued again and its GPU queue running, or a running job asked to
// stop. The UI's worker polls this database every second and starts what it finds queued.
// Schema and statements: docs/ai-toolkit.md §4.2, self-healing-and-fleet.md §A.2.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "parsers/result.h"

struct sqlite3;

namespace oomtriage::db {

class StatementCache;

struct AitkJob {
  std::string id;  // a UUID
  std::string name;
  std::string gpu_ids;
  std::string job_config;  // JSON: {"job": "extension", "config": {"name": ..., "process": [...]}}
  std::string status;      // queued | running | stopping | stopped | completed | error
  std::string info;
};

class AitkDatabase {
 public:
  // Opens an existing database read-write; waits at most `busy_timeout_ms` for its lock, so that
  // the daemon's loop is never held long by the trainer's or the UI's writes.
  static Result<std::unique_ptr<AitkDatabase>> open(const std::string& path,
                                                    int busy_timeout_ms = 200);
  ~AitkDatabase();
  AitkDatabase(const AitkDatabase&) = delete;
  AitkDatabase& operator=(const AitkDatabase&) = delete;

  Result<std::optional<AitkJob>> job_named(std::string_view name);

  // Writes `job_config`, queues the job ahead of the others waiting for its GPUs and sets that
  // queue running: only if the job is still `error`. False when it was not (someone restarted
  // or removed it meanwhile), and nothing changed.
  Result<bool> requeue(const AitkJob& job, std::string_view job_config, std::string_view info);

  // Asks a running job to stop (the trainer polls `stop`); false when it was not running.
  Result<bool> stop(std::string_view job_id, std::string_view info);

 private:
  explicit AitkDatabase(sqlite3* db);
  sqlite3* db_;
  std::unique_ptr<StatementCache> statements_;
};

}  // namespace oomtriage::db
