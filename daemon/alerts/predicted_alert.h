// daemon/alerts/predicted_alert.h
//
// The TrainingOOMPredicted warning: the pre-flight's verdict (triage/preflight.h) on a job that
// will not fit, as an AlertContent every receiver's payload takes (alert_payload.h): the phase
// that fails first, the step where it will first happen when that is knowable, the predicted
// peak against the usable memory, and the top change. Pure: no I/O.
#pragma once

#include <cstdint>
#include <string>

#include "daemon/alerts/alert_payload.h"
#include "parsers/job_config.h"
#include "triage/preflight.h"

namespace oomtriage::daemon {

struct PredictedJob {
  int64_t check_id = 0;  // the stored pre-flight check: the alert's idempotency key
  std::string job;
  std::string trainer;
  std::string log_path;  // the log the job was first seen by, or `run`'s log
  uint64_t card_bytes = 0;
  std::string starts_at;  // RFC 3339
};

// When the failing phase first runs: the first preview (step 0, or sample_every when the job
// skips the first sample), "the first step at the 1536 px bucket" (not a step number: buckets
// come in random order), the first training step, or before training for loading and caching.
std::string first_failure_when(const parsers::JobConfig& config, parsers::Phase phase);

// The first fix's title and changes, else the failing phase's largest term.
std::string top_change(const triage::Preflight& preflight);
// One fix as a change: "Lower the batch (train.batch_size: 4 -> 2); predicted peak then 18 GiB".
std::string change_text(const triage::Fix& fix);
// One fix as an alert lists it.
AlertFix alert_fix(const triage::Fix& fix);

AlertContent predicted_oom_alert(const PredictedJob& job, const parsers::JobConfig& config,
                                 const triage::Preflight& preflight);

// The one line `run` prints to stderr: "oomtriage run: warning: predicted OOM in train_step ...".
std::string predicted_oom_line(const AlertContent& alert);

}  // namespace oomtriage::daemon
