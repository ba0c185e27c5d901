// triage/native_changes.h
//
// The ranker speaks one vocabulary (AI Toolkit's paths inside the process: "train.batch_size",
// "datasets[0].resolution"); this turns a fix's changes into the job's own syntax and file:
// AI Toolkit's YAML/JSON paths, a kohya or SimpleTuner TOML key in its table, a OneTrainer or
// HF JSON key, or a command-line flag, through the dialect table (parsers/trainer_dialect.h)
// and the places the config was read from. Pure.
#pragma once

#include "parsers/job_config.h"
#include "triage/fix.h"

namespace oomtriage::triage {

// Rewrites the neutral changes of `fix` for `config`. A change the trainer has no setting for
// is dropped; returns false when that leaves the fix without the changes it exists for (the
// fix is then not proposed).
bool to_native(Fix& fix, const parsers::JobConfig& config);

}  // namespace oomtriage::triage
