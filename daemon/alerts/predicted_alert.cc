// daemon/alerts/predicted_alert.cc: the pre-flight's verdict in words, for every receiver.
#include "daemon/alerts/predicted_alert.h"

#include <fmt/format.h>

#include <algorithm>

#include "daemon/common/human_units.h"
#include "triage/fix_codec.h"
#include "triage/fleet_correction.h"

namespace oomtriage::daemon {

std::string first_failure_when(const parsers::JobConfig& c, parsers::Phase phase) {
  using parsers::Phase;
  switch (phase) {
    case Phase::kSampling:
      // AI Toolkit samples once before the first step unless told not to, then every N steps.
      if (c.skip_first_sample) return fmt::format("step {} (the first preview)", c.sample.every);
      return "step 0 (the baseline preview before training)";
    case Phase::kTrainStep: {
      const std::vector<int> sizes = c.all_resolutions();
      if (sizes.size() > 1) {
        return fmt::format("the first step at the {} px bucket", sizes.back());
      }
      return "step 1 (the first training step)";
    }
    case Phase::kModelLoad:
    case Phase::kQuantize: return "loading the model, before step 1";
    case Phase::kCacheLatents:
    case Phase::kCacheTextEmbeddings: return "caching, before step 1";
    case Phase::kSaving: return "the first save";
    case Phase::kUnknown: break;
  }
  return "unknown";
}

std::string change_text(const triage::Fix& fix) {
  std::vector<std::string> changes;
  for (const triage::ConfigChange& change : fix.changes) {
    changes.push_back(fmt::format("{}: {} -> {}", change.path, triage::value_text(change.from),
                                  triage::value_text(change.to)));
  }
  std::string text = fix.title.empty() ? fix.id : fix.title;
  if (!changes.empty()) text += fmt::format(" ({})", fmt::join(changes, ", "));
  if (fix.predicted_peak_bytes) {
    text += fmt::format("; predicted peak then {}", format_bytes(*fix.predicted_peak_bytes));
  }
  return text;
}

AlertFix alert_fix(const triage::Fix& fix) {
  AlertFix top{fix.id, fix.title, {}, fix.cost};
  for (const triage::ConfigChange& change : fix.changes) {
    top.changes.push_back(fmt::format("{}: {} -> {}", change.path, triage::value_text(change.from),
                                      triage::value_text(change.to)));
  }
  return top;
}

std::string top_change(const triage::Preflight& p) {
  if (!p.fixes.empty()) return change_text(p.fixes[0]);
  const triage::PhaseEstimate* phase = p.estimate.phase(p.verdict.first_failing);
  if (phase == nullptr) phase = &p.estimate.peak();
  const auto largest =
      std::max_element(phase->terms.begin(), phase->terms.end(),
                       [](const auto& a, const auto& b) { return a.bytes < b.bytes; });
  if (largest == phase->terms.end()) return "";
  return fmt::format("the largest term is {} at {}", largest->name, format_bytes(largest->bytes));
}

AlertContent predicted_oom_alert(const PredictedJob& job, const parsers::JobConfig& config,
                                 const triage::Preflight& p) {
  const parsers::Phase phase_id = p.verdict.first_failing != parsers::Phase::kUnknown
                                      ? p.verdict.first_failing
                                      : p.estimate.peak().phase;
  const triage::PhaseEstimate* phase = p.estimate.phase(phase_id);
  const uint64_t peak = phase ? phase->peak_bytes : p.estimate.peak().peak_bytes;
  AlertContent a;
  a.event_id = job.check_id;
  a.job = job.job;
  a.trainer = job.trainer;
  a.model_family = p.estimate.family;
  a.kind = "predicted";
  a.phase = std::string(parsers::to_string(phase_id));
  a.step = first_failure_when(config, phase_id);
  a.log_path = job.log_path;
  a.starts_at = job.starts_at;
  AlertContent::Prediction prediction;
  prediction.peak = format_bytes(peak);
  prediction.usable =
      fmt::format("{} of a {} card", format_bytes(p.usable_bytes), format_bytes(job.card_bytes));
  prediction.top_change = top_change(p);
  a.figures = fmt::format("predicted peak {}; {} usable", prediction.peak, prediction.usable);
  a.message = fmt::format(
      "The memory model predicts {} needs {} in {}, more than the {} usable of this {} card; it "
      "will first happen at: {}.",
      a.model_family, prediction.peak, a.phase, format_bytes(p.usable_bytes),
      format_bytes(job.card_bytes), a.step);
  if (!prediction.top_change.empty()) a.message += " Top change: " + prediction.top_change + ".";
  if (p.estimate.correction.runs > 0) {
    a.message += " (" + triage::describe(p.estimate.correction) + ")";
  }
  if (!p.fixes.empty()) a.fixes.push_back(alert_fix(p.fixes[0]));
  a.predicted = std::move(prediction);
  return a;
}

std::string predicted_oom_line(const AlertContent& a) {
  return fmt::format("warning: predicted OOM in {} (first at: {}): {} needs {}, {} usable{}",
                     a.phase, a.step, a.model_family, a.predicted ? a.predicted->peak : "?",
                     a.predicted ? a.predicted->usable : "?",
                     a.predicted && !a.predicted->top_change.empty()
                         ? "; top change: " + a.predicted->top_change
                         : "");
}

}  // namespace oomtriage::daemon
