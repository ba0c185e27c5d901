// triage/memory_pressure.cc: a crash's figures read as what the job needed; a prediction and a
// near-OOM warning, which say it outright.
#include "triage/memory_pressure.h"

#include <algorithm>

namespace oomtriage::triage {
namespace {

// "Process P has X memory in use" names this job itself when it runs in a container (the
// driver reports the host's PID): a process whose memory matches the job's own in-use figure,
// or PyTorch's reserved memory plus a CUDA context, is the job.
bool is_this_job(const parsers::OtherProcess& process, const parsers::MemoryFigures& f) {
  constexpr uint64_t kContextAllowance = 3ull << 29;  // 1.5 GiB of context and non-PyTorch memory
  if (f.this_process_in_use_bytes) {
    const uint64_t own = *f.this_process_in_use_bytes;
    const uint64_t diff = own > process.bytes ? own - process.bytes : process.bytes - own;
    return diff * 100 <= own;  // within 1%
  }
  const std::optional<uint64_t> reserved =
      f.reserved_total_bytes ? f.reserved_total_bytes
      : f.allocated_by_pytorch_bytes && f.reserved_unallocated_bytes
          ? std::optional<uint64_t>(*f.allocated_by_pytorch_bytes + *f.reserved_unallocated_bytes)
          : f.allocated_by_pytorch_bytes;
  if (!reserved || *reserved == 0) return false;
  return process.bytes >= *reserved && process.bytes - *reserved <= kContextAllowance;
}

// The memory the job held when its request failed, from the best figure the allocator gave: its
// own in-use figure, else PyTorch's allocated and reserved memory, else the card less what was
// free and what the others held.
std::optional<uint64_t> held_bytes(const parsers::MemoryFigures& f, uint64_t capacity,
                                   uint64_t others) {
  if (f.this_process_in_use_bytes && *f.this_process_in_use_bytes < capacity) {
    return *f.this_process_in_use_bytes;
  }
  if (f.allocated_by_pytorch_bytes) {
    return *f.allocated_by_pytorch_bytes + f.reserved_unallocated_bytes.value_or(0);
  }
  if (f.free_bytes) {
    const uint64_t free = std::min(*f.free_bytes, capacity);
    return capacity - free - std::min(others, capacity - free);
  }
  return std::nullopt;
}

}  // namespace

MemoryPressure pressure_of_crash(const parsers::OomEvent& event) {
  parsers::MemoryFigures f = event.figures;
  // Only a lone process can be told apart as the job; with several, all are others.
  if (f.other_processes.size() == 1 && is_this_job(f.other_processes.front(), f)) {
    if (!f.this_process_in_use_bytes) f.this_process_in_use_bytes = f.other_processes.front().bytes;
    f.other_processes.clear();
  }
  MemoryPressure p;
  p.kind = event.kind;
  p.phase = event.phase;
  p.step = event.step;
  p.total_steps = event.total_steps;
  p.recovered = event.recovered;
  p.card_bytes = f.total_capacity_bytes;
  for (const parsers::OtherProcess& other : f.other_processes) p.others_bytes += other.bytes;
  p.gpu_index = f.gpu_index;
  p.requested_bytes = f.tried_to_allocate_bytes;
  p.free_bytes = f.free_bytes;
  p.reserved_unallocated_bytes = f.reserved_unallocated_bytes;
  if (p.card_bytes) {
    const uint64_t others = std::min(p.others_bytes, *p.card_bytes);
    if (const auto held = held_bytes(f, *p.card_bytes, others)) {
      p.need_bytes = *held + f.tried_to_allocate_bytes.value_or(0);
    }
  }
  p.other_processes = std::move(f.other_processes);
  return p;
}

MemoryPressure pressure_of_prediction(const parsers::JobConfig& config, const PhaseEstimate& phase,
                                      uint64_t usable_bytes, double correction_factor) {
  MemoryPressure p;
  p.predicted = true;
  p.phase = phase.phase;
  // A training step after the first few: the largest bucket comes at a random later step.
  if (phase.phase == parsers::Phase::kTrainStep) {
    p.step = std::max(6, config.steps / 2);
    p.total_steps = config.steps;
  }
  p.need_bytes = phase.peak_bytes;
  p.card_bytes =
      static_cast<uint64_t>(usable_bytes / (kFitMargin * std::max(0.1, correction_factor)));
  return p;
}

MemoryPressure pressure_of_near_oom(parsers::Phase phase, std::optional<int64_t> step,
                                    uint64_t peak_bytes, uint64_t card_bytes) {
  MemoryPressure p;
  p.phase = phase;
  p.step = step;
  p.need_bytes = peak_bytes;
  p.card_bytes = card_bytes;
  return p;
}

}  // namespace oomtriage::triage
