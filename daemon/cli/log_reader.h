// daemon/cli/log_reader.h
//
// Reads a log file through the streaming analyzer in 1 MiB chunks, with a progress bar on stderr
// for large files on a terminal. Shared by `scan` and `fix`.
#pragma once

#include <string>

#include "parsers/log_analyzer.h"
#include "parsers/result.h"

namespace oomtriage::daemon {

enum ExitCode { kExitOk = 0, kExitBadInput = 1, kExitEnvironment = 2, kExitFatalOom = 3 };

// Feeds `path` ("-": standard input) to `analyzer`; an error is one line naming the file and
// the reason.
Result<Ok> read_log_into(const std::string& path, parsers::LogAnalyzer& analyzer);

// What the command exits with for `error`: bad input 1, the environment 2.
int exit_code_for(const Error& error);

}  // namespace oomtriage::daemon
