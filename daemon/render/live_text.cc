// daemon/render/live_text.cc: the live fields of a job as text (daemon/render/live_text.h).
#include "daemon/render/live_text.h"

#include <fmt/format.h>

#include "triage/fix_table.h"

namespace oomtriage::daemon {

std::string rate_text(std::optional<double> steps_per_second) {
  if (!steps_per_second || !(*steps_per_second > 0)) return "-";
  const double rate = *steps_per_second;
  if (rate >= 1.0) return fmt::format("{:.1f} it/s", rate);
  // tqdm turns the rate over below one step a second: seconds per step read better then.
  const double seconds = 1.0 / rate;
  return seconds < 10 ? fmt::format("{:.2f} s/it", seconds) : fmt::format("{:.1f} s/it", seconds);
}

std::string duration_text(std::optional<int64_t> seconds) {
  if (!seconds || *seconds < 0) return "-";
  const int64_t s = *seconds;
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m {:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h {:02}m", s / 3600, s % 3600 / 60);
  return fmt::format("{}d {:02}h", s / 86400, s % 86400 / 3600);
}

std::optional<int> percent_done(std::optional<int64_t> step, std::optional<int64_t> total_steps) {
  if (!step || !total_steps || *total_steps <= 0) return std::nullopt;
  if (*step >= *total_steps) return 100;
  if (*step <= 0) return 0;
  return static_cast<int>(*step * 100 / *total_steps);
}

std::string progress_text(std::optional<int64_t> step, std::optional<int64_t> total_steps) {
  if (!step) return "-";
  const auto percent = percent_done(step, total_steps);
  if (!percent) return std::to_string(*step);
  return fmt::format("{}/{} ({}%)", *step, *total_steps, *percent);
}

std::string loss_text(std::optional<double> loss) {
  if (!loss) return "-";
  return fmt::format("{:.4g}", *loss);
}

std::string eta_text(const db::JobSummary& job) {
  if (job.status() != "running") return "-";
  return duration_text(job.live.eta_seconds());
}

std::vector<std::string> warning_marks(const db::JobSummary& job) {
  std::vector<std::string> marks;
  if (job.predicted_oom) marks.emplace_back("predicted OOM");
  if (job.near_oom) marks.emplace_back("near OOM");
  return marks;
}

int64_t last_write_or_seen(const db::JobSummary& job) {
  return job.live.last_write > 0 ? job.live.last_write : job.last_seen;
}

bool runs_now(const db::JobSummary& job) {
  const std::string status = job.status();
  return status == "running" || status == "stalled";
}

std::string fix_name(std::string_view fix_id) {
  const triage::FixRow* row = triage::find_fix(fix_id);
  return row == nullptr ? "" : std::string(row->name);
}

std::string fix_label(std::string_view fix_id) {
  if (fix_id.empty() || fix_id == "-") return "-";
  const std::string name = fix_name(fix_id);
  if (name.empty()) return std::string(fix_id);
  return fmt::format("{} ({})", name, fix_id);
}

}  // namespace oomtriage::daemon
