// daemon/render/top_view.cc: `oomtriage top`'s frame, one line per job in attention order.
#include "daemon/render/top_view.h"

#include "daemon/render/live_text.h"

#include <fmt/color.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <string_view>
#include <tuple>

#include "daemon/common/clock.h"
#include "daemon/render/job_names.h"
#include "daemon/render/text_output.h"

namespace oomtriage::daemon {
namespace {

constexpr const char* kNone = "-";
constexpr size_t kNameFloor = 16;  // the name is cut to this before a column is left out
constexpr size_t kNameMin = 6;     // and to this when the columns left still do not fit

// Columns a terminal gives `text`: one per code point (a wide CJK letter in a job's name is
// counted one; the line then runs a little long, never into a control sequence).
size_t columns(std::string_view text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

// `text` without control bytes (a job's name and its last fix come from files anyone may write:
// they must not drive the terminal), cut to `width` columns with "…".
std::string fit(std::string_view text, size_t width) {
  std::string clean;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    clean.push_back(byte < 0x20 || byte == 0x7f ? '?' : c);
  }
  if (columns(clean) <= width) return clean;
  if (width == 0) return "";
  std::string out;
  size_t shown = 0;
  for (size_t i = 0; i < clean.size(); ++i) {
    const bool starts = (static_cast<unsigned char>(clean[i]) & 0xC0) != 0x80;
    if (starts && ++shown == width) break;  // the last column is the ellipsis
    out.push_back(clean[i]);
  }
  return out + "…";
}

enum class Align { kLeft, kRight };

std::string pad(const std::string& text, size_t width, Align align) {
  const size_t used = columns(text);
  const std::string fill(width > used ? width - used : 0, ' ');
  return align == Align::kLeft ? text + fill : fill + text;
}

// "22.1G": a narrow column's bytes.
std::string gib_text(uint64_t bytes) {
  return fmt::format("{:.1f}G", static_cast<double>(bytes) / (1ull << 30));
}

// The time the job's log last grew, else when the store last saw it.
int64_t last_written(const db::JobSummary& job) {
  return job.live.last_write > 0 ? job.live.last_write : job.last_seen;
}

bool near_oom(const db::JobSummary& job) { return job.near_oom || job.predicted_oom; }
bool crashed(const db::JobSummary& job) { return job.outcome.starts_with("crashed"); }

// One column: its title, its cell for a job, and how much it is needed when the line is too
// wide (the lowest priority goes first).
struct Column {
  const char* title;
  int priority;
  Align align;
  size_t max_width;  // longer cells are cut
  bool always;       // shown even when no job has a value
  std::string (*cell)(const db::JobSummary& job, int64_t now);
};

std::string step_cell(const db::JobSummary& job, int64_t) {
  const db::LiveState& live = job.live;
  if (!live.step) return kNone;
  return live.total_steps ? fmt::format("{}/{}", *live.step, *live.total_steps)
                          : std::to_string(*live.step);
}

std::string percent_cell(const db::JobSummary& job, int64_t) {
  const db::LiveState& live = job.live;
  if (!live.step || !live.total_steps || *live.total_steps <= 0) return kNone;
  return fmt::format("{}%", std::clamp<int64_t>(*live.step * 100 / *live.total_steps, 0, 100));
}

std::string rate_cell(const db::JobSummary& job, int64_t) {
  const auto& rate = job.live.steps_per_second;
  return rate && *rate > 0 ? rate_text(*rate) : kNone;
}

// Only while it runs: a finished or silent job's time left is no time at all.
std::string eta_cell(const db::JobSummary& job, int64_t) {
  const auto eta = job.live.eta_seconds();
  return job.status() == "running" && eta ? duration_text(*eta) : kNone;
}

std::string loss_cell(const db::JobSummary& job, int64_t) {
  return job.live.loss ? fmt::format("{:.4g}", *job.live.loss) : kNone;
}

std::string gpu_cell(const db::JobSummary& job, int64_t) {
  if (!job.gpu_peak_bytes) return kNone;
  return job.gpu_total_bytes
             ? fmt::format("{}/{}", gib_text(*job.gpu_peak_bytes), gib_text(*job.gpu_total_bytes))
             : gib_text(*job.gpu_peak_bytes);
}

std::string headroom_cell(const db::JobSummary& job, int64_t) {
  if (!job.gpu_peak_bytes || !job.gpu_total_bytes) return kNone;
  const uint64_t peak = *job.gpu_peak_bytes;
  const uint64_t total = *job.gpu_total_bytes;
  return gib_text(total > peak ? total - peak : 0);
}

std::string marks_cell(const db::JobSummary& job, int64_t) {
  std::vector<std::string_view> marks;
  if (job.predicted_oom) marks.push_back("predicted");
  if (job.near_oom) marks.push_back("near-oom");
  return marks.empty() ? kNone : fmt::format("{}", fmt::join(marks, ","));
}

// Its current phase, while it runs: a finished run's last phase says nothing now.
std::string phase_cell(const db::JobSummary& job, int64_t) {
  return job.outcome == "running" && !job.live.phase.empty() ? job.live.phase : kNone;
}

std::string seen_cell(const db::JobSummary& job, int64_t now) {
  const int64_t at = last_written(job);
  return at > 0 ? duration_text(std::max<int64_t>(0, now - at)) : kNone;
}

std::string last_oom_cell(const db::JobSummary& job, int64_t) {
  if (job.last_phase.empty()) return kNone;
  return job.last_step ? fmt::format("{}@{}", job.last_phase, *job.last_step) : job.last_phase;
}

std::string top_fix_cell(const db::JobSummary& job, int64_t) {
  return job.top_fix.empty() ? kNone : job.top_fix;
}

std::string host_cell(const db::JobSummary& job, int64_t) {
  return job.host.empty() ? kNone : job.host;
}

// A stalled job says how long its log has been silent: what decides whether to look now.
std::string status_cell(const db::JobSummary& job, int64_t now) {
  const std::string status = job.status();
  if (status != "stalled" || last_written(job) <= 0) return status;
  return status + " " + duration_text(std::max<int64_t>(0, now - last_written(job)));
}

// The job's own column (its display name) is drawn apart: it is not a function of the job alone.
constexpr size_t kNameColumn = 1;
const Column kColumns[] = {
    {"HOST", 62, Align::kLeft, 20, false, host_cell},
    {"JOB", 100, Align::kLeft, 40, true, nullptr},
    {"STATUS", 99, Align::kLeft, 16, true, status_cell},
    {"PHASE", 56, Align::kLeft, 21, false, phase_cell},
    {"STEP", 95, Align::kRight, 21, true, step_cell},
    {"%", 66, Align::kRight, 4, false, percent_cell},
    {"RATE", 75, Align::kRight, 10, false, rate_cell},
    {"ETA", 85, Align::kRight, 6, false, eta_cell},
    {"LOSS", 50, Align::kRight, 10, false, loss_cell},
    {"GPU", 77, Align::kRight, 13, false, gpu_cell},
    {"FREE", 58, Align::kRight, 6, false, headroom_cell},
    {"MARKS", 90, Align::kLeft, 18, false, marks_cell},
    {"SEEN", 64, Align::kRight, 6, true, seen_cell},
    {"LAST OOM", 80, Align::kLeft, 28, false, last_oom_cell},
    {"TOP FIX", 82, Align::kLeft, 32, false, top_fix_cell},
};
constexpr size_t kColumnCount = std::size(kColumns);

// "6 jobs: 1 stalled, 1 near OOM, 2 crashed, 3 running".
std::string counts_text(const std::vector<db::JobSummary>& jobs) {
  if (jobs.empty()) return "no jobs yet";
  int stalled = 0, near = 0, crashes = 0, running = 0;
  for (const db::JobSummary& job : jobs) {
    const std::string status = job.status();
    stalled += status == "stalled";
    near += near_oom(job);
    crashes += crashed(job);
    running += status == "running";
  }
  std::vector<std::string> parts;
  for (const auto& [count, what] : {std::pair{stalled, "stalled"}, std::pair{near, "near OOM"},
                                    std::pair{crashes, "crashed"}, std::pair{running, "running"}}) {
    if (count > 0) parts.push_back(fmt::format("{} {}", count, what));
  }
  const std::string total = fmt::format("{} job{}", jobs.size(), jobs.size() == 1 ? "" : "s");
  return parts.empty() ? total : fmt::format("{}: {}", total, fmt::join(parts, ", "));
}

// The colour a job's status and marks are drawn in, when colour is on.
std::string painted_status(const db::JobSummary& job, std::string cell, bool color) {
  if (job.status() == "stalled")
    return paint(color, fmt::fg(fmt::terminal_color::yellow) | fmt::emphasis::bold, cell);
  if (crashed(job)) return paint(color, fmt::fg(fmt::terminal_color::red), cell);
  return cell;
}

}  // namespace

int attention_rank(const db::JobSummary& job) {
  if (job.status() == "stalled") return 0;
  if (near_oom(job)) return 1;
  if (job.outcome == "crashed_oom") return 2;
  if (job.outcome == "running") return 3;
  return 4;
}

std::vector<db::JobSummary> by_attention(std::vector<db::JobSummary> jobs) {
  std::stable_sort(jobs.begin(), jobs.end(), [](const db::JobSummary& a, const db::JobSummary& b) {
    return std::tuple(attention_rank(a), -last_written(a), a.name) <
           std::tuple(attention_rank(b), -last_written(b), b.name);
  });
  return jobs;
}

std::string render_top(const std::vector<db::JobSummary>& unsorted, const TopFrame& frame) {
  const size_t width = static_cast<size_t>(std::max(frame.width, 1));
  const std::vector<db::JobSummary> jobs = by_attention(unsorted);
  const std::vector<std::string> names = display_names(jobs);
  size_t shown = jobs.size();
  if (frame.rows > 0 && jobs.size() > static_cast<size_t>(frame.rows))
    shown = static_cast<size_t>(frame.rows - 1);

  // Every cell, then each column's width: its widest cell or title, at most its limit.
  std::vector<std::array<std::string, kColumnCount>> cells(shown);
  std::array<size_t, kColumnCount> widths{};
  std::array<bool, kColumnCount> visible{};
  for (size_t c = 0; c < kColumnCount; ++c) {
    widths[c] = columns(kColumns[c].title);
    visible[c] = kColumns[c].always;
  }
  for (size_t r = 0; r < shown; ++r) {
    for (size_t c = 0; c < kColumnCount; ++c) {
      std::string cell = c == kNameColumn ? names[r] : kColumns[c].cell(jobs[r], frame.now);
      cell = fit(cell, kColumns[c].max_width);
      widths[c] = std::max(widths[c], columns(cell));
      if (cell != kNone) visible[c] = true;
      cells[r][c] = std::move(cell);
    }
  }

  // Too wide: the name is cut to its floor, then the least needed columns go, then the name again.
  const auto line_width = [&] {
    size_t total = 0, count = 0;
    for (size_t c = 0; c < kColumnCount; ++c) {
      if (visible[c]) total += widths[c], ++count;
    }
    return total + (count > 0 ? count - 1 : 0);
  };
  const auto shrink_name = [&](size_t floor) {
    const size_t over = line_width() > width ? line_width() - width : 0;
    const size_t least = std::min(widths[kNameColumn], std::max(floor, columns("JOB")));
    widths[kNameColumn] =
        std::max(least, widths[kNameColumn] - std::min(over, widths[kNameColumn]));
  };
  shrink_name(kNameFloor);
  while (line_width() > width) {
    size_t drop = kColumnCount;
    for (size_t c = 0; c < kColumnCount; ++c) {
      if (!visible[c] || c == kNameColumn || kColumns[c].priority >= 99) continue;
      if (drop == kColumnCount || kColumns[c].priority < kColumns[drop].priority) drop = c;
    }
    if (drop == kColumnCount) break;
    visible[drop] = false;
  }
  shrink_name(kNameMin);

  std::string out;
  const auto add_line = [&](const std::string& line) { out += fit(line, width) + "\n"; };
  std::string header =
      "oomtriage top  " + utc_time(frame.now, "%Y-%m-%d %H:%M:%S UTC") + "  " + counts_text(jobs);
  if (!frame.source.empty()) header += "  store " + frame.source;
  out += paint(frame.color, fmt::emphasis::bold, fit(header, width)) + "\n";
  if (!frame.note.empty()) {
    out += paint(frame.color, fmt::fg(fmt::terminal_color::red), fit(frame.note, width)) + "\n";
  }

  std::vector<std::string> titles;
  for (size_t c = 0; c < kColumnCount; ++c) {
    if (visible[c]) titles.push_back(pad(kColumns[c].title, widths[c], kColumns[c].align));
  }
  std::string title_line = fit(fmt::format("{}", fmt::join(titles, " ")), width);
  while (!title_line.empty() && title_line.back() == ' ') title_line.pop_back();
  out += paint(frame.color, fmt::emphasis::reverse, title_line) + "\n";
  for (size_t r = 0; r < shown; ++r) {
    std::string line;
    size_t used = 0;
    for (size_t c = 0; c < kColumnCount; ++c) {
      if (!visible[c]) continue;
      const std::string cell = pad(fit(cells[r][c], widths[c]), widths[c], kColumns[c].align);
      const bool first = used == 0;
      used += (first ? 0 : 1) + widths[c];
      // A line is cut at the terminal's edge before it is painted, so that no escape is cut.
      if (used > width) break;
      std::string drawn = cell;
      if (kColumns[c].cell == status_cell) drawn = painted_status(jobs[r], cell, frame.color);
      if (kColumns[c].cell == marks_cell && near_oom(jobs[r]))
        drawn =
            paint(frame.color, fmt::fg(fmt::terminal_color::magenta) | fmt::emphasis::bold, cell);
      line += (first ? "" : " ") + drawn;
    }
    // Trailing blanks of left-aligned last cells say nothing.
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  if (shown < jobs.size()) add_line(fmt::format("… {} more", jobs.size() - shown));
  return out;
}

}  // namespace oomtriage::daemon
