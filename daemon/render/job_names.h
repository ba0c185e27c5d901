// daemon/render/job_names.h
//
// The names people see and type for jobs. A job is its name in its folder, so two jobs may share
// a name: each is then shown with the end of its folder, just enough to tell them apart
// ("my_lora (col/a)", "my_lora (col/b)"), and may be named that way, or by its folder, wherever a
// job is asked for.
#pragma once

#include <string>
#include <vector>

#include "db/store.h"

namespace oomtriage::daemon {

// One per job, in the same order: the name, with the folder's end where another job of the same
// host shares the name.
std::vector<std::string> display_names(const std::vector<db::JobSummary>& jobs);

// A fleet store holds a node's job twice when the node's store was made anew: the newest (the
// list is newest first) stands for both.
void keep_newest(std::vector<db::JobSummary>& jobs);

struct JobMatch {
  const db::JobSummary* job = nullptr;  // null when none or several matched
  std::vector<std::string> candidates;  // several: their display names (and hosts)
};

// The job `ref` names: a display name, a name only one job has, or a job's folder (a path,
// absolute or relative to the working directory).
JobMatch find_job(const std::string& ref, const std::vector<db::JobSummary>& jobs,
                  const std::vector<std::string>& names);

}  // namespace oomtriage::daemon
