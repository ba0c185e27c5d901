// triage/fleet_correction.h
//
// "Learn from the fleet": the memory model's correction (MemoryCorrection, triage/memory_model.h)
// for one model family, from what earlier runs of that family on this fleet did. A completed
// run says its config fit; an OOM says its phase needed at least what the crash's figures show;
// a measured peak, when the job printed one, says by how much. Each run becomes a ratio of what
// happened to what the model predicted for it, and the factor is a median of those ratios, held
// within [kMinFactor, kMaxFactor] and only taken from kMinRuns runs or more (or one measured
// peak). Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "parsers/event.h"
#include "triage/memory_model.h"

namespace oomtriage::triage {

// One finished run of a family, as the store's history says it went (db/store.h fleet_history).
struct FleetRun {
  std::string family;           // the architecture row the model used ("flux1-dev")
  uint64_t predicted_peak = 0;  // the model's uncorrected peak: of the failing phase for an OOM
  bool oom = false;             // false: it completed
  parsers::Phase oom_phase = parsers::Phase::kUnknown;
  std::optional<uint64_t> need_bytes;     // an OOM: what it needed, from the crash's figures
  std::optional<uint64_t> measured_peak;  // the peak the job printed, when it did
  std::optional<uint64_t> card_bytes;     // the GPU's total memory, when known
};

inline constexpr double kMinFactor = 0.75;
inline constexpr double kMaxFactor = 1.5;
inline constexpr int kMinRuns = 3;

// The correction for `family` (on cards of `card_bytes` when at least kMinRuns of its runs were
// on such cards, else on any card). The rule, in order:
//  - a measured peak gives the ratio measured / predicted;
//  - an OOM gives need / predicted (it needed at least that: a lower bound taken as the value,
//    since the failed request is usually the last one of the peak); without figures, the usable
//    memory of its card, when known;
//  - the factor is the median of those ratios (1 without any);
//  - completed runs without a measured peak bound it from above: a run predicted at P that
//    completed on a card with U usable says the factor is at most U / P, so the factor is at
//    most the median of those bounds;
//  - clamped to [kMinFactor, kMaxFactor]; fewer than kMinRuns informative runs leave factor 1
//    (and `runs` says how many there were), unless one of them measured its peak (the daemon's
//    GPU memory timeline, docs/gpu-memory.md): a measurement is not a bound, one is enough.
MemoryCorrection fleet_correction(const std::vector<FleetRun>& history, const std::string& family,
                                  std::optional<uint64_t> card_bytes = std::nullopt);

// What an OOM needed, from its figures: the process's memory in use plus the failed request
// (triage/memory_pressure.h pressure_of_crash()); nullopt without the figures.
std::optional<uint64_t> oom_need_bytes(const parsers::OomEvent& event);

// "adjusted +7% from 12 runs of flux1-dev on this fleet", "no adjustment (2 runs of flux1-dev on
// this fleet, 3 needed)", "no fleet history for flux1-dev".
std::string describe(const MemoryCorrection& correction);

}  // namespace oomtriage::triage
