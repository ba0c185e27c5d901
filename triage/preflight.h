// triage/preflight.h
//
// Pre-flight: before a job starts, the memory model's estimate of every phase
// (triage/memory_model.h) held against the memory the job can use, the verdict (fits / tight /
// will not fit, and which phase first), and the changes ranked by cost that make every phase fit,
// each with its new predicted peak. `oomtriage check`, the daemon's and `run`'s first look at a
// job, and its TrainingOOMPredicted alert all read this. Pure.
#pragma once

#include <cstdint>
#include <vector>

#include "parsers/job_config.h"
#include "triage/fix.h"
#include "triage/memory_model.h"
#include "triage/memory_spec.h"

namespace oomtriage::triage {

struct Preflight {
  MemorySpec spec;  // what the model read (`check --explain`)
  MemoryEstimate estimate;
  uint64_t usable_bytes = 0;
  FitVerdict verdict;
  std::vector<Fix> fixes;  // empty when the job fits
};

// From a spec alone: fixes name the spec's own fields.
Preflight preflight_spec(const MemorySpec& spec, uint64_t usable_bytes,
                         const MemoryCorrection& correction = {});

// From a job's config: fixes in the job's own syntax, the same ids and targets as `scan`'s.
Preflight preflight_config(const parsers::JobConfig& config, uint64_t usable_bytes,
                           const MemoryCorrection& correction = {});

}  // namespace oomtriage::triage
