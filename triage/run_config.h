// triage/run_config.h
//
// The config a crash ran with (issue 45). A log that prints its config (AI Toolkit's process
// config at start) shows what the run had; the job's file may have changed since (the user
// turned checkpointing on after the crash). The crash is explained and ranked from the run's
// values; the fixes are still written to the file as it is now. Pure.
#pragma once

#include <string>
#include <vector>

#include "parsers/job_config.h"

namespace oomtriage::triage {

struct RunConfig {
  parsers::JobConfig config;         // today's file with the run's values of what decides memory
  std::vector<std::string> changed;  // "train.gradient_checkpointing false -> true" (run -> now)
};

// `now` with the values `printed` shows for the settings that decide the peak (checkpointing,
// batch, accumulation, precision, quantization, low VRAM, previews, resolutions); `changed`
// empty when the file still says what the run had.
RunConfig as_the_run_had_it(const parsers::JobConfig& now, const parsers::JobConfig& printed);

}  // namespace oomtriage::triage
