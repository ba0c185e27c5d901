// parsers/job_config.h
//
// Reads an AI Toolkit job config (YAML config.yaml or a user file, JSON .job_config.json, or the
// process config AI Toolkit prints as JSON at the top of log.txt) into a typed view with AI
// Toolkit's own defaults applied (docs/ai-toolkit.md §1.4: gradient_checkpointing defaults to
// true, dtype to fp32, a resolution list becomes one dataset per resolution, ...). The triage
// engine (triage/ranker.h) reads only this view. Pure: text in, view or a one-line error out.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

struct SampleView {
  int width = 512;
  int height = 512;
  int steps = 20;
  int every = 100;
  int count = 0;       // number of preview prompts
  int num_frames = 1;
  int max_width = 512;   // the largest preview, inline --w/--h and samples[] overrides included
  int max_height = 512;
  int max_steps = 20;
  int max_frames = 1;
  bool uses_samples_list = false;  // `samples:` (objects) rather than `prompts:` (strings)
  bool has_control_images = false;
};

struct DatasetView {
  std::vector<int> resolutions;  // distinct values, ascending
  std::optional<int> batch_size;  // per-dataset override of train.batch_size
  int num_frames = 1;
  bool cache_latents = false;
  bool cache_latents_to_disk = false;
  bool has_control_images = false;
  bool resolution_is_list = false;
  int num_workers = 2;
};

struct JobConfig {
  ConfigFormat format = ConfigFormat::kYaml;
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

  bool quantize = false;
  std::string qtype = "qfloat8";
  bool quantize_te = false;
  std::string qtype_te = "qfloat8";
  bool low_vram = false;
  bool layer_offloading = false;
  double layer_offloading_transformer_percent = 1.0;
  double layer_offloading_text_encoder_percent = 1.0;
  bool match_target_res = false;

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
};

struct ConfigLoad {
  std::optional<JobConfig> config;
  std::string error;  // "config.yaml:12: train.batch_size must be an integer, got \"two\""
};

// `source` names the file in error messages.
ConfigLoad parse_job_config(std::string_view text, ConfigFormat format, std::string_view source);

// Refuses documents nested deeper than any config needs, before a recursive parser sees them:
// true when `text` is fine, else false with the line in `error`.
bool yaml_nesting_ok(std::string_view text, std::string* error);

// Converts a YAML document to JSON, remembering the line of every path ("config.process[0]...").
// Throws nothing; returns the error in `error`.
std::optional<nlohmann::ordered_json> yaml_to_json(std::string_view text,
                                                   std::map<std::string, int>* lines,
                                                   std::string* error);

}  // namespace oomtriage::parsers
