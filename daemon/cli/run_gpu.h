// daemon/cli/run_gpu.h
//
// The GPU memory timeline of one `oomtriage run` attempt (docs/gpu-memory.md): `run` knows its
// child's process group, so every process on a card in that group is the job's and every other
// one is "another process". Asked for from the child's pass-through loop (child_process.h) and
// taken there when NVML has answered (gpu_sample_worker.h: the loop never waits for NVML), with
// the step and phase its analyzer has read so far; a near-OOM warning comes back to the caller
// to print and send; the timeline is stored with the attempt's run once that is recorded. The
// same timeline, watch and alert as the daemon's (triage/gpu_timeline.h,
// daemon/alerts/near_oom_alert.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "daemon/common/gpu_sample_worker.h"
#include "db/store.h"
#include "triage/gpu_timeline.h"

namespace oomtriage::daemon {

struct AttemptWarning {
  unsigned gpu = 0;
  uint64_t card_bytes = 0;
  triage::NearOomWatch::Warning warning;
};

class AttemptGpu {
 public:
  // `worker` and `health` outlive the attempt (one NVML for every attempt of a run).
  AttemptGpu(GpuSampleWorker& worker, GpuHealth& health, pid_t process_group,
             double near_oom_share);

  // One turn at Unix time `now`: the sample NVML has answered since the last turn, if any,
  // added; the next one asked for. A warning when the run nears its card's limit.
  std::optional<AttemptWarning> sample(int64_t now, std::optional<int64_t> step,
                                       parsers::Phase phase);
  // Its timeline per card, as the store keeps it, for the run `run_id`.
  std::vector<db::GpuMemoryRow> rows(int64_t run_id, int64_t now) const;

 private:
  GpuSampleWorker& worker_;
  GpuHealth& health_;
  pid_t group_;
  triage::NearOomWatch watch_;
  std::map<unsigned, triage::GpuTimeline> cards_;
  std::map<unsigned, uint64_t> warned_;
};

}  // namespace oomtriage::daemon
