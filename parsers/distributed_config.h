// parsers/distributed_config.h
//
// The files that say how a job is spread over GPUs (issue 44, "per GPU"): a DeepSpeed JSON
// (zero_optimization.stage, offload_optimizer/offload_param devices) and an accelerate YAML
// (distributed_type, num_processes, num_machines, deepspeed_config, fsdp_config), as the words
// of parsers/launcher.h. "auto" and absent values stay unset. Pure: text in, setup out.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

#include "parsers/launcher.h"
#include "parsers/result.h"

namespace oomtriage::parsers {

// kBadInput naming `source` when the text is not JSON / YAML.
Result<DistributedSetup> read_deepspeed_config(std::string_view text, std::string_view source);
Result<DistributedSetup> read_accelerate_config(std::string_view text, std::string_view source);

// A DeepSpeed config already parsed (axolotl and HF accept one inline).
DistributedSetup deepspeed_setup(const nlohmann::json& config);
// FSDP's settings in a trainer's config: HF's `fsdp: "full_shard auto_wrap"` words, axolotl's
// `fsdp: [full_shard, auto_wrap]`, an `fsdp_config` object (offload_params, sharding_strategy,
// reshard_after_forward).
DistributedSetup fsdp_setup(const nlohmann::json* fsdp, const nlohmann::json* fsdp_config);

}  // namespace oomtriage::parsers
