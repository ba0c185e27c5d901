// triage/config_edits.h
//
// A fix's changes applied to the job config's typed view (parsers/job_config.h), so that the
// memory model can price the fixed job (triage/spec_from_config.h, triage/memory_model.h). The
// changes are read in the ranker's neutral vocabulary ("train.batch_size",
// "datasets[0].resolution"), before triage/native_changes.h writes them in the trainer's own
// syntax. A path the view does not hold (host settings, the environment) changes nothing. Pure.
#pragma once

#include <vector>

#include "parsers/job_config.h"
#include "triage/fix.h"

namespace oomtriage::triage {

parsers::JobConfig with_changes(parsers::JobConfig config,
                                const std::vector<ConfigChange>& changes);

}  // namespace oomtriage::triage
