// daemon/cli/run_gpu.cc: one attempt's samples, by process group.
#include "daemon/cli/run_gpu.h"

#include <unistd.h>

#include "daemon/service/gpu_monitor.h"

namespace oomtriage::daemon {

AttemptGpu::AttemptGpu(GpuSampleWorker& worker, GpuHealth& health, pid_t process_group,
                       double near_oom_share)
    : worker_(worker), health_(health), group_(process_group), watch_(near_oom_share) {
  (void)worker_.take();  // a sample asked for by the attempt before is not this one's
}

std::optional<AttemptWarning> AttemptGpu::sample(int64_t now, std::optional<int64_t> step,
                                                 parsers::Phase phase) {
  std::optional<std::vector<GpuSample>> cards = worker_.take();
  if (!worker_.request()) {
    if (const auto stuck = worker_.stuck()) health_.not_answering(*stuck, now);
  }
  if (!cards) return std::nullopt;
  if (const auto since = health_.answered(now)) {
    for (auto& [gpu, timeline] : cards_) timeline.add_gap(*since, now);
  }
  health_.sampled(*cards);
  std::optional<AttemptWarning> warned;
  for (const GpuSample& card : *cards) {
    uint64_t job = 0, others = 0;
    bool ours = false;
    for (const GpuProcess& process : card.processes) {
      const uint64_t bytes = process.used_bytes.value_or(0);
      if (::getpgid(static_cast<pid_t>(process.pid)) == group_) {
        job += bytes;
        ours = true;
      } else {
        others += bytes;
      }
    }
    if (!ours || card.total_bytes == 0) continue;
    const triage::GpuReading reading{now, step, phase, job, others, card.total_bytes};
    triage::GpuTimeline& timeline =
        cards_.try_emplace(card.index, triage::GpuTimeline(card.index)).first->second;
    timeline.add(reading);
    if (auto warning = watch_.check(timeline, reading)) {
      warned_[card.index] = warning->peak_bytes;
      warned = AttemptWarning{card.index, card.total_bytes, *warning};
    }
  }
  return warned;
}

std::vector<db::GpuMemoryRow> AttemptGpu::rows(int64_t run_id, int64_t now) const {
  std::vector<db::GpuMemoryRow> rows;
  for (const auto& [gpu, timeline] : cards_) {
    std::optional<db::GpuMemoryRow> row = timeline_row(run_id, timeline, now);
    if (!row) continue;
    row->from_start = true;  // sampled from the child's start, whatever it printed first
    if (const auto it = warned_.find(gpu); it != warned_.end()) row->warned_bytes = it->second;
    rows.push_back(std::move(*row));
  }
  return rows;
}

}  // namespace oomtriage::daemon
