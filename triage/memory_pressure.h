// triage/memory_pressure.h
//
// What the ranker (triage/ranker.h) reads of one moment when a job's GPU memory ran short, or is
// about to: the phase and step, what the job needed there, the card and what other processes
// held on it. Three things make one, each through its own function below: a crash (an OomEvent
// and its allocator's figures), a prediction (a phase of the memory model's estimate over the
// usable memory: `check`, and the first look at a job) and a near-OOM warning (a sampled peak
// near the card's limit). triage/triage_job.h ranks fixes from it, so no caller has to dress a
// prediction or a warning up as a crash. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "parsers/event.h"
#include "parsers/job_config.h"
#include "triage/memory_model.h"

namespace oomtriage::triage {

// A fix "fits" when its peak stays under this share of the memory the job may use (the card less
// other processes): the 5% margin the fixes' estimates speak of.
inline constexpr double kFitMargin = 0.95;

struct MemoryPressure {
  // What ran short: only a crash can say host RAM or /dev/shm; the others are GPU memory.
  parsers::OomKind kind = parsers::OomKind::kCuda;
  parsers::Phase phase = parsers::Phase::kUnknown;
  std::optional<int64_t> step;
  std::optional<int64_t> total_steps;
  // What the job needed there: the memory it held plus the request that failed, the predicted
  // peak, or the sampled one. Unknown when a crash's figures do not say it, or without a card.
  std::optional<uint64_t> need_bytes;
  std::optional<uint64_t> card_bytes;  // the card's capacity
  uint64_t others_bytes = 0;           // held on the card by other processes
  bool recovered = false;              // a crash the trainer caught and trained on after
  // A prediction of the memory model, not a crash: the fixes speak of what would happen, and of
  // no step (pressure_of_prediction's step only places the phase among the ranking rows).
  bool predicted = false;

  // What only a crash's allocator tells: who the other processes were, and how the memory lay
  // when the request failed (fragmentation).
  std::vector<parsers::OtherProcess> other_processes;
  std::optional<int> gpu_index;
  std::optional<uint64_t> requested_bytes;
  std::optional<uint64_t> free_bytes;
  std::optional<uint64_t> reserved_unallocated_bytes;
};

// A crash: its kind, phase and step, and what its figures say it needed. A lone "other process"
// that is the job itself (a container's host PID) counts as the job's own memory.
MemoryPressure pressure_of_crash(const parsers::OomEvent& event);

// The memory model's estimate of `phase` for a job that will not fit, or is tight, in
// `usable_bytes` (`check`'s usable memory, after a fleet correction of `correction_factor`). The
// card is the one whose fit (kFitMargin of it) is exactly that memory, so the fixes the ranker
// says fit are the ones the check says make every phase fit.
MemoryPressure pressure_of_prediction(const parsers::JobConfig& config, const PhaseEstimate& phase,
                                      uint64_t usable_bytes, double correction_factor);

// A running job whose sampled peak neared its card's limit (triage/gpu_timeline.h
// NearOomWatch). Other processes on the card are left out (others_bytes 0): the alert says what
// they hold (daemon/alerts/near_oom_alert.cc), and the fixes answer the job's own peak.
MemoryPressure pressure_of_near_oom(parsers::Phase phase, std::optional<int64_t> step,
                                    uint64_t peak_bytes, uint64_t card_bytes);

}  // namespace oomtriage::triage
