// triage/spec_from_config.h
//
// A job config (parsers/job_config.h, any trainer) as the memory model's spec
// (triage/memory_spec.h): the family from the model's name, arch tag or family; the largest
// bucket and frame count; batch, checkpointing, precision, quantization, optimizer, text-encoder
// caching, offloading and previews. A knob the config does not show stays unset, so the model
// assumes and says so. Pure.
#pragma once

#include "parsers/job_config.h"
#include "triage/memory_spec.h"

namespace oomtriage::triage {

MemorySpec spec_from_config(const parsers::JobConfig& config);

}  // namespace oomtriage::triage
