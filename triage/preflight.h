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
#include "parsers/launcher.h"
#include "triage/fix.h"
#include "triage/memory_model.h"
#include "triage/memory_spec.h"

namespace oomtriage::triage {

// How far a verdict can be trusted: what the job states, what the model assumed in its place,
// and whether it knows the model at all.
struct Confidence {
  bool model_known = true;
  std::vector<std::string> fields_read;       // the spec's fields the job states ("batch_size")
  std::vector<std::string> defaults_assumed;  // the fields the model took a default for
  // The assumptions the verdict turns on: with the field's other common value the verdict
  // flips ("the text encoders are cached" when caching them is what makes the job fit).
  std::vector<std::string> deciding;
};

struct Preflight {
  MemorySpec spec;  // what the model read (`check --explain`)
  MemoryEstimate estimate;
  uint64_t usable_bytes = 0;
  FitVerdict verdict;
  Confidence confidence;
  std::vector<Fix> fixes;  // empty when the job fits
};

// From a spec alone: fixes name the spec's own fields.
Preflight preflight_spec(const MemorySpec& spec, uint64_t usable_bytes,
                         const MemoryCorrection& correction = {});

// From a job's config: fixes in the job's own syntax, the same ids and targets as `scan`'s.
Preflight preflight_config(const parsers::JobConfig& config, uint64_t usable_bytes,
                           const MemoryCorrection& correction = {});

// Issue 45, command lines: the job as a launcher spreads it (`accelerate launch --num_processes
// 4`, DeepSpeed, FSDP), judged per GPU, with the same fixes as the job's config, each priced per
// GPU (triage/preflight_launch.cc). A launch that changes nothing (one process, no sharding)
// gives exactly what the config alone gives.
Preflight preflight_config(const parsers::JobConfig& config,
                           const parsers::DistributedSetup& launch, uint64_t usable_bytes,
                           const MemoryCorrection& correction = {});

}  // namespace oomtriage::triage
