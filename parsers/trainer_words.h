// parsers/trainer_words.h
//
// The trainers' own words for what a job trains, in the neutral vocabulary: SimpleTuner's
// model_family + model_flavour, OneTrainer's model_type and training_method, musubi-tuner's
// --task, and the scripts of kohya sd-scripts, musubi-tuner and diffusers' examples (the script
// a command runs says the family and whether it is a LoRA, a full fine-tune or a ControlNet).
// Each is a table, so a new model or script is one row; the sources are listed in
// docs/trainer-readers.md. Family ids are those of triage/architectures.h; a word no row knows
// leaves the family unknown (never a guess). Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/event.h"
#include "parsers/job_config.h"

namespace oomtriage::parsers {

// What a trainer's script says of its job.
struct ScriptFacts {
  Trainer trainer = Trainer::kUnknown;
  std::string_view training_type;  // "lora", "full", "controlnet"; "" when the script trains any
  std::string_view family;         // an architecture id, "" when the script serves many
  // sd-scripts' FLUX and HunyuanImage count --blocks_to_swap N as N/2 double blocks and N single
  // blocks' worth (docs/trainer-readers.md): the denoiser's blocks (double and
  // single, as triage/architectures.h counts them) that one swap unit stands for; 1 elsewhere.
  double blocks_per_swap_unit = 1.0;
  // musubi-tuner's scripts train from text-encoder outputs cached beforehand by its own caching
  // script: the encoders are never loaded while training.
  bool text_encoder_cached = false;
  // Issue 45, command lines: the script's --mixed_precision defaults to None, which accelerate
  // fills from its launcher's --mixed_precision (musubi-tuner, diffusers' examples); sd-scripts'
  // default "no" is passed to accelerate and wins over the launcher's.
  bool precision_from_launcher = false;
};

// The facts of the script a command runs ("/x/sd-scripts/sdxl_train.py" -> sd-scripts, full,
// sdxl); nullopt for a script no row knows.
std::optional<ScriptFacts> script_facts(std::string_view script);

// The first word of a command line that names a Python script, or "".
std::string script_in(const std::vector<std::string>& argv);

// SimpleTuner's model_family and model_flavour ("flux", "dev") -> an architecture id, or "".
std::string simpletuner_family(std::string_view family, std::string_view flavour);

// OneTrainer's model_type ("FLUX_DEV_1") -> an architecture id, or "".
std::string onetrainer_family(std::string_view model_type);

// musubi-tuner's --task ("t2v-14B", "i2v-A14B", "ti2v-5B") -> an architecture id, or "".
std::string musubi_task_family(std::string_view task);

// A trainer's precision word for frozen weights -> the spec's quantization word ("int8-quanto"
// -> "int8", "nf4-bnb" -> "nf4", "FLOAT_8" -> "fp8", "no_change"/"BFLOAT_16" -> "none"); nullopt
// for a word no trainer uses.
std::optional<std::string> quantization_word(std::string_view native);

// A trainer's training-type word -> "lora" | "lokr" | "loha" | "full" | "embedding" | "vae" |
// "controlnet" (OneTrainer FINE_TUNE, SimpleTuner model_type full, LyCORIS algo lokr ...);
// nullopt for a word no trainer uses.
std::optional<std::string> training_word(std::string_view native);

// Settles the family and training type from the words a reader collected (family_words, the
// script): sets family_id, family and network_type where the words name them.
void apply_script(JobConfig& config, const ScriptFacts& facts);

}  // namespace oomtriage::parsers
