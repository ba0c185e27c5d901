// triage/fleet_correction.cc: each run as a ratio of what happened to what was predicted, the
// median, the completed runs' upper bound, the clamp.
#include "triage/fleet_correction.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "triage/memory_pressure.h"

namespace oomtriage::triage {
namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::string scope_of(const std::string& family, std::optional<uint64_t> card_bytes) {
  if (!card_bytes) return family + " on this fleet";
  const double gib = static_cast<double>(*card_bytes) / (1024.0 * 1024 * 1024);
  return fmt::format("{} on {:.0f} GiB cards on this fleet", family, gib);
}

// A run's ratio (measured or lower bound), or its upper bound; neither when it tells nothing.
struct Reading {
  std::optional<double> ratio;
  std::optional<double> upper;
};

Reading read_run(const FleetRun& run) {
  Reading r;
  if (run.predicted_peak == 0) return r;
  const auto predicted = static_cast<double>(run.predicted_peak);
  if (run.measured_peak) {
    r.ratio = static_cast<double>(*run.measured_peak) / predicted;
  } else if (run.oom && run.need_bytes) {
    r.ratio = static_cast<double>(*run.need_bytes) / predicted;
  } else if (run.oom && run.card_bytes) {
    r.ratio = static_cast<double>(usable_bytes(*run.card_bytes)) / predicted;
  } else if (!run.oom && run.card_bytes) {
    r.upper = static_cast<double>(usable_bytes(*run.card_bytes)) / predicted;
  }
  return r;
}

}  // namespace

MemoryCorrection fleet_correction(const std::vector<FleetRun>& history, const std::string& family,
                                  std::optional<uint64_t> card_bytes) {
  std::vector<const FleetRun*> of_family;
  for (const FleetRun& run : history) {
    if (run.family == family) of_family.push_back(&run);
  }
  // The card's own runs when there are enough of them: a 12 GiB card's allocator behaves unlike
  // an 80 GiB one's; otherwise every card of the family.
  std::optional<uint64_t> scope_card;
  if (card_bytes) {
    const auto on_card = std::count_if(of_family.begin(), of_family.end(), [&](const FleetRun* r) {
      return r->card_bytes == card_bytes;
    });
    if (on_card >= kMinRuns) {
      std::erase_if(of_family, [&](const FleetRun* r) { return r->card_bytes != card_bytes; });
      scope_card = card_bytes;
    }
  }
  std::vector<double> ratios;
  std::vector<double> uppers;
  int measured = 0;
  for (const FleetRun* run : of_family) {
    const Reading r = read_run(*run);
    if (r.ratio && std::isfinite(*r.ratio)) {
      ratios.push_back(*r.ratio);
      if (run->measured_peak) ++measured;
    }
    if (r.upper && std::isfinite(*r.upper)) uppers.push_back(*r.upper);
  }
  MemoryCorrection correction;
  correction.runs = static_cast<int>(ratios.size() + uppers.size());
  correction.measured = measured;
  correction.scope = scope_of(family, scope_card);
  if (correction.runs < kMinRuns && measured == 0) return correction;
  double factor = ratios.empty() ? 1.0 : median(ratios);
  if (!uppers.empty()) factor = std::min(factor, median(uppers));
  correction.factor = std::clamp(factor, kMinFactor, kMaxFactor);
  return correction;
}

std::optional<uint64_t> oom_need_bytes(const parsers::OomEvent& event) {
  const MemoryPressure pressure = pressure_of_crash(event);
  if (!pressure.need_bytes || *pressure.need_bytes == 0) return std::nullopt;
  return pressure.need_bytes;
}

std::string describe(const MemoryCorrection& c) {
  if (c.runs == 0) return "no fleet history" + (c.scope.empty() ? "" : " for " + c.scope);
  if (c.runs < kMinRuns && c.measured == 0) {
    return fmt::format("no adjustment ({} run{} of {}, {} needed)", c.runs, c.runs == 1 ? "" : "s",
                       c.scope, kMinRuns);
  }
  const long percent = std::lround((c.factor - 1.0) * 100);
  const std::string measured =
      c.measured == 0 ? "" : fmt::format(", {} with a measured peak", c.measured);
  if (percent == 0) {
    return fmt::format("no adjustment needed from {} run{} of {}{}", c.runs, c.runs == 1 ? "" : "s",
                       c.scope, measured);
  }
  return fmt::format("adjusted {:+d}% from {} run{} of {}{}", percent, c.runs,
                     c.runs == 1 ? "" : "s", c.scope, measured);
}

}  // namespace oomtriage::triage
