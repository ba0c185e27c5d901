// triage/spec_from_llm.h
//
// An LLM trainer's job (parsers/llm_config.h) and a job's distribution over GPUs
// (parsers/launcher.h) in the memory spec's words (triage/memory_spec.h), issue 44. Pure.
#pragma once

#include "parsers/launcher.h"
#include "parsers/llm_config.h"
#include "triage/memory_spec.h"

namespace oomtriage::triage {

// The family is the LLM table's id when the model's name matches a row, else the name as
// written (the model says what it assumed for it).
MemorySpec spec_from_llm(const parsers::LlmJobConfig& job);

// Sets the spec's processes, sharding, offloading and context parallel degree from `setup`
// (fields the setup does not state stay as they were).
void apply_distributed(MemorySpec& spec, const parsers::DistributedSetup& setup);

}  // namespace oomtriage::triage
