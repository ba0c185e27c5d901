// daemon/service/live_state.cc
#include "daemon/service/live_state.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "daemon/alerts/alert_payload.h"
#include "parsers/line_cleaner.h"

namespace oomtriage::daemon {
namespace {

constexpr size_t kTailBytes = 4096;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

}  // namespace

std::string last_line_of(std::string_view tail, size_t limit) {
  // Only a complete record: what follows the last line end or `\r` redraw may still be being
  // written. A bar redrawn with `\r` ends each frame there, so its newest frame is the last line.
  size_t end = tail.find_last_of("\r\n");
  while (end != std::string_view::npos) {
    const size_t start = end == 0 ? std::string_view::npos : tail.find_last_of("\r\n", end - 1);
    const size_t from = start == std::string_view::npos ? 0 : start + 1;
    const std::string cleaned = parsers::strip_ansi(tail.substr(from, end - from));
    const std::string_view text = trim(cleaned);
    if (!text.empty()) return valid_utf8(truncate_utf8(text, limit));
    end = start;  // a blank line or an empty redraw: the one before it
  }
  return "";
}

LogEnd read_log_tail(int fd) {
  LogEnd tail;
  struct stat st {};
  if (fd < 0 || ::fstat(fd, &st) != 0) return tail;
  tail.last_write = st.st_mtim.tv_sec;
  const off_t size = st.st_size;
  const off_t from = size > static_cast<off_t>(kTailBytes) ? size - kTailBytes : 0;
  std::string bytes(static_cast<size_t>(size - from), '\0');
  const ssize_t got = ::pread(fd, bytes.data(), bytes.size(), from);
  if (got <= 0) return tail;
  bytes.resize(static_cast<size_t>(got));
  tail.last_line = last_line_of(bytes);
  return tail;
}

LogEnd read_log_tail(int fd, const std::string& path) {
  if (fd >= 0) return read_log_tail(fd);
  const int opened = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (opened < 0) return {};
  LogEnd tail = read_log_tail(opened);
  ::close(opened);
  return tail;
}

db::LiveState live_state_of(const parsers::LogAnalyzer::Live& live, const LogEnd& tail) {
  db::LiveState state;
  state.step = live.step;
  state.total_steps = live.total;
  state.steps_per_second = live.vitals.steps_per_second;
  state.loss = live.vitals.loss;
  if (live.phase != parsers::Phase::kUnknown) state.phase = parsers::to_string(live.phase);
  state.last_write = tail.last_write;
  state.last_line = tail.last_line;
  return state;
}

std::chrono::seconds stall_after(int configured_seconds, std::optional<double> steps_per_second) {
  std::chrono::seconds after(configured_seconds);
  if (steps_per_second && *steps_per_second > 0) {
    const double own = 20.0 / *steps_per_second;
    if (std::isfinite(own) && own > static_cast<double>(after.count()) && own < 1e9) {
      after = std::chrono::seconds(static_cast<int64_t>(std::ceil(own)));
    }
  }
  return after;
}

}  // namespace oomtriage::daemon
