// daemon/cli/log_story.h
//
// `report LOG` (or a job's folder) where the store does not know the log, or there is no store
// (the daemon never ran): the log is read as `scan` reads it (scan_command.h's analyse_log() and
// rank_log(): the one analyzer, the one ranking) and told as the story a store would keep of that
// one read: the job, one run, the config file read, the incidents and the last one's fixes. Every
// `report` output (text, JSON, Markdown, HTML) then draws it as it draws a stored job.
#pragma once

#include <cstdint>
#include <string>

#include "db/store.h"
#include "parsers/result.h"

namespace oomtriage::daemon {

// The log `path` names: the file itself; in a folder, the newest of the logs `scan` reads there
// (scan_command.h's logs_under()), with `how_many` of them. A kBadInput error for a folder
// without any.
struct JobLog {
  std::string path;
  size_t how_many = 1;
};
Result<JobLog> job_log_at(const std::string& path);

// The story of one read of `log`. Its rows are numbered from 1 within the story, as no store
// numbered them; the run's times are the log's last write, the snapshot's and the events' the
// read's. `store` is the node's store, read (never made) for the job's history as `scan` reads it.
// Errors as `scan` has them: kIo for a log or a config that cannot be read, kBadInput for a config
// refused.
Result<db::JobStory> story_of_log(const std::string& log, const std::string& store);

}  // namespace oomtriage::daemon
