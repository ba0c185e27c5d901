// daemon/common/exit_codes.h
//
// oomtriage's exit codes, and the one map from an Error to them. `--help`, oomtriage(1) and
// every command say the same:
//   0  done (for `scan`, the logs were analysed, OOMs or not);
//   1  bad input or usage: an unknown option, a config that does not parse, a job or fix that
//      does not exist; a one-line message names the file, line and reason;
//   2  the environment failed: a file that cannot be read, a store that stays locked;
//   3  `scan --fail-on-oom` found a fatal OOM; `check` predicts the job will not fit;
//   4  `check` cannot know: the model is not known (a name the table lacks, a variable the
//      command line left unexpanded) or a value the verdict depends on could not be read.
// `run` exits with its trainer's code.
#pragma once

#include "parsers/result.h"

namespace oomtriage::daemon {

enum ExitCode {
  kExitOk = 0,
  kExitBadInput = 1,
  kExitEnvironment = 2,
  kExitFatalOom = 3,
  kExitWillNotFit = 3,  // `check`: one code for "this job runs out of memory", found or foreseen
  kExitUnknown = 4,     // `check`: no verdict, never "fits" in its place
};

// kBadInput and kNotFound are the caller's to fix (1); I/O and the store are the machine's (2).
inline int exit_code_for(const Error& error) {
  switch (error.code) {
    case ErrorCode::kBadInput:
    case ErrorCode::kNotFound: return kExitBadInput;
    case ErrorCode::kIo:
    case ErrorCode::kDatabase:
    case ErrorCode::kDatabaseBusy:
    case ErrorCode::kDatabaseDamaged: return kExitEnvironment;
  }
  return kExitEnvironment;
}

// The exit codes as --help ends.
inline constexpr const char* kExitCodesHelp =
    "Exit codes: 0 done; 1 bad input or usage; 2 the environment failed (a file that cannot be "
    "read, a store that stays locked; --gpu auto without NVML); 3 scan --fail-on-oom found a fatal "
    "OOM, or check predicts the job will not fit; 4 check cannot know (an unknown model, an "
    "unexpanded variable, a value it depends on that could not be read); run exits with its "
    "trainer's code.";

}  // namespace oomtriage::daemon
