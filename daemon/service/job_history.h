// daemon/service/job_history.h
//
// A job's history as the store keeps it, read the same way by the daemon, `scan` and `fix`: the
// fixes a run carried from the previous run's crash when it crashed again in the same phase
// (the ranker puts them last, so the next lever leads). `scan` and `fix` only read the store, and
// only when it exists.
#pragma once

#include <string>
#include <vector>

#include "db/store.h"
#include "parsers/event.h"
#include "parsers/native_config.h"

namespace oomtriage::daemon {

// `run_id`: the run that crashed now; `files`: the config it ran with.
std::vector<std::string> tried_and_failed(const db::JobStory& story, int64_t run_id,
                                          const parsers::OomEvent& event,
                                          const std::vector<parsers::NativeFile>& files);

// For a log read outside the daemon: the same, from the store at `store_path` when it knows the
// log (absolute path); empty otherwise.
std::vector<std::string> tried_and_failed_for_log(const std::string& store_path,
                                                  const std::string& log,
                                                  const parsers::OomEvent& event,
                                                  const std::vector<parsers::NativeFile>& files);

}  // namespace oomtriage::daemon
