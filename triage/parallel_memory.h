// triage/parallel_memory.h
//
// What one GPU holds when a job runs on several (issue 44, "per GPU"): from the spec's processes,
// sharding, offloading and context parallel degree, the share of the weights, gradients and
// optimizer states each GPU keeps, what it adds (DDP's gradient buckets, the layers ZeRO-3 and
// FSDP gather), and the sentence the output prints ("per GPU, 4 processes: ZeRO-3 shards the
// parameters, gradients and optimizer states 4 ways"). The image model (triage/memory_model.cc)
// and the LLM model (triage/llm_memory.cc) both price through it. docs/memory-model.md, "Per GPU",
// gives the rules. Pure.
#pragma once

#include <string>
#include <vector>

#include "triage/memory_spec.h"

namespace oomtriage::triage {

struct ParallelPlan {
  int processes = 1;
  std::string sharding = "none";  // the spec's word, settled
  // The share of each a GPU holds (1: all of it; 0: offloaded).
  double weights = 1;
  double gradients = 1;
  double optimizer = 1;    // optimizer states and fp32 master weights
  double activations = 1;  // context parallel splits the sequence
  // ZeRO-3 / FSDP full shard: the layers being used are gathered whole on every GPU.
  bool gathers_layers = false;
  // DDP: the reducer's buckets, a second copy of the gradients.
  bool gradient_buckets = false;
  // DeepSpeed keeps fp32 master weights with its optimizer states whatever the model's dtype.
  bool deepspeed = false;
  // "per GPU, 4 processes: ZeRO-3 shards ..."; empty on one GPU without sharding.
  std::string summary;
  std::vector<std::string> assumptions;
};

ParallelPlan parallel_plan(const MemorySpec& spec);

}  // namespace oomtriage::triage
