// triage/preflight.cc: the estimate, the verdict and the fixes of a pre-flight check. The fixes
// come from the same ranking as a crash's (triage/ranker.h): the job is read as if it had run out
// of memory in the first phase over the card, with figures that say exactly what the model
// predicts there, on a card sized so that the ranker's fit (95% of the capacity) is the check's
// (the usable memory, after the fleet's correction).
#include "triage/preflight.h"

#include <fmt/format.h>

#include <algorithm>

#include "triage/ranker.h"
#include "triage/spec_from_config.h"

namespace oomtriage::triage {
namespace {

constexpr double kRankerFitMargin = 0.95;  // triage/planner.cc

parsers::OomEvent would_be_oom(const parsers::JobConfig& config, const PhaseEstimate& phase,
                               uint64_t usable_bytes, double correction) {
  parsers::OomEvent event;
  event.kind = parsers::OomKind::kCuda;
  event.phase = phase.phase;
  // A training step after the first few: the largest bucket comes at a random later step.
  if (phase.phase == parsers::Phase::kTrainStep) {
    event.step = std::max(6, config.steps / 2);
    event.total_steps = config.steps;
  }
  const uint64_t capacity =
      static_cast<uint64_t>(usable_bytes / (kRankerFitMargin * std::max(0.1, correction)));
  auto& f = event.figures;
  f.total_capacity_bytes = capacity;
  const uint64_t need = phase.peak_bytes;
  f.this_process_in_use_bytes = std::min(need, capacity > 0 ? capacity - 1 : 0);
  f.tried_to_allocate_bytes = need - *f.this_process_in_use_bytes;
  return event;
}

}  // namespace

Preflight preflight_spec(const MemorySpec& spec, uint64_t usable_bytes,
                         const MemoryCorrection& correction) {
  Preflight out;
  out.spec = spec;
  out.estimate = estimate_memory(spec, correction);
  out.usable_bytes = usable_bytes;
  out.verdict = judge(out.estimate, usable_bytes);
  return out;
}

Preflight preflight_config(const parsers::JobConfig& config, uint64_t usable_bytes,
                           const MemoryCorrection& correction) {
  Preflight out = preflight_spec(spec_from_config(config), usable_bytes, correction);
  // A value the job sets but that could not be read would be replaced by its default: a batch
  // of 10^12 judged as a batch of 1 "fits". Every knob but the two that do not move the peak
  // decides the verdict.
  for (size_t k = 0; k < parsers::kKnobCount; ++k) {
    const auto knob = static_cast<parsers::Knob>(k);
    if (!config.unread.test(k) || knob == parsers::Knob::kNumWorkers ||
        knob == parsers::Knob::kGradientAccumulation) {
      continue;
    }
    out.verdict.unread.emplace_back(parsers::to_string(knob));
  }
  if (!out.verdict.unread.empty()) {
    out.verdict.fit = Fit::kUnknown;
    out.verdict.first_failing = parsers::Phase::kUnknown;
    return out;
  }
  if (out.verdict.fit == Fit::kFits) return out;
  // Priced without the fleet's factor, as a crash's fixes are; the card is scaled instead.
  const MemoryEstimate plain = estimate_memory(out.spec);
  const PhaseEstimate* at =
      out.verdict.fit == Fit::kWillNotFit ? plain.phase(out.verdict.first_failing) : &plain.peak();
  if (at == nullptr) return out;
  const double factor = correction.factor > 0 ? correction.factor : 1.0;
  const parsers::OomEvent event = would_be_oom(config, *at, usable_bytes, factor);
  TriageInput input;
  input.event = &event;
  input.trainer = config.trainer;
  input.config = &config;
  const uint64_t now = out.estimate.peak().peak_bytes;
  for (Fix& fix : rank_fixes(input)) {
    if (!fix.predicted_peak_bytes || !fix.changes_config()) continue;
    const uint64_t peak = static_cast<uint64_t>(*fix.predicted_peak_bytes * factor);
    if (peak >= now) continue;  // not a lever for this job's memory
    fix.predicted_peak_bytes = peak;
    fix.estimate = fmt::format(
        "estimated by the memory model (docs/memory-model.md): the run's peak {:.2f} -> {:.2f} "
        "GiB with this fix; {} of {:.2f} GiB usable",
        now / double(1ull << 30), peak / double(1ull << 30),
        fix.fits == true ? "every phase fits" : "still over", usable_bytes / double(1ull << 30));
    out.fixes.push_back(std::move(fix));
  }
  // Those that make every phase fit first, each group in the ranking's order (cost).
  std::stable_partition(out.fixes.begin(), out.fixes.end(),
                        [](const Fix& fix) { return fix.fits == true; });
  for (size_t i = 0; i < out.fixes.size(); ++i) out.fixes[i].rank = static_cast<int>(i) + 1;
  return out;
}

}  // namespace oomtriage::triage
