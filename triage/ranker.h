// triage/ranker.h
//
// Ranks the fixes for one log: which OOM it was (kind, phase, step, figures), the job's config
// (parsers/job_config.h) and what is already applied. The rules are the seed guide's
// (docs/domain.md): gradient checkpointing first when it is explicitly off; cheaper previews for
// a sampling OOM; the top resolution bucket for an OOM at a random later step; a smaller batch
// with more gradient accumulation for an early OOM; quantization, low_vram and offloading for a
// load/quantize OOM; free the GPU, expandable segments, host memory and /dev/shm for the causes
// no config change fixes. A fix already applied, or one the config cannot express, is never
// proposed. Pure: no I/O.
#pragma once

#include <string>
#include <vector>

#include "parsers/event.h"
#include "parsers/job_config.h"
#include "triage/fix.h"

namespace oomtriage::triage {

struct TriageInput {
  const parsers::LogAnalysis* analysis = nullptr;
  const parsers::JobConfig* config = nullptr;  // null: no config, or it did not parse
  std::string config_problem;  // why there is no config, in words, for the fixes' "why"
};

// The event the fixes answer: the last OOM that was not recovered, else the last one.
const parsers::OomEvent* incident_to_fix(const parsers::LogAnalysis& analysis);

std::vector<Fix> rank_fixes(const TriageInput& input);

}  // namespace oomtriage::triage
