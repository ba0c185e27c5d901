// parsers/llm_config.h
//
// The readers of decoder-LLM fine-tunes (issue 44): an axolotl YAML, a LLaMA-Factory YAML, TRL's
// `trl sft` command line and its --config YAML, HF Trainer's arguments (`run_clm.py
// --model_name_or_path ... --per_device_train_batch_size ...`, a training_args.json) and an
// unsloth-style YAML (model_name, max_seq_length, load_in_4bit). Each trainer is a table of its
// options (parsers/llm_config.cc) with its own defaults: what a config leaves out takes the
// trainer's default and says so. All of them run HF Trainer underneath, so the job registry
// treats them as the `transformers` trainer (parsers/trainer_table.cc). Pure: a parsed document
// or the words of a command in, the job out.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/launcher.h"

namespace oomtriage::parsers {

// An LLM fine-tune in the memory spec's words (triage/memory_spec.h); unset: not known.
struct LlmJobConfig {
  std::string reader;  // axolotl | llama-factory | trl | transformers | unsloth
  std::optional<std::string> model;
  std::optional<std::string> training;      // lora | full | freeze
  std::optional<std::string> quantization;  // none | nf4 | nf4_double_quant | int8
  std::optional<int> lora_rank;
  std::optional<std::vector<std::string>> lora_targets;
  std::optional<int> sequence_length;
  std::optional<int> micro_batch;
  std::optional<int> gradient_accumulation;
  std::optional<bool> gradient_checkpointing;
  bool checkpoints_offloaded = false;        // unsloth's and axolotl's offloaded checkpointing
  std::optional<std::string> dtype;          // bf16 | fp16 | fp32: the compute precision
  std::optional<std::string> weights_dtype;  // the dtype the weights are loaded in
  std::optional<std::string> optimizer;
  std::optional<bool> fused_loss;
  std::optional<std::string> attention;
  DistributedSetup distributed;       // deepspeed / fsdp named in the config
  std::vector<std::string> defaults;  // "sequence_len not set: axolotl's default 512"
  std::vector<std::string> problems;  // values that did not read
};

// The job of a config document (YAML or JSON, already parsed) when it is an LLM trainer's;
// nullopt when it is not (an image trainer's config goes on to its own reader).
std::optional<LlmJobConfig> read_llm_config(const nlohmann::json& doc);

// The job of a trainer's command line (launcher words already removed: parsers/launcher.h):
// `trl sft ...`, `axolotl train cfg.yaml`, `llamafactory-cli train cfg.yaml`, a script with HF
// Trainer's arguments. `load` reads a config file the command names (`--config x.yaml`,
// `axolotl train x.yaml`) to its parsed document, or nullopt when it cannot be read. nullopt when
// the command is not an LLM fine-tune's.
using ConfigLoader = std::function<std::optional<nlohmann::json>(const std::string& path)>;
std::optional<LlmJobConfig> read_llm_command(const std::vector<std::string>& argv,
                                             const ConfigLoader& load = {});

}  // namespace oomtriage::parsers
