// parsers/launcher.h
//
// How a command line spreads its trainer over GPUs (issue 44, "per GPU"): the environment
// assignments before it (`CUDA_VISIBLE_DEVICES=0,1`), the launcher's own words (`accelerate
// launch --num_processes 4 --use_deepspeed --zero_stage 3`, `torchrun --nproc_per_node 8`,
// `deepspeed --num_gpus 2`, `python -m torch.distributed.run`), and the trainer's own
// `--deepspeed ds.json` / `--fsdp full_shard`. The files these name (a DeepSpeed JSON, an
// accelerate YAML) are read by parsers/distributed_config.h once the caller has their text.
// Pure: words in, what they say out.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace oomtriage::parsers {

// A job's distribution over GPUs, in the memory spec's words (triage/memory_spec.h).
struct DistributedSetup {
  std::optional<int> processes;  // GPUs over every machine
  std::optional<int> machines;
  // ddp | zero1 | zero2 | zero3 | fsdp_full | fsdp_grad_op | fsdp_hybrid | fsdp_no_shard
  std::optional<std::string> sharding;
  std::optional<std::string> offload_optimizer;  // cpu | nvme
  std::optional<std::string> offload_params;     // cpu | nvme
  std::optional<int> context_parallel;           // sequence split over this many GPUs
  std::optional<std::string> mixed_precision;    // the launcher's bf16 | fp16 | no
  std::optional<std::string> deepspeed_config;   // a DeepSpeed JSON path the words name
  std::optional<std::string> accelerate_config;  // an accelerate YAML path (--config_file)
  std::optional<std::string> fsdp_config;        // HF Trainer's --fsdp_config path
  std::optional<int> visible_gpus;               // CUDA_VISIBLE_DEVICES' count
  bool any() const;
};

// Fills what `to` leaves unset from `from` (a command line's words win over its files).
void fill_unset(DistributedSetup& to, const DistributedSetup& from);

struct LaunchedCommand {
  std::string launcher;  // "accelerate" | "torchrun" | "deepspeed" | "" (the script run directly)
  DistributedSetup setup;
  // The trainer's command: the script (or module, or CLI) and its arguments, launcher words and
  // environment assignments removed ("train.py --model_name_or_path ...", "trl sft ...").
  std::vector<std::string> trainer_argv;
};

LaunchedCommand read_launcher(const std::vector<std::string>& argv);

// HF Trainer's --fsdp words ("full_shard auto_wrap offload") as a sharding, nullopt when none.
std::optional<std::string> sharding_of_fsdp_words(const std::string& words);

}  // namespace oomtriage::parsers
