// daemon/cli/log_reader.h
//
// Reads a log file through the streaming analyzer in 1 MiB chunks, with a progress bar on stderr
// for large files on a terminal. Shared by `scan` and `fix`.
#pragma once

#include <string>

#include "parsers/log_analyzer.h"

namespace oomtriage::daemon {

enum ExitCode { kExitOk = 0, kExitBadInput = 1, kExitEnvironment = 2 };

// Feeds `path` to `analyzer`. Returns kExitOk, or an exit code with a one-line `error`.
int read_log_into(const std::string& path, parsers::LogAnalyzer& analyzer, std::string& error);

}  // namespace oomtriage::daemon
