// daemon/service/job_history.h
//
// A job's history as the store keeps it, read the same way by the daemon, `scan` and `fix`: the
// previous run's last fatal crash and the fixes ranked for it, which triage/triage_job.h turns
// into the fixes tried. `scan` and `fix` only read the store, and only when it exists.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "db/store.h"
#include "parsers/event.h"
#include "parsers/native_config.h"
#include "triage/triage_job.h"

namespace oomtriage::daemon {

// The last crash that was not recovered of a run before `run_id` (the run that crashed now).
std::optional<triage::StoredCrash> previous_crash(const db::JobStory& story, int64_t run_id);

// For a log read outside the daemon (`scan`, `fix`): its job's history from the store at
// `store_path` when the store knows the log (by absolute path). Empty when the log has no OOM or
// the job no config files, which the history cannot change: the store is not opened then.
triage::History history_of_log(const std::string& store_path, const std::string& log,
                               const parsers::LogAnalysis& analysis,
                               const std::vector<parsers::NativeFile>& files);

}  // namespace oomtriage::daemon
