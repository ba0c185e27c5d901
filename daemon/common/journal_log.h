// daemon/common/journal_log.h: the daemon's one way to say something to its operator. Lines go to
// stderr, which systemd hands to journald; journald reads a leading "<N>" as the priority.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <utility>

namespace oomtriage::daemon {

enum Priority { kCritical = 2, kError = 3, kWarning = 4, kNotice = 5, kInfo = 6, kDebug = 7 };

template <class... Args>
void log_line(int priority, fmt::format_string<Args...> format, Args&&... args) {
  fmt::print(stderr, "<{}>oomtriage: {}\n", priority,
             fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace oomtriage::daemon
