// triage/spec_from_llm.cc: field by field; the readers already applied each trainer's defaults.
#include "triage/spec_from_llm.h"

#include "triage/llm_families.h"

namespace oomtriage::triage {

MemorySpec spec_from_llm(const parsers::LlmJobConfig& job) {
  MemorySpec spec;
  const std::string model = job.model.value_or("");
  const LlmFamily* family = find_llm_family(model);
  spec.model_family = family != nullptr ? std::string(family->id) : model;
  spec.training_type = job.training;
  spec.quantization = job.quantization;
  spec.lora_rank = job.lora_rank;
  spec.lora_targets = job.lora_targets;
  spec.sequence_length = job.sequence_length;
  spec.batch_size = job.micro_batch;
  spec.gradient_accumulation = job.gradient_accumulation;
  spec.gradient_checkpointing = job.gradient_checkpointing;
  if (job.checkpoints_offloaded)
    spec.offload = Offload{.kind = "activation_offload", .amount = std::nullopt};
  spec.dtype = job.dtype;
  spec.weights_dtype = job.weights_dtype;
  spec.optimizer = job.optimizer;
  spec.fused_loss = job.fused_loss;
  spec.attention = job.attention;
  apply_distributed(spec, job.distributed);
  return spec;
}

void apply_distributed(MemorySpec& spec, const parsers::DistributedSetup& setup) {
  if (setup.processes) spec.processes = setup.processes;
  if (setup.machines) spec.machines = setup.machines;
  if (setup.sharding) spec.sharding = setup.sharding;
  if (setup.offload_optimizer) spec.offload_optimizer = setup.offload_optimizer;
  if (setup.offload_params) spec.offload_params = setup.offload_params;
  if (setup.context_parallel) spec.context_parallel = setup.context_parallel;
}

}  // namespace oomtriage::triage
