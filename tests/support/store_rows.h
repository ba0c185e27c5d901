// tests/support/store_rows.h: the rows a daemon writes before a log's first commit, for tests
// that fill a store through db::Store (tests/db/store_recovery_test.cc,
// tests/daemon/alert_timing_test.cc, tests/daemon/jobs_report_test.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "db/store.h"

namespace oomtriage::testing {

// A job `name` whose folder is `home` (by default /out/<name>) found under `root`, with one run
// and its followed log home/log.txt (device 1, inode `ino`), and the Progress that commits to
// that log.
inline db::Progress progress_for_new_job(db::Store& store, const std::string& name, uint64_t ino,
                                         int64_t now, std::string home = "",
                                         const std::string& root = "/out") {
  if (home.empty()) home = "/out/" + name;
  const std::string log = home + "/log.txt";
  const int64_t job = *store.upsert_job(name, home, "ai-toolkit", root, now);
  const int64_t run = *store.start_run(job, log, std::nullopt, now);
  db::FileRow file;
  file.path = log;
  file.dev = 1;
  file.ino = ino;
  file.job_id = job;
  file.run_id = run;
  db::Progress progress;
  progress.file_id = *store.insert_file(file, now);
  progress.job_id = job;
  progress.run_id = run;
  return progress;
}

}  // namespace oomtriage::testing
