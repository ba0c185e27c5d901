// triage/history.h
//
// What a job's config did after a crash: which of the fixes proposed at the crash the config now
// carries. `fix` uses it to propose nothing already applied when it is run again on the same old
// log; the daemon uses it to escalate when the next run carried a fix and crashed again in the
// same phase (the fix tried is demoted, the next lever leads); `report` shows, run by run, which
// fix each run carried and whether it worked. Pure.
#pragma once

#include <string>
#include <vector>

#include "parsers/native_config.h"
#include "triage/fix.h"

namespace oomtriage::triage {

// The ids of the fixes in `proposed` that `files` already carry: every change the fix makes to a
// file is already there (patching it changes nothing). A fix with no file change (environment,
// command line, a check) cannot be told and is never counted as carried. A change's file is
// matched by path, else by file name, else to the only file.
std::vector<std::string> carried_fixes(const std::vector<Fix>& proposed,
                                       const std::vector<parsers::NativeFile>& files);

}  // namespace oomtriage::triage
