// daemon/cli/log_reader.h
//
// Reads a log file through the streaming analyzer, with a progress bar on stderr for large files
// on a terminal (shared by `scan` and `fix`), or its content into any reader (the report's loss
// curve).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "daemon/common/exit_codes.h"
#include "parsers/log_analyzer.h"
#include "parsers/result.h"

namespace oomtriage::daemon {

// Feeds `path` ("-": standard input) to `analyzer`; an error is one line naming the file and
// the reason.
Result<Ok> read_log_into(const std::string& path, parsers::LogAnalyzer& analyzer);

// Gets a log's content chunk by chunk.
using ContentSink = std::function<void(std::string_view)>;

// Reads `path` ("-": standard input) into `sink` as the trainer wrote it: a gzip file through
// zlib, a container log decoded from kubelet's CRI lines.
Result<Ok> read_log_content(const std::string& path, const ContentSink& sink);

}  // namespace oomtriage::daemon
