// parsers/trainer_table.cc: the rows. Sources: each trainer's argument parser and docs
// (docs/self-healing-and-fleet.md for resuming, parsers/trainer_dialect.cc for the rest).
#include "parsers/trainer_table.h"

#include <algorithm>

namespace oomtriage::parsers {

using How = ResumeOption::How;
using Newest = CheckpointPattern::Newest;

const std::vector<TrainerRow>& trainer_table() {
  static const std::vector<TrainerRow> kRows = {
      {.trainer = Trainer::kUnknown,
       .name = "unknown",
       .aliases = {"auto"},
       .writes_flags = false,
       .resume = {}},
      {.trainer = Trainer::kAiToolkit,
       .name = "ai-toolkit",
       .short_name = "aitk",
       .aliases = {"aitoolkit", "ostris"},
       .rules_prefix = "aitk-",
       .writes_flags = false,
       .resume = {.how = How::kByItself},
       .config_files = {".job_config.json", "config.yaml"}},
      // Its config is the --config_file its log or command line names: no name beside the log.
      {.trainer = Trainer::kSdScripts,
       .name = "sd-scripts",
       .short_name = "kohya",
       .aliases = {"kohya-ss", "sdscripts"},
       .rules_prefix = "kohya-",
       .writes_flags = true,
       // kohya saves a resumable state only when asked (the cost: disk).
       .resume = {.how = How::kFlag,
                  .flag = "--resume",
                  .also_switch = "--skip_until_initial_step",
                  .first_attempt = "--save_state"},
       .preview_check =
           "kohya reads each preview's size and steps from the sample prompts file: lower --w "
           "and --h (1024 -> 768) and --s (30 -> 20) on each prompt line, or sample less often "
           "(sample_every_n_steps)",
       .checkpoint = {.folder_flag = "--output_dir",
                      .glob = "*-state",
                      .newest = Newest::kByTime,
                      .missing = "no saved state (*-state folder) to resume from"}},
      {.trainer = Trainer::kDiffusers,
       .name = "diffusers",
       .rules_prefix = "diffusers-",
       .writes_flags = true,
       .resume = {.how = How::kFlag, .flag = "--resume_from_checkpoint", .value = "latest"},
       .preview_check =
           "diffusers' scripts validate at the training resolution: lower "
           "--num_validation_images, validate less often (--validation_epochs), or drop "
           "--validation_prompt"},
      {.trainer = Trainer::kSimpleTuner,
       .name = "simpletuner",
       .aliases = {"simple-tuner"},
       .rules_prefix = "simpletuner-",
       .writes_flags = true,
       .resume = {.how = How::kGluedFlag, .flag = "--resume_from_checkpoint", .value = "latest"},
       .preview_check = "lower --validation_resolution and --validation_num_inference_steps, or "
                        "set --validation_disable",
       .config_files = {"config.json", "config.toml"}},
      {.trainer = Trainer::kOneTrainer,
       .name = "onetrainer",
       .aliases = {"one-trainer"},
       .rules_prefix = "onetrainer-",
       .writes_flags = false,
       .resume = {.how = How::kAppendOnce,
                  .flag = "--config-value",
                  .value = "continue_last_backup=true"},
       .preview_check =
           "OneTrainer takes each sample's size and steps from its samples file: lower width, "
           "height and diffusion steps there, or set sample_after_unit to NEVER",
       .config_files = {"config.json"}},
      {.trainer = Trainer::kTransformers,
       .name = "transformers",
       .short_name = "hf",
       .aliases = {"huggingface", "hf-trainer"},
       .rules_prefix = "hf-",
       .writes_flags = true,
       .resume = {.how = How::kFlag, .flag = "--resume_from_checkpoint"},
       .preview_check =
           "lower --per_device_eval_batch_size (with --eval_accumulation_steps to keep memory "
           "flat), or evaluate less often",
       .checkpoint = {.folder_flag = "--output_dir",
                      .glob = "checkpoint-*",
                      .newest = Newest::kByNumber,
                      .missing = "no checkpoint-N folder to resume from"},
       .config_files = {"training_args.json"}},
      {.trainer = Trainer::kComfyUi,
       .name = "comfyui",
       .aliases = {"comfy"},
       .rules_prefix = "comfyui-",
       .writes_flags = false,
       .resume = {}},
  };
  return kRows;
}

const TrainerRow& trainer_row(Trainer trainer) {
  const auto& rows = trainer_table();
  const auto at = std::find_if(rows.begin(), rows.end(),
                               [&](const TrainerRow& row) { return row.trainer == trainer; });
  return at == rows.end() ? rows.front() : *at;
}

}  // namespace oomtriage::parsers
