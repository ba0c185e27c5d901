// triage/model_phase.h
//
// The memory model's phase for a crash's phase (triage/memory_model.h): quantizing is part of
// loading; a crash whose phase is unknown is read as a training step. The planner corrects the
// model at that phase, and a job's own crash is evidence there (daemon/service/fleet_memory.h).
#pragma once

#include "parsers/event.h"

namespace oomtriage::triage {

inline parsers::Phase model_phase_of(parsers::Phase crash) {
  switch (crash) {
    case parsers::Phase::kQuantize: return parsers::Phase::kModelLoad;
    case parsers::Phase::kUnknown: return parsers::Phase::kTrainStep;
    default: return crash;
  }
}

}  // namespace oomtriage::triage
