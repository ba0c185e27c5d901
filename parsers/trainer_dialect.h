// parsers/trainer_dialect.h
//
// How each trainer spells each lever: one table of (trainer, neutral key, native key, value
// codec, the trainer's documented default). The native config readers (parsers/native_config.h)
// read through it and the triage engine writes fixes through it (triage/native_changes.h), so
// a knob is read and written under the same name. Neutral keys are AI Toolkit's paths inside
// the process ("train.batch_size", "datasets[].resolution"), the vocabulary the ranker speaks.
// Pure.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/event.h"

namespace oomtriage::parsers {

enum class Codec {
  kInt,
  kBool,
  kResolution,      // 1024, "1024", "1024,768", [1024, 768]: the longest side
  kDtype,           // native precision names <-> "fp32" | "fp16" | "bf16"
  kOptimizer,       // native optimizer names <-> "adamw" | "adamw8bit" | other (kept)
  kEightBitFlag,    // diffusers' --use_8bit_adam: true is "adamw8bit", false "adamw"
  kBf16Flag,        // HF's bf16: true is "bf16"; false says nothing (fp16 may be on)
  kBoolAsOnOff,     // OneTrainer's gradient_checkpointing: "ON"/"OFF"/"CPU_OFFLOADED" (or a bool)
  kQuantizeName,    // SimpleTuner's base_model_precision: "no_change" is off, "int8-quanto" on
  kPresentIsFalse,  // a key whose presence turns sampling on (--validation_prompt, sample_prompts)
  kNoIsTrue,        // HF's eval_strategy: "no" means evaluation is off
  // Issue 44, readers (parsers/trainer_words.h): values read, never written by a fix.
  kText,          // a word kept as written (SimpleTuner model_family, musubi --task)
  kQuantWord,     // "int4-quanto", "nf4-bnb", "FLOAT_8", "no_change" -> "int4", "nf4", ...
  kFp8Flag,       // kohya's --fp8_base / --fp8_scaled: true is "fp8"
  kTrainingWord,  // "FINE_TUNE", "full", "lycoris", "networks.lora" -> "full", "lokr", "lora"
  kNetworkArgs,   // kohya's network_args ["algo=lokr", ...] -> "lokr"; "" without an algo
  kSize,          // "960,544", [960, 544], 1024 -> [width, height]
  kMaxInt,        // 45, [1, 25, 45] -> the largest (musubi's target_frames)
  kSideOrArea,    // SimpleTuner's resolution: pixels, or megapixels below 64 (1.0 -> 1024)
  kNumber,        // a fraction (OneTrainer's layer_offload_fraction)
  kWeightDtype,   // OneTrainer's weight_dtype: "BFLOAT_16" -> "bf16"; quantized ones -> ""
  kCpuOffloaded,  // OneTrainer's gradient_checkpointing: "CPU_OFFLOADED" is true
  kEmaMode,       // OneTrainer's ema: "GPU" is true, "OFF"/"CPU" false
  kImageFrames,   // a dataset of images (musubi's image_directory, SimpleTuner's dataset_type
                  // "image"): 1 frame; "video": 0, its frames are read elsewhere
};

struct DialectRow {
  Trainer trainer;
  std::string_view neutral;  // "train.batch_size", "datasets[].resolution"
  std::string_view native;   // "train_batch_size"
  Codec codec;
  std::string_view default_json;  // the trainer's default when a full config leaves it out, or ""
  bool in_dataset_file = false;   // kohya/musubi: read from --dataset_config first
};

// The rows of one trainer, in table order.
std::vector<const DialectRow*> dialect_of(Trainer trainer);

// The row that writes `neutral` ("datasets[2].resolution" matches "datasets[].resolution").
const DialectRow* row_for(Trainer trainer, std::string_view neutral);

// Native value -> neutral value (nullopt when the native value has the wrong type or is not one
// the codec knows).
std::optional<nlohmann::json> decode(Codec codec, const nlohmann::json& native);

// Neutral value -> native value, shaped like `current` where the codec allows (a OneTrainer
// "ON" stays a string, a kohya "1024,1024" stays a string).
nlohmann::json encode(Codec codec, const nlohmann::json& neutral, const nlohmann::json& current);

// True when the trainer reads arguments from its command line (args targets take `--key`).
bool writes_flags(Trainer trainer);

}  // namespace oomtriage::parsers
