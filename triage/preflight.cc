// triage/preflight.cc: the estimate, the verdict and the fixes of a pre-flight check. The fixes
// come from the same ranking as a crash's (triage/triage_job.h): the memory pressure of the first
// phase over the usable memory, as the model predicts it (triage/memory_pressure.h
// pressure_of_prediction()).
#include "triage/preflight.h"

#include <fmt/format.h>

#include <algorithm>

#include "triage/memory_pressure.h"
#include "triage/spec_from_config.h"
#include "triage/triage_job.h"

namespace oomtriage::triage {

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
  const MemoryPressure pressure = pressure_of_prediction(config, *at, usable_bytes, factor);
  const JobView job{&config, "", nullptr};
  const uint64_t now = out.estimate.peak().peak_bytes;
  for (Fix& fix : triage_pressure(pressure, config.trainer, {}, job, {})) {
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
