// parsers/job_config.h
//
// The typed view of a job's config that the triage engine (triage/ranker.h) reads, whatever the
// trainer. This file reads AI Toolkit's configs (YAML config.yaml or a user file, JSON
// .job_config.json, or the process config AI Toolkit prints as JSON at the top of log.txt) with
// AI Toolkit's own defaults applied (docs/ai-toolkit.md §1.4: gradient_checkpointing defaults to
// true, dtype to fp32, a resolution list becomes one dataset per resolution, ...);
// parsers/native_config.h reads the other trainers' files and printed arguments into the same
// view. A knob that neither the files nor the trainer's own defaults show is marked unknown, and
// a bad field is a problem (file, line, reason) that leaves the rest of the config standing.
// Pure: text in, view out.
#pragma once

#include <nlohmann/json.hpp>

#include <bitset>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/bounded_document.h"
#include "parsers/event.h"
#include "parsers/result.h"

namespace oomtriage::parsers {

enum class ModelFamily {
  kOther,
  kZImage,
  kQwenImage,
  kQwenImageEdit,      // the original Qwen-Image-Edit
  kQwenImageEditPlus,  // Qwen-Image-Edit-2509 / -2511 (arch qwen_image_edit_plus)
  kFlux1,
  kFlex1,
  kFlex2,
  kFlux2,
  kChroma,
  kWan21,
  kWan22,
  kLtx,
  kSdxl,
  kSd1,
};

std::string_view to_string(ModelFamily family);
bool is_video_family(ModelFamily family);

enum class ConfigFormat { kYaml, kJson, kPrintedProcess };

// The levers a fix can pull, trainer-neutral. A knob is unknown when neither the job's files nor
// its trainer's documented defaults show its value.
enum class Knob {
  kGradientCheckpointing,
  kBatchSize,
  kGradientAccumulation,
  kResolution,
  kDtype,
  kOptimizer,
  kSampling,     // whether previews/validation/evaluation run, and how often
  kPreviewSize,  // preview width, height, steps, frames
  kNumWorkers,
  kQuantize,
  kLowVram,
  kTextEncoder,  // caching its outputs, unloading it
  kLatentCache,
  kOffloading,
  kNumFrames,
  kNetwork,  // what trains: a LoRA (and its rank), a LoKr, the whole model
};
inline constexpr size_t kKnobCount = 16;
std::string_view to_string(Knob knob);

// Where a fix is written: the job's config file in its own syntax, the command line the log
// printed, the process environment, or an operator's action.
enum class TargetKind { kYaml, kJson, kToml, kArgs, kEnv, kOps };
std::string_view to_string(TargetKind kind);

struct ConfigTarget {
  TargetKind kind = TargetKind::kYaml;
  std::string path;        // the file; for kArgs the log that printed the arguments
  std::string key_prefix;  // SimpleTuner's config.json writes its keys as "--name"
};

// Where a native key was read, so that an edit lands in the same file and table.
struct NativeSlot {
  size_t target = 0;     // index into JobConfig::targets
  std::string table;     // TOML table ("" at the root, "datasets[0]" for an array of tables)
  std::string key;       // the native key as written ("--train_batch_size" in SimpleTuner's JSON)
  nlohmann::json value;  // the native value as written
  int line = 0;
};

struct SampleView {
  int width = 512;
  int height = 512;
  int steps = 20;
  int every = 100;
  int count = 0;  // number of preview prompts
  int num_frames = 1;
  int max_width = 512;  // the largest preview, inline --w/--h and samples[] overrides included
  int max_height = 512;
  int max_steps = 20;
  int max_frames = 1;
  int batch_size = 1;              // evaluation batch (HF Trainer's per_device_eval_batch_size)
  bool uses_samples_list = false;  // `samples:` (objects) rather than `prompts:` (strings)
  bool has_control_images = false;
};

struct DatasetView {
  std::vector<int> resolutions;   // distinct values, ascending
  std::optional<int> batch_size;  // per-dataset override of train.batch_size
  int num_frames = 1;
  bool cache_latents = false;
  bool cache_latents_to_disk = false;
  bool has_control_images = false;
  bool resolution_is_list = false;
  int num_workers = 2;
  // Issue 44, readers: both sides when the dataset states them ([960, 544]); 0 when it states one.
  int width = 0;
  int height = 0;
};

struct JobConfig {
  ConfigFormat format = ConfigFormat::kYaml;
  Trainer trainer = Trainer::kAiToolkit;
  std::vector<ConfigTarget> targets;        // [0] is the main file
  std::map<std::string, NativeSlot> slots;  // other trainers: neutral path -> where it was read
  std::bitset<kKnobCount> unknown;          // knobs whose value the job does not show
  // Knobs the job sets to a value that could not be read (a wrong type, a number past any
  // range): also `unknown`, and a pre-flight verdict that depends on one is "unknown".
  std::bitset<kKnobCount> unread;
  // Of `problems`, the numbers no job has (a resolution of 0): `check` refuses the config.
  std::vector<std::string> implausible;
  std::vector<std::string> problems;  // "config.yaml:12: train.batch_size must be ..."
  std::string name;
  std::string process_path = "config.process[0]";  // prefix of every change path
  ModelFamily family = ModelFamily::kOther;
  std::string arch;  // as written, tag included ("zimage:turbo")
  std::string name_or_path;

  bool gradient_checkpointing = true;
  bool gradient_checkpointing_explicit = false;
  int batch_size = 1;
  int gradient_accumulation = 1;
  std::string gradient_accumulation_key = "gradient_accumulation";
  int steps = 1000;
  std::string dtype = "fp32";
  std::string optimizer = "adamw";
  bool disable_sampling = false;
  bool skip_first_sample = false;
  bool cache_text_embeddings = false;
  bool unload_text_encoder = false;
  bool train_text_encoder = false;
  std::string network_type;  // "lora", "lokr", ... or "full" (no adapter); "" when not shown
  int lora_rank = 0;         // 0 when not shown

  bool quantize = false;
  std::string qtype = "qfloat8";
  bool quantize_te = false;
  std::string qtype_te = "qfloat8";
  bool low_vram = false;
  bool layer_offloading = false;
  double layer_offloading_transformer_percent = 1.0;
  double layer_offloading_text_encoder_percent = 1.0;
  bool match_target_res = false;

  // Issue 44, readers that take what the trainer takes (parsers/trainer_words.h): what the
  // trainers' own words say of the model and of how it trains.
  std::string family_id;     // an architecture id the trainer's own words name exactly, or ""
  std::string family_words;  // those words as written: SimpleTuner "flux/dev", musubi "t2v-14B"
  int blocks_to_swap = 0;    // denoiser blocks kept on the CPU (kohya/musubi --blocks_to_swap)
  double layer_offload_fraction = 0;        // OneTrainer's layer_offload_fraction
  bool activation_offload = false;          // OneTrainer's gradient_checkpointing CPU_OFFLOADED
  std::optional<bool> fused_backward_pass;  // gradients applied as the backward pass makes them
  std::optional<bool> ema;                  // a second copy of the trained weights
  bool prior_preservation = false;          // class images ride along: the batch doubles
  std::string weight_dtype;  // the dtype the trained weights are kept in ("fp32", "bf16"), or ""

  std::vector<DatasetView> datasets;
  SampleView sample;
  bool has_sample_section = false;

  // Largest training resolution across datasets (0 when no dataset lists one).
  int max_resolution() const;
  // Distinct resolutions across all datasets, ascending.
  std::vector<int> all_resolutions() const;
  int max_num_frames() const;
  bool has_control_images() const;
  // The largest per-dataset batch, or train.batch_size.
  int effective_batch_size() const;

  bool knows(Knob knob) const { return !unknown.test(static_cast<size_t>(knob)); }
  void forget(Knob knob) { unknown.set(static_cast<size_t>(knob)); }
};

// The family a model name or path suggests ("black-forest-labs/FLUX.1-dev" -> kFlux1).
ModelFamily family_from_name(const std::string& name_or_path);

// The config whenever the document itself parsed: bad fields are listed in its `problems` and
// their knobs marked unknown. A kBadInput error ("config.yaml:3: mapping values are not allowed
// here") when nothing could be read; `source` names the file in it. The document is read within
// the limits of parsers/bounded_document.h ("config.yaml: refused: larger than 4 MiB").
Result<JobConfig> parse_job_config(std::string_view text, ConfigFormat format,
                                   std::string_view source);

}  // namespace oomtriage::parsers
