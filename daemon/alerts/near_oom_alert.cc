// daemon/alerts/near_oom_alert.cc: a near-OOM warning in words, for every receiver.
#include "daemon/alerts/near_oom_alert.h"

#include <fmt/format.h>

#include "daemon/alerts/predicted_alert.h"
#include "daemon/common/human_units.h"

namespace oomtriage::daemon {

AlertContent near_oom_alert(const NearOomRun& run, const triage::NearOomWatch::Warning& w,
                            const std::vector<triage::Fix>& fixes) {
  AlertContent a;
  a.near_oom = true;
  a.event_id = run.run_id;
  a.revision = run.warning;
  a.job = run.job;
  a.trainer = run.trainer;
  a.model_family = run.model_family;
  a.kind = "near_oom";
  a.phase = std::string(parsers::to_string(w.phase));
  a.step = !w.step           ? "unknown"
           : run.total_steps ? fmt::format("{} of {}", *w.step, *run.total_steps)
                             : std::to_string(*w.step);
  a.log_path = run.log_path;
  a.starts_at = run.starts_at;
  const uint64_t others = run.card_bytes > w.usable_bytes ? run.card_bytes - w.usable_bytes : 0;
  const double share = w.usable_bytes ? 100.0 * static_cast<double>(w.peak_bytes) /
                                            static_cast<double>(w.usable_bytes)
                                      : 0;
  AlertContent::Prediction memory;
  memory.peak = format_bytes(w.peak_bytes);
  memory.usable = others > 0 ? fmt::format("{} of a {} card ({} held by other processes)",
                                           format_bytes(w.usable_bytes),
                                           format_bytes(run.card_bytes), format_bytes(others))
                             : fmt::format("{} of a {} card", format_bytes(w.usable_bytes),
                                           format_bytes(run.card_bytes));
  if (!fixes.empty()) {
    memory.top_change = change_text(fixes[0]);
    a.fixes.push_back(alert_fix(fixes[0]));
  }
  a.figures = fmt::format("{} in use of {} usable ({:.0f}%); GPU {}", memory.peak,
                          format_bytes(w.usable_bytes), share, run.gpu);
  a.message =
      w.by_trend
          ? fmt::format(
                "GPU {} memory of this job grew every step window to {} ({:.0f}% of {}) "
                "in {} at step {}; at this pace it reaches the card's limit within a few "
                "more.",
                run.gpu, memory.peak, share, memory.usable, a.phase, a.step)
          : fmt::format("GPU {} memory of this job reached {} ({:.0f}% of {}) in {} at step {}.",
                        run.gpu, memory.peak, share, memory.usable, a.phase, a.step);
  if (!memory.top_change.empty()) a.message += " Top change: " + memory.top_change + ".";
  a.predicted = std::move(memory);
  return a;
}

std::string near_oom_line(const AlertContent& a) {
  std::string line =
      fmt::format("job {}: near OOM in {} at step {}: {}", a.job, a.phase, a.step, a.figures);
  if (a.predicted && !a.predicted->top_change.empty()) {
    line += "; top change: " + a.predicted->top_change;
  }
  return line;
}

}  // namespace oomtriage::daemon
