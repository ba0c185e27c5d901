// triage/planner_environment.cc: the fixes outside the training config, for causes no config
// change fixes: host RAM, a small /dev/shm (fewer dataloader workers help both), other
// processes holding the GPU, and fragmentation (PyTorch's expandable segments, set in the job's
// environment).
#include "triage/planner.h"

namespace oomtriage::triage::detail {

void Planner::plan_host_memory() {
  Fix fix =
      make("reduce_host_memory", "Reduce host RAM use (not GPU memory)",
           fmt::format("The process was killed for host RAM ({}){}: this is not a GPU OOM, so "
                       "batch size and gradient checkpointing do not help",
                       parsers::to_string(e_.kind), step_words()),
           "Fewer dataloader workers load data more slowly; adding RAM or swap costs nothing "
           "in training but swap is slow",
           0.8);
  int workers = 0;
  for (size_t i = 0; knows(Knob::kNumWorkers) && i < c_.datasets.size(); ++i) {
    if (c_.datasets[i].num_workers > 1) {
      change(fix, fmt::format("datasets[{}].num_workers", i), js(c_.datasets[i].num_workers),
             js(1));
      ++workers;
    }
  }
  fix.why += workers > 0 ? "; each dataloader worker holds its own copy of the dataset state"
                         : "; add RAM or swap, or close other programs";
  add(0, std::move(fix), unmodelled());
}

void Planner::plan_shm() {
  Fix fix = make("increase_shm", "Give the container a larger /dev/shm",
                 "The dataloader ran out of shared memory (/dev/shm), typical of Docker's 64 MB "
                 "default; this is not a GPU OOM",
                 "None once the container has --shm-size=16g (compose: shm_size: 16gb); with 0 "
                 "workers data loads in the training process, more slowly",
                 0.85);
  for (size_t i = 0; knows(Knob::kNumWorkers) && i < c_.datasets.size(); ++i) {
    if (c_.datasets[i].num_workers > 0) {
      change(fix, fmt::format("datasets[{}].num_workers", i), js(c_.datasets[i].num_workers),
             js(0));
    }
  }
  add(0, std::move(fix), unmodelled());
}

void Planner::plan_free_gpu(int priority) {
  const uint64_t others = e_.others_bytes;
  std::vector<std::string> pids;
  for (const auto& p : e_.other_processes) {
    pids.push_back(fmt::format("{} ({})", p.pid, gib(p.bytes)));
  }
  Fix fix = make("free_gpu", "Free the GPU: other processes hold its memory",
                 fmt::format("{} other process{} held {} on GPU {} when the job failed: {}; no "
                             "config change gives that memory back",
                             pids.size(), pids.size() == 1 ? "" : "es", gib(others),
                             e_.gpu_index.value_or(0), fmt::join(pids, ", ")),
                 "None for the job; stop or move the other processes (nvidia-smi shows them)", 0.9);
  add(priority, std::move(fix),
      Effect{.frees_other_processes = true, .what = "other processes gone"});
}

void Planner::plan_expandable_segments(int priority, int priority_if_short) {
  const uint64_t unalloc = e_.reserved_unallocated_bytes.value_or(0);
  const uint64_t tried = e_.requested_bytes.value_or(0);
  // What was missing: the request minus what was free (the whole request when free is unknown).
  const uint64_t free = e_.free_bytes.value_or(0);
  const uint64_t deficit = tried > free ? tried - free : 0;
  const bool covers = unalloc >= deficit;
  Fix fix = make("expandable_segments", "Let PyTorch's allocator grow segments (fragmentation)",
                 fmt::format("{} was reserved by PyTorch but unallocated when {} was requested{}: "
                             "{}",
                             gib(unalloc), gib(tried),
                             e_.free_bytes ? fmt::format(" with {} free", gib(*e_.free_bytes)) : "",
                             covers ? "the memory was there, in pieces"
                                    : "even unfragmented it would not cover the shortfall"),
                 "None measurable; set it in the job's environment", covers ? 0.7 : 0.4);
  ConfigChange env;
  env.path = "env.PYTORCH_CUDA_ALLOC_CONF";
  env.to = js("expandable_segments:True");
  env.kind = parsers::TargetKind::kEnv;
  fix.changes.push_back(std::move(env));
  add(covers ? priority : priority_if_short, std::move(fix),
      Effect{.reclaims_fragmentation = true, .what = "reserved-but-unallocated memory reclaimed"},
      covers);
}

}  // namespace oomtriage::triage::detail
