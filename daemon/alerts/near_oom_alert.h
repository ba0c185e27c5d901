// daemon/alerts/near_oom_alert.h
//
// The TrainingNearOOM warning: a running job's sampled GPU memory reached its share of what it
// may use on the card, or grows toward it step over step (triage/gpu_timeline.h NearOomWatch),
// as an AlertContent every receiver's payload takes (alert_payload.h): the phase, the step, the
// peak against the usable memory, what other processes hold, and the top change the ranking
// predicts to give headroom. Pure: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/alerts/alert_payload.h"
#include "triage/fix.h"
#include "triage/gpu_timeline.h"

namespace oomtriage::daemon {

struct NearOomRun {
  int64_t run_id = 0;
  int warning = 1;  // its number within the run (the webhook id's)
  std::string job;
  std::string trainer;
  std::string model_family;
  std::string log_path;
  unsigned gpu = 0;
  uint64_t card_bytes = 0;
  std::optional<int64_t> total_steps;
  std::string starts_at;  // RFC 3339
};

AlertContent near_oom_alert(const NearOomRun& run, const triage::NearOomWatch::Warning& warning,
                            const std::vector<triage::Fix>& fixes);

// The line the journal (or `run`'s stderr) gets: "job J: near OOM on GPU 0 in sampling at step
// 500: 22.9 GiB of 23.1 GiB usable (99%); top change: ...".
std::string near_oom_line(const AlertContent& alert);

}  // namespace oomtriage::daemon
