// parsers/trainer_dialect.cc: the table, and the value codecs both ways. Sources of the native
// names and defaults: docs/self-healing-and-fleet.md and each trainer's argument parser
// (kohya sd-scripts library/train_util.py, diffusers examples/*/train_*.py, SimpleTuner
// helpers/configuration/cmd_args.py, OneTrainer modules/util/config/TrainConfig.py,
// transformers training_args.py).
#include "parsers/trainer_dialect.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "parsers/trainer_table.h"
#include "parsers/trainer_words.h"

namespace oomtriage::parsers {
namespace {

using nlohmann::json;
using T = Trainer;
using C = Codec;

// Rows of one trainer stay together; within a trainer the first row for a neutral key writes it.
const std::vector<DialectRow>& rows() {
  static const std::vector<DialectRow> kRows = {
      // kohya sd-scripts and musubi-tuner: argparse names, the same in --config_file TOML.
      {T::kSdScripts, "train.gradient_checkpointing", "gradient_checkpointing", C::kBool, "false"},
      {T::kSdScripts, "datasets[].batch_size", "batch_size", C::kInt, "", true},
      {T::kSdScripts, "train.batch_size", "train_batch_size", C::kInt, "1"},
      {T::kSdScripts, "train.gradient_accumulation", "gradient_accumulation_steps", C::kInt, "1"},
      {T::kSdScripts, "datasets[].resolution", "resolution", C::kResolution, "", true},
      {T::kSdScripts, "train.dtype", "mixed_precision", C::kDtype, "\"no\""},
      {T::kSdScripts, "train.optimizer", "optimizer_type", C::kOptimizer, "\"AdamW\""},
      {T::kSdScripts, "train.disable_sampling", "sample_prompts", C::kPresentIsFalse, ""},
      {T::kSdScripts, "sample.sample_every", "sample_every_n_steps", C::kInt, ""},
      {T::kSdScripts, "datasets[].num_workers", "max_data_loader_n_workers", C::kInt, "8"},
      {T::kSdScripts, "datasets[].cache_latents_to_disk", "cache_latents_to_disk", C::kBool,
       "false"},
      {T::kSdScripts, "train.cache_text_embeddings", "cache_text_encoder_outputs", C::kBool,
       "false"},
      {T::kSdScripts, "model.quantize", "fp8_base", C::kBool, "false"},
      {T::kSdScripts, "network.linear", "network_dim", C::kInt, ""},
      // Issue 44: what trains, where the weights live, the dataset's sizes and frames; the
      // sources of these rows and the ones below are in docs/trainer-readers.md.
      {T::kSdScripts, "network.type", "network_module", C::kTrainingWord, ""},
      {T::kSdScripts, "network.type", "network_args", C::kNetworkArgs, ""},
      {T::kSdScripts, "model.qtype", "fp8_base", C::kFp8Flag, ""},
      {T::kSdScripts, "model.qtype", "fp8_scaled", C::kFp8Flag, ""},
      {T::kSdScripts, "model.task", "task", C::kText, ""},
      {T::kSdScripts, "train.block_swap", "blocks_to_swap", C::kInt, ""},
      {T::kSdScripts, "train.fused_backward_pass", "fused_backward_pass", C::kBool, "false"},
      {T::kSdScripts, "train.full_bf16", "full_bf16", C::kBool, ""},
      {T::kSdScripts, "train.full_fp16", "full_fp16", C::kBool, ""},
      {T::kSdScripts, "train.cache_text_to_disk", "cache_text_encoder_outputs_to_disk", C::kBool,
       ""},
      {T::kSdScripts, "train.activation_offload", "cpu_offload_checkpointing", C::kBool, ""},
      {T::kSdScripts, "datasets[].size", "resolution", C::kSize, "", true},
      {T::kSdScripts, "datasets[].num_frames", "image_directory", C::kImageFrames, "", true},
      {T::kSdScripts, "datasets[].num_frames", "target_frames", C::kMaxInt, "", true},
      // diffusers' example scripts: command-line flags only.
      {T::kDiffusers, "train.gradient_checkpointing", "gradient_checkpointing", C::kBool, "false"},
      {T::kDiffusers, "train.batch_size", "train_batch_size", C::kInt, "4"},
      {T::kDiffusers, "train.gradient_accumulation", "gradient_accumulation_steps", C::kInt, "1"},
      {T::kDiffusers, "datasets[].resolution", "resolution", C::kResolution, "512"},
      // accelerate's default mixed precision is "no": the weights train in fp32.
      {T::kDiffusers, "train.dtype", "mixed_precision", C::kDtype, "\"no\""},
      {T::kDiffusers, "train.optimizer", "use_8bit_adam", C::kEightBitFlag, "false"},
      {T::kDiffusers, "train.disable_sampling", "validation_prompt", C::kPresentIsFalse, ""},
      {T::kDiffusers, "datasets[].num_workers", "dataloader_num_workers", C::kInt, "0"},
      {T::kDiffusers, "network.linear", "rank", C::kInt, ""},
      // Issue 44: prior preservation, EMA, text-encoder training (docs/trainer-readers.md).
      {T::kDiffusers, "train.optimizer", "optimizer", C::kOptimizer, ""},
      {T::kDiffusers, "train.prior_preservation", "with_prior_preservation", C::kBool, "false"},
      {T::kDiffusers, "train.ema", "use_ema", C::kBool, "false"},
      {T::kDiffusers, "train.text_encoder_trained", "train_text_encoder", C::kBool, "false"},
      {T::kDiffusers, "train.cache_text_embeddings", "pre_compute_text_embeddings", C::kBool,
       "false"},
      // SimpleTuner: config.json/config.toml hold its argparse names (config.json with "--").
      // SimpleTuner's default is on, and only a JSON false turns it off.
      {T::kSimpleTuner, "train.gradient_checkpointing", "gradient_checkpointing", C::kBool, "true"},
      {T::kSimpleTuner, "train.batch_size", "train_batch_size", C::kInt, "4"},
      {T::kSimpleTuner, "train.gradient_accumulation", "gradient_accumulation_steps", C::kInt, "1"},
      {T::kSimpleTuner, "datasets[].resolution", "resolution", C::kSideOrArea, "", true},
      {T::kSimpleTuner, "train.dtype", "mixed_precision", C::kDtype, "\"bf16\""},
      {T::kSimpleTuner, "train.optimizer", "optimizer", C::kOptimizer, ""},
      {T::kSimpleTuner, "sample.sample_every", "validation_steps", C::kInt, ""},
      {T::kSimpleTuner, "sample.width", "validation_resolution", C::kResolution, ""},
      {T::kSimpleTuner, "sample.sample_steps", "validation_num_inference_steps", C::kInt, ""},
      {T::kSimpleTuner, "train.disable_sampling", "validation_disable", C::kBool, "false"},
      {T::kSimpleTuner, "model.quantize", "base_model_precision", C::kQuantizeName,
       "\"no_change\""},
      {T::kSimpleTuner, "network.linear", "lora_rank", C::kInt, ""},
      // Issue 44: the data-backend JSON and the LyCORIS config are read beside the config
      // (docs/trainer-readers.md).
      {T::kSimpleTuner, "model.family", "model_family", C::kText, ""},
      {T::kSimpleTuner, "model.flavour", "model_flavour", C::kText, ""},
      {T::kSimpleTuner, "network.type", "model_type", C::kTrainingWord, "\"lora\""},
      {T::kSimpleTuner, "network.type", "lora_type", C::kTrainingWord, ""},
      {T::kSimpleTuner, "network.type", "algo", C::kTrainingWord, ""},
      {T::kSimpleTuner, "model.qtype", "base_model_precision", C::kQuantWord, "\"no_change\""},
      {T::kSimpleTuner, "train.block_swap", "musubi_blocks_to_swap", C::kInt, ""},
      {T::kSimpleTuner, "train.stream_offload", "ramtorch", C::kBool, ""},
      {T::kSimpleTuner, "train.stream_offload", "enable_group_offload", C::kBool, ""},
      {T::kSimpleTuner, "train.ema", "use_ema", C::kBool, "false"},
      {T::kSimpleTuner, "train.ema_device", "ema_device", C::kText, "\"cpu\""},
      {T::kSimpleTuner, "train.text_encoder_trained", "train_text_encoder", C::kBool, "false"},
      {T::kSimpleTuner, "datasets[].batch_size", "train_batch_size", C::kInt, "", true},
      {T::kSimpleTuner, "datasets[].num_frames", "dataset_type", C::kImageFrames, "", true},
      {T::kSimpleTuner, "datasets[].num_frames", "video.num_frames", C::kMaxInt, "", true},
      {T::kSimpleTuner, "datasets[].num_frames", "num_frames", C::kMaxInt, "", true},
      // OneTrainer: its JSON config (TrainConfig).
      // A bool up to config v4, "ON"/"OFF"/"CPU_OFFLOADED" in v5-v10, per model part since.
      {T::kOneTrainer, "train.gradient_checkpointing", "gradient_checkpointing", C::kBoolAsOnOff,
       "\"ON\""},
      {T::kOneTrainer, "train.gradient_checkpointing", "transformer.gradient_checkpointing",
       C::kBoolAsOnOff, ""},
      {T::kOneTrainer, "train.gradient_checkpointing", "unet.gradient_checkpointing",
       C::kBoolAsOnOff, ""},
      {T::kOneTrainer, "train.batch_size", "batch_size", C::kInt, "1"},
      {T::kOneTrainer, "train.gradient_accumulation", "gradient_accumulation_steps", C::kInt, "1"},
      {T::kOneTrainer, "datasets[].resolution", "resolution", C::kResolution, "\"512\""},
      {T::kOneTrainer, "train.dtype", "train_dtype", C::kDtype, "\"FLOAT_16\""},
      {T::kOneTrainer, "train.optimizer", "optimizer.optimizer", C::kOptimizer, ""},
      {T::kOneTrainer, "sample.sample_every", "sample_after", C::kInt, ""},
      {T::kOneTrainer, "train.disable_sampling", "sample_after_unit", C::kNoIsTrue, "\"MINUTE\""},
      {T::kOneTrainer, "datasets[].num_workers", "dataloader_threads", C::kInt, "2"},
      {T::kOneTrainer, "datasets[].cache_latents_to_disk", "latent_caching", C::kBool, "true"},
      {T::kOneTrainer, "network.linear", "lora_rank", C::kInt, ""},
      // Issue 44 (docs/trainer-readers.md).
      {T::kOneTrainer, "network.type", "training_method", C::kTrainingWord, "\"FINE_TUNE\""},
      {T::kOneTrainer, "model.family", "model_type", C::kText, "\"STABLE_DIFFUSION_15\""},
      {T::kOneTrainer, "model.qtype", "transformer.weight_dtype", C::kQuantWord, ""},
      {T::kOneTrainer, "model.qtype", "unet.weight_dtype", C::kQuantWord, ""},
      {T::kOneTrainer, "model.qtype", "prior.weight_dtype", C::kQuantWord, ""},
      {T::kOneTrainer, "train.weight_dtype", "transformer.weight_dtype", C::kWeightDtype, ""},
      {T::kOneTrainer, "train.weight_dtype", "unet.weight_dtype", C::kWeightDtype, ""},
      {T::kOneTrainer, "train.weight_dtype", "prior.weight_dtype", C::kWeightDtype, ""},
      {T::kOneTrainer, "model.te_qtype", "text_encoder.weight_dtype", C::kQuantWord, ""},
      {T::kOneTrainer, "train.layer_offload_fraction", "layer_offload_fraction", C::kNumber, "0"},
      {T::kOneTrainer, "train.layer_offload_fraction", "transformer.offload_fraction", C::kNumber,
       ""},
      {T::kOneTrainer, "train.layer_offload_fraction", "unet.offload_fraction", C::kNumber, ""},
      {T::kOneTrainer, "train.activation_offload", "gradient_checkpointing", C::kCpuOffloaded, ""},
      {T::kOneTrainer, "train.fused_backward_pass", "optimizer.fused_back_pass", C::kBool, ""},
      {T::kOneTrainer, "train.ema", "ema", C::kEmaMode, "\"OFF\""},
      // HF Trainer: TrainingArguments (training_args.json, or printed at start).
      {T::kTransformers, "train.gradient_checkpointing", "gradient_checkpointing", C::kBool,
       "false"},
      {T::kTransformers, "train.batch_size", "per_device_train_batch_size", C::kInt, "8"},
      {T::kTransformers, "train.gradient_accumulation", "gradient_accumulation_steps", C::kInt,
       "1"},
      {T::kTransformers, "train.dtype", "bf16", C::kBf16Flag, ""},
      {T::kTransformers, "train.optimizer", "optim", C::kOptimizer, "\"adamw_torch\""},
      {T::kTransformers, "sample.batch_size", "per_device_eval_batch_size", C::kInt, "8"},
      {T::kTransformers, "train.disable_sampling", "eval_strategy", C::kNoIsTrue, ""},
      {T::kTransformers, "train.disable_sampling", "evaluation_strategy", C::kNoIsTrue, ""},
      {T::kTransformers, "datasets[].num_workers", "dataloader_num_workers", C::kInt, "0"},
  };
  return kRows;
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// "datasets[3].resolution" -> "datasets[].resolution"
std::string strip_indices(std::string_view path) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    out.push_back(path[i]);
    if (path[i] == '[') {
      while (i + 1 < path.size() && path[i + 1] != ']') ++i;
    }
  }
  return out;
}

std::optional<int> as_int(const json& value) {
  if (value.is_number_integer()) {
    const int64_t n = value.get<int64_t>();
    if (n >= 0 && n < (1ll << 31)) return static_cast<int>(n);
    return std::nullopt;
  }
  if (value.is_number_float()) {
    const double d = value.get<double>();
    if (d >= 0 && d < 2e9 && d == static_cast<double>(static_cast<int64_t>(d))) {
      return static_cast<int>(d);
    }
    return std::nullopt;
  }
  if (value.is_string()) {
    const std::string s = value.get<std::string>();
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    return std::stoi(s);
  }
  return std::nullopt;
}

std::optional<bool> as_bool(const json& value) {
  if (value.is_boolean()) return value.get<bool>();
  if (value.is_string()) {
    const std::string s = lower(value.get<std::string>());
    if (s == "true") return true;
    if (s == "false") return false;
  }
  return std::nullopt;
}

// [width, height] from "960,544", "1024x768", [960, 544] or 1024.
std::optional<json> size_of(const json& native) {
  std::vector<int> sides;
  if (native.is_array()) {
    for (const json& item : native) {
      if (const auto n = as_int(item)) sides.push_back(*n);
    }
  } else if (native.is_string()) {
    const std::string s = native.get<std::string>();
    size_t start = 0;
    while (start <= s.size()) {
      const size_t end = std::min(s.find_first_of(",x* ", start), s.size());
      if (const auto n = as_int(json(s.substr(start, end - start)))) sides.push_back(*n);
      start = end + 1;
    }
  } else if (const auto n = as_int(native)) {
    sides = {*n, *n};
  }
  if (sides.size() == 1) sides.push_back(sides[0]);
  if (sides.size() != 2 || sides[0] < 64 || sides[1] < 64) return std::nullopt;
  return json::array({sides[0], sides[1]});
}

// The issue-44 codecs: words and sizes read through parsers/trainer_words.h.
std::optional<json> decode_words(Codec codec, const json& native) {
  const std::string word = native.is_string() ? native.get<std::string>() : "";
  switch (codec) {
    case Codec::kText:
      if (native.is_string()) return word;
      return std::nullopt;
    case Codec::kQuantWord:
      if (!native.is_string()) return std::nullopt;
      if (const auto q = quantization_word(word)) return *q;
      return std::nullopt;
    case Codec::kFp8Flag:
      if (const auto b = as_bool(native)) return *b ? "fp8" : "none";
      return std::nullopt;
    case Codec::kTrainingWord:
      if (!native.is_string()) return std::nullopt;
      if (const auto t = training_word(word)) return *t;
      return std::nullopt;
    case Codec::kNetworkArgs: {
      std::vector<std::string> args;
      if (native.is_array()) {
        for (const json& item : native) {
          if (item.is_string()) args.push_back(item.get<std::string>());
        }
      } else if (native.is_string()) {
        args.push_back(word);
      }
      for (const std::string& arg : args) {
        const size_t equals = arg.find('=');
        if (equals == std::string::npos || lower(arg.substr(0, equals)) != "algo") continue;
        if (const auto t = training_word(arg.substr(equals + 1))) return *t;
      }
      return "";
    }
    case Codec::kSize: return size_of(native);
    case Codec::kMaxInt: {
      int best = 0;
      if (native.is_array()) {
        for (const json& item : native) best = std::max(best, as_int(item).value_or(0));
      } else if (const auto n = as_int(native)) {
        best = *n;
      }
      if (best <= 0) return std::nullopt;
      return best;
    }
    case Codec::kSideOrArea:
      if (native.is_number() && native.get<double>() > 0 && native.get<double>() < 64) {
        // Megapixels: 1.0 is SimpleTuner's 1024x1024.
        return static_cast<int>(std::sqrt(native.get<double>()) * 1024 / 64 + 0.5) * 64;
      }
      return decode(Codec::kResolution, native);
    case Codec::kNumber:
      if (native.is_number()) return native.get<double>();
      return std::nullopt;
    case Codec::kWeightDtype: {
      const std::string w = lower(word);
      if (w == "bfloat_16") return "bf16";
      if (w == "float_16") return "fp16";
      if (w == "float_32" || w == "tfloat_32") return "fp32";
      if (native.is_string()) return "";
      return std::nullopt;
    }
    case Codec::kCpuOffloaded:
      if (native.is_boolean()) return false;
      if (native.is_string()) return lower(word) == "cpu_offloaded";
      return std::nullopt;
    case Codec::kEmaMode:
      if (native.is_string()) return lower(word) == "gpu";
      return std::nullopt;
    case Codec::kImageFrames:
      if (native.is_string()) return lower(word) == "video" ? 0 : 1;
      return std::nullopt;
    default: return std::nullopt;
  }
}

}  // namespace

std::vector<const DialectRow*> dialect_of(Trainer trainer) {
  std::vector<const DialectRow*> out;
  for (const DialectRow& row : rows()) {
    if (row.trainer == trainer) out.push_back(&row);
  }
  return out;
}

const DialectRow* row_for(Trainer trainer, std::string_view neutral) {
  const std::string key = strip_indices(neutral);
  for (const DialectRow& row : rows()) {
    if (row.trainer == trainer && row.neutral == key) return &row;
  }
  return nullptr;
}

bool writes_flags(Trainer trainer) { return trainer_row(trainer).writes_flags; }

std::optional<json> decode(Codec codec, const json& native) {
  switch (codec) {
    case Codec::kInt:
      if (const auto n = as_int(native)) return *n;
      return std::nullopt;
    case Codec::kBool:
      if (const auto b = as_bool(native)) return *b;
      return std::nullopt;
    case Codec::kResolution: {
      int best = 0;
      const auto take = [&](const json& item) {
        if (const auto n = as_int(item)) best = std::max(best, *n);
      };
      if (native.is_array()) {
        for (const json& item : native) take(item);
      } else if (native.is_string()) {
        std::string s = native.get<std::string>();
        size_t start = 0;
        while (start <= s.size()) {
          const size_t end = std::min(s.find_first_of(",x ", start), s.size());
          take(json(s.substr(start, end - start)));
          start = end + 1;
        }
      } else {
        take(native);
      }
      // An area (SimpleTuner's 1.0 megapixels) is not a side length.
      if (best < 64) return std::nullopt;
      return best;
    }
    case Codec::kDtype: {
      if (!native.is_string()) return std::nullopt;
      const std::string s = lower(native.get<std::string>());
      if (s == "no" || s == "fp32" || s == "float32" || s == "float_32" || s == "float") {
        return "fp32";
      }
      if (s == "bf16" || s == "bfloat16" || s == "bfloat_16") return "bf16";
      if (s == "fp16" || s == "float16" || s == "float_16" || s == "half") return "fp16";
      return std::nullopt;
    }
    case Codec::kOptimizer: {
      if (!native.is_string()) return std::nullopt;
      const std::string s = lower(native.get<std::string>());
      if (s.find("8bit") != std::string::npos || s.find("8_bit") != std::string::npos) {
        return "adamw8bit";
      }
      if (s == "adamw" || s == "adamw_torch" || s == "adamw_torch_fused" || s == "adamw_hf" ||
          s == "adam" || s == "adamw_bf16" || s == "optimi-adamw") {
        return "adamw";
      }
      return s;
    }
    case Codec::kEightBitFlag:
      if (const auto b = as_bool(native)) return *b ? "adamw8bit" : "adamw";
      return std::nullopt;
    case Codec::kBf16Flag:
      if (const auto b = as_bool(native); b && *b) return "bf16";
      return std::nullopt;
    case Codec::kBoolAsOnOff:
      if (const auto b = as_bool(native)) return *b;
      if (native.is_string()) {
        const std::string s = lower(native.get<std::string>());
        if (s == "on" || s == "cpu_offloaded") return true;
        if (s == "off") return false;
      }
      return std::nullopt;
    case Codec::kQuantizeName:
      if (!native.is_string()) return std::nullopt;
      return lower(native.get<std::string>()) != "no_change";
    case Codec::kPresentIsFalse:
      return native.is_null() || (native.is_string() && native.get<std::string>().empty());
    case Codec::kNoIsTrue:
      if (!native.is_string()) return std::nullopt;
      return lower(native.get<std::string>()) == "no" ||
             lower(native.get<std::string>()) == "never";
    default: return decode_words(codec, native);
  }
  return std::nullopt;
}

json encode(Codec codec, const json& neutral, const json& current) {
  switch (codec) {
    case Codec::kInt:
    case Codec::kBool:
      // Keep a quoted number quoted (OneTrainer and SimpleTuner write some numbers as strings).
      if (current.is_string() && !neutral.is_string()) return neutral.dump();
      return neutral;
    case Codec::kResolution:
      if (current.is_string() && neutral.is_number_integer()) {
        // "1024,1024" (kohya), "1024x1024" (SimpleTuner, OneTrainer) or "1024": same shape.
        const std::string side = std::to_string(neutral.get<int>());
        const std::string now = current.get<std::string>();
        const size_t separator = now.find_first_of(",x");
        return separator == std::string::npos ? side : side + now[separator] + side;
      }
      if (current.is_array() && current.size() == 2 && neutral.is_number_integer()) {
        // [width, height]: scale both sides to keep the aspect ratio, multiples of 64.
        const auto w = as_int(current[0]), h = as_int(current[1]);
        const int side = neutral.get<int>();
        if (w && h && *w > 0 && *h > 0) {
          const double scale = double(side) / std::max(*w, *h);
          const auto round64 = [](double v) { return std::max(64, int(v / 64.0 + 0.5) * 64); };
          return json::array({round64(*w * scale), round64(*h * scale)});
        }
      }
      return neutral;
    case Codec::kDtype: {
      const std::string want = neutral.is_string() ? neutral.get<std::string>() : "";
      const std::string now = current.is_string() ? current.get<std::string>() : "";
      if (now.find('_') != std::string::npos || (!now.empty() && std::isupper(now[0]))) {
        return want == "bf16" ? "BFLOAT_16" : want == "fp16" ? "FLOAT_16" : "FLOAT_32";
      }
      return want == "fp32" ? json("no") : json(want);
    }
    case Codec::kOptimizer: {
      const std::string want = neutral.is_string() ? neutral.get<std::string>() : "";
      const std::string now = current.is_string() ? current.get<std::string>() : "";
      if (want != "adamw8bit") return neutral;
      if (!now.empty() &&
          std::none_of(now.begin(), now.end(), [](unsigned char c) { return std::islower(c); })) {
        return "ADAMW_8BIT";  // OneTrainer's enum names
      }
      if (now.rfind("adamw_", 0) == 0) return "adamw_bnb_8bit";  // HF's optim names
      if (now.find('-') != std::string::npos || now == "adamw_bf16") {
        return "bnb-adamw8bit";  // SimpleTuner's names
      }
      return "AdamW8bit";  // kohya's optimizer_type
    }
    case Codec::kEightBitFlag:
      return neutral.is_string() && neutral.get<std::string>() == "adamw8bit";
    case Codec::kBf16Flag: return neutral.is_string() && neutral.get<std::string>() == "bf16";
    case Codec::kBoolAsOnOff:
      if (current.is_string()) return neutral == json(true) ? "ON" : "OFF";
      return neutral;
    case Codec::kQuantizeName: return neutral == json(true) ? "int8-quanto" : "no_change";
    case Codec::kSideOrArea: return encode(Codec::kResolution, neutral, current);
    default: return neutral;  // the other issue-44 codecs are read, not written
    case Codec::kPresentIsFalse:
      // Turning sampling off removes the key; turning it on cannot invent prompts.
      return neutral == json(true) ? json(nullptr) : current;
    case Codec::kNoIsTrue:
      if (neutral != json(true)) return current;
      // OneTrainer's TimeUnit enum is upper case ("NEVER"); HF's IntervalStrategy is "no".
      return current.is_string() && !current.get<std::string>().empty() &&
                     std::isupper(static_cast<unsigned char>(current.get<std::string>()[0]))
                 ? json("NEVER")
                 : json("no");
  }
  return neutral;
}

}  // namespace oomtriage::parsers
