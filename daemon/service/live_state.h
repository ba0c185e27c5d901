// daemon/service/live_state.h
//
// A followed log's live state as the daemon stores it (db/store.h LiveState): the analyzer's view
// of the training bar (parsers/log_analyzer.h live()), when the file was last written and its
// last line; and when a running job's silence makes it stalled.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "db/store.h"
#include "parsers/log_analyzer.h"

namespace oomtriage::daemon {

// The last complete line of a log's tail, as a person reads it: the newest redraw of a `\r`
// progress bar, without ANSI escapes, invalid UTF-8 replaced, at most `limit` bytes.
std::string last_line_of(std::string_view tail, size_t limit = 200);

// The file's modification time (unix seconds, 0 when it cannot be read) and its last line,
// from its last 4 KiB.
struct LogEnd {
  int64_t last_write = 0;
  std::string last_line;
};
LogEnd read_log_tail(int fd);
// The same through the follower's descriptor when it is open, else by opening `path` (a quiet log
// may have been closed to stay within the descriptor budget).
LogEnd read_log_tail(int fd, const std::string& path);

db::LiveState live_state_of(const parsers::LogAnalyzer::Live& live, const LogEnd& tail);

// How long a running job's log may be silent before it is stalled: the configured time, or 20
// times its own step time when that is longer (a job at 120 s/it is not stalled after 15 min).
std::chrono::seconds stall_after(int configured_seconds, std::optional<double> steps_per_second);

}  // namespace oomtriage::daemon
