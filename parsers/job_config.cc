// parsers/job_config.cc: YAML/JSON to one JSON tree (with the line of every path, within the
// limits of parsers/bounded_document.h), then the typed view with AI Toolkit's defaults. A field of
// the wrong type is a problem that keeps its default out (the knob becomes unknown) and the rest of
// the config in; nothing throws.
#include "parsers/job_config.h"

#include <re2/re2.h>

#include <algorithm>
#include <set>

namespace oomtriage::parsers {
namespace {

using nlohmann::ordered_json;

RE2::Options quiet_options() {
  RE2::Options options;
  options.set_log_errors(false);
  return options;
}

// The knob an AI Toolkit path sets, so that a bad value makes exactly that knob unknown.
std::optional<Knob> knob_of_path(std::string_view path) {
  while (!path.empty() && path.back() == ']') path = path.substr(0, path.rfind('['));  // an item
  const auto has = [&](std::string_view part) { return path.find(part) != std::string_view::npos; };
  const auto ends = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.substr(path.size() - suffix.size()) == suffix;
  };
  if (ends(".gradient_checkpointing")) return Knob::kGradientCheckpointing;
  if (ends(".batch_size")) return Knob::kBatchSize;
  if (has(".gradient_accumulation")) return Knob::kGradientAccumulation;
  if (has(".sample.")) return has("sample_every") ? Knob::kSampling : Knob::kPreviewSize;
  if (ends(".disable_sampling") || ends(".skip_first_sample")) return Knob::kSampling;
  if (ends(".resolution")) return Knob::kResolution;
  if (ends(".num_frames")) return Knob::kNumFrames;
  if (ends(".num_workers")) return Knob::kNumWorkers;
  if (has("cache_latents")) return Knob::kLatentCache;
  if (ends(".dtype")) return Knob::kDtype;
  if (ends(".optimizer")) return Knob::kOptimizer;
  if (has("text_encoder") || has("text_embeddings") || ends("_te")) return Knob::kTextEncoder;
  if (ends(".quantize") || ends(".qtype")) return Knob::kQuantize;
  if (ends(".low_vram")) return Knob::kLowVram;
  if (has("offloading") || ends(".auto_memory")) return Knob::kOffloading;
  if (has(".network.")) return Knob::kNetwork;
  return std::nullopt;
}

// Reads typed values out of one JSON object; a wrong type is one problem line and the value
// keeps its default.
class Reader {
 public:
  Reader(const std::map<std::string, int>& lines, std::string_view source,
         std::vector<std::string>& problems, std::set<std::string>& failed_paths)
      : lines_(lines), source_(source), problems_(problems), failed_paths_(failed_paths) {}

  template <class T>
  void read(const ordered_json& object, const std::string& path, const char* key, T& out) {
    if (!object.is_object() || !object.contains(key) || object[key].is_null()) return;
    const ordered_json& value = object[key];
    const std::string full = path + "." + key;
    if constexpr (std::is_same_v<T, bool>) {
      if (value.is_boolean()) {
        out = value.get<bool>();
        return;
      }
      fail(full, "must be true or false", value);
    } else if constexpr (std::is_same_v<T, int>) {
      if (value.is_number_integer() && value.get<int64_t>() >= 0 &&
          value.get<int64_t>() < (1ll << 31)) {
        out = static_cast<int>(value.get<int64_t>());
        return;
      }
      // In range before the cast: a float past int's range converted is undefined.
      if (value.is_number_float() && value.get<double>() >= 0 &&
          value.get<double>() < 2147483648.0 &&
          value.get<double>() == static_cast<int>(value.get<double>())) {
        out = static_cast<int>(value.get<double>());
        return;
      }
      fail(full, "must be a non-negative integer", value);
    } else if constexpr (std::is_same_v<T, double>) {
      if (value.is_number()) {
        out = value.get<double>();
        return;
      }
      fail(full, "must be a number", value);
    } else {
      if (value.is_string()) {
        out = value.get<std::string>();
        return;
      }
      if (value.is_number() || value.is_boolean()) {
        out = value.dump();
        return;
      }
      fail(full, "must be a string", value);
    }
  }

  // A number no job has (a resolution of 0): a problem like any bad field, and listed apart in
  // `implausible`, which `check` refuses where the daemon goes on without the value.
  void implausible(const std::string& path, const std::string& reason, const ordered_json& value) {
    const size_t before = problems_.size();
    fail(path, reason, value);
    if (implausible_ != nullptr && problems_.size() > before) {
      std::string line = problems_.back();
      line.resize(line.rfind("; the rest of the config is used"));
      implausible_->push_back(std::move(line));
    }
  }
  void set_implausible(std::vector<std::string>* to) { implausible_ = to; }

  void fail(const std::string& path, const std::string& reason, const ordered_json& value) {
    if (!failed_paths_.insert(path).second) return;
    auto it = lines_.find(path);
    std::string problem = it != lines_.end()
                              ? std::string(source_) + ":" + std::to_string(it->second) + ": "
                              : std::string(source_) + ": ";
    // The value may hold any bytes: invalid UTF-8 is replaced, never thrown on.
    problem += display_path(path) + " " + reason + ", got " +
               value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
               "; the rest of the config is used";
    problems_.push_back(std::move(problem));
  }

  static std::string display_path(const std::string& path) {
    const std::string prefix = "config.process[0].";
    return path.rfind(prefix, 0) == 0 ? path.substr(prefix.size()) : path;
  }

 private:
  const std::map<std::string, int>& lines_;
  std::string_view source_;
  std::vector<std::string>& problems_;
  std::set<std::string>& failed_paths_;
  std::vector<std::string>* implausible_ = nullptr;
};

ModelFamily family_from_arch(std::string arch, const std::string& name_or_path) {
  if (const size_t colon = arch.find(':'); colon != std::string::npos) arch.resize(colon);
  const auto starts = [&](std::string_view prefix) { return arch.rfind(prefix, 0) == 0; };
  if (starts("zimage")) return ModelFamily::kZImage;
  if (arch == "qwen_image_edit_plus") return ModelFamily::kQwenImageEditPlus;
  if (arch == "qwen_image_edit") return ModelFamily::kQwenImageEdit;
  if (starts("qwen_image")) return ModelFamily::kQwenImage;
  if (arch == "flex1") return ModelFamily::kFlex1;
  if (arch == "flex2") return ModelFamily::kFlex2;
  if (starts("flux2")) return ModelFamily::kFlux2;
  if (arch == "flux" || arch == "flux_kontext") {
    return name_or_path.find("Flex.1") != std::string::npos ? ModelFamily::kFlex1
                                                            : ModelFamily::kFlux1;
  }
  if (starts("chroma") || arch == "zeta_chroma") return ModelFamily::kChroma;
  if (starts("wan21")) return ModelFamily::kWan21;
  if (starts("wan22")) return ModelFamily::kWan22;
  if (starts("ltx")) return ModelFamily::kLtx;
  if (arch == "sdxl") return ModelFamily::kSdxl;
  if (arch == "sd1" || arch == "sd15" || arch == "sd2") return ModelFamily::kSd1;
  return ModelFamily::kOther;
}

// Inline prompt flags AI Toolkit honours: "--w 768 --h 1024 --s 20 --frames 41".
void apply_inline_flags(const std::string& prompt, int& width, int& height, int& steps,
                        int& frames) {
  static const RE2 kFlag(R"(--(w|h|s|steps|frames|num_frames)\s+(\d+))", quiet_options());
  re2::StringPiece rest(prompt);
  std::string flag, value;
  while (RE2::FindAndConsume(&rest, kFlag, &flag, &value)) {
    const int n = value.size() < 7 ? std::stoi(value) : 0;
    if (n <= 0) continue;
    if (flag == "w") width = n;
    if (flag == "h") height = n;
    if (flag == "s" || flag == "steps") steps = n;
    if (flag == "frames" || flag == "num_frames") frames = n;
  }
}

void read_sample(const ordered_json& s, const std::string& path, Reader& r, SampleView& v) {
  r.read(s, path, "width", v.width);
  r.read(s, path, "height", v.height);
  r.read(s, path, "sample_steps", v.steps);
  r.read(s, path, "sample_every", v.every);
  r.read(s, path, "num_frames", v.num_frames);
  v.max_width = v.width;
  v.max_height = v.height;
  v.max_steps = v.steps;
  v.max_frames = v.num_frames;
  auto widen = [&](int w, int h, int st, int f) {
    v.max_width = std::max(v.max_width, w);
    v.max_height = std::max(v.max_height, h);
    v.max_steps = std::max(v.max_steps, st);
    v.max_frames = std::max(v.max_frames, f);
  };
  if (s.contains("samples") && s["samples"].is_array()) {
    v.uses_samples_list = true;
    v.count = static_cast<int>(s["samples"].size());
    for (size_t i = 0; i < s["samples"].size(); ++i) {
      const ordered_json& item = s["samples"][i];
      const std::string item_path = path + ".samples[" + std::to_string(i) + "]";
      int w = v.width, h = v.height, st = v.steps, f = v.num_frames;
      std::string prompt;
      r.read(item, item_path, "width", w);
      r.read(item, item_path, "height", h);
      r.read(item, item_path, "sample_steps", st);
      r.read(item, item_path, "num_frames", f);
      r.read(item, item_path, "prompt", prompt);
      apply_inline_flags(prompt, w, h, st, f);
      widen(w, h, st, f);
      if (item.is_object()) {
        for (const auto& [key, value] : item.items()) {
          if (key.rfind("ctrl_img", 0) == 0 && !value.is_null()) v.has_control_images = true;
        }
      }
    }
  } else if (s.contains("prompts") && s["prompts"].is_array()) {
    v.count = static_cast<int>(s["prompts"].size());
    for (const auto& prompt : s["prompts"]) {
      int w = v.width, h = v.height, st = v.steps, f = v.num_frames;
      if (prompt.is_string()) apply_inline_flags(prompt.get<std::string>(), w, h, st, f);
      widen(w, h, st, f);
    }
  }
}

// An image side in pixels: 1 to 65536 (a bucket of 0, or of 2^32 read as an int, is no size).
constexpr int64_t kMaxSide = 65536;
constexpr const char* kSideRange = "is not an image size (1 to 65536 pixels)";
bool plausible_side(const ordered_json& value) {
  return value.is_number_integer() && value.get<int64_t>() > 0 && value.get<int64_t>() <= kMaxSide;
}

void read_dataset(const ordered_json& d, const std::string& path, Reader& r, DatasetView& v) {
  if (d.contains("resolution")) {
    const ordered_json& res = d["resolution"];
    std::set<int> distinct;
    if (res.is_array()) {
      v.resolution_is_list = true;
      for (size_t i = 0; i < res.size(); ++i) {
        const std::string at = path + ".resolution[" + std::to_string(i) + "]";
        if (plausible_side(res[i])) {
          distinct.insert(static_cast<int>(res[i].get<int64_t>()));
        } else if (res[i].is_number()) {
          r.implausible(at, kSideRange, res[i]);
        } else {
          r.fail(at, "must be a positive integer", res[i]);
        }
      }
    } else if (plausible_side(res)) {
      distinct.insert(static_cast<int>(res.get<int64_t>()));
    } else if (res.is_number()) {
      r.implausible(path + ".resolution", kSideRange, res);
    } else if (!res.is_null()) {
      r.fail(path + ".resolution", "must be an integer or a list of integers", res);
    }
    v.resolutions.assign(distinct.begin(), distinct.end());
  } else {
    v.resolutions = {512};
  }
  int batch = 0;
  r.read(d, path, "batch_size", batch);
  if (batch > 0) v.batch_size = batch;
  r.read(d, path, "num_frames", v.num_frames);
  r.read(d, path, "cache_latents", v.cache_latents);
  r.read(d, path, "cache_latents_to_disk", v.cache_latents_to_disk);
  r.read(d, path, "num_workers", v.num_workers);
  for (const char* key : {"control_path", "control_path_1", "control_path_2", "control_path_3"}) {
    if (d.contains(key) && !d[key].is_null() && d[key] != "" && d[key] != ordered_json::array()) {
      v.has_control_images = true;
    }
  }
}

}  // namespace

ModelFamily family_from_name(const std::string& name_or_path) {
  static const std::pair<const char*, ModelFamily> kNames[] = {
      {"(?i)qwen-image-edit-25(?:09|11)", ModelFamily::kQwenImageEditPlus},
      {"(?i)qwen-image-edit", ModelFamily::kQwenImageEdit},
      {"(?i)qwen-image", ModelFamily::kQwenImage},
      {"(?i)z-image", ModelFamily::kZImage},
      {"(?i)flex\\.1", ModelFamily::kFlex1},
      {"(?i)flex\\.2", ModelFamily::kFlex2},
      {"(?i)flux\\.2", ModelFamily::kFlux2},
      {"(?i)flux", ModelFamily::kFlux1},
      {"(?i)chroma", ModelFamily::kChroma},
      {"(?i)wan2\\.?1", ModelFamily::kWan21},
      {"(?i)wan2\\.?2", ModelFamily::kWan22},
      {"(?i)ltx", ModelFamily::kLtx},
      {"(?i)xl", ModelFamily::kSdxl},
      {"(?i)stable-diffusion|sd-?1|v1-5", ModelFamily::kSd1},
  };
  for (const auto& [pattern, family] : kNames) {
    if (RE2::PartialMatch(name_or_path, RE2(pattern, quiet_options()))) return family;
  }
  return ModelFamily::kOther;
}

std::string_view to_string(Knob knob) {
  static constexpr std::string_view kNames[kKnobCount] = {"gradient_checkpointing",
                                                          "batch_size",
                                                          "gradient_accumulation",
                                                          "resolution",
                                                          "dtype",
                                                          "optimizer",
                                                          "sampling",
                                                          "preview_size",
                                                          "num_workers",
                                                          "quantize",
                                                          "low_vram",
                                                          "text_encoder",
                                                          "latent_cache",
                                                          "offloading",
                                                          "num_frames",
                                                          "network"};
  return kNames[static_cast<size_t>(knob)];
}

std::string_view to_string(TargetKind kind) {
  switch (kind) {
    case TargetKind::kYaml: return "yaml";
    case TargetKind::kJson: return "json";
    case TargetKind::kToml: return "toml";
    case TargetKind::kArgs: return "args";
    case TargetKind::kEnv: return "env";
    case TargetKind::kOps: return "ops";
  }
  return "ops";
}

std::string_view to_string(ModelFamily family) {
  switch (family) {
    case ModelFamily::kOther: return "other";
    case ModelFamily::kZImage: return "z-image";
    case ModelFamily::kQwenImage: return "qwen-image";
    case ModelFamily::kQwenImageEdit: return "qwen-image-edit";
    case ModelFamily::kQwenImageEditPlus: return "qwen-image-edit-plus";
    case ModelFamily::kFlux1: return "flux.1";
    case ModelFamily::kFlex1: return "flex.1";
    case ModelFamily::kFlex2: return "flex.2";
    case ModelFamily::kFlux2: return "flux.2";
    case ModelFamily::kChroma: return "chroma";
    case ModelFamily::kWan21: return "wan2.1";
    case ModelFamily::kWan22: return "wan2.2";
    case ModelFamily::kLtx: return "ltx";
    case ModelFamily::kSdxl: return "sdxl";
    case ModelFamily::kSd1: return "sd1";
  }
  return "other";
}

bool is_video_family(ModelFamily family) {
  return family == ModelFamily::kWan21 || family == ModelFamily::kWan22 ||
         family == ModelFamily::kLtx;
}

int JobConfig::max_resolution() const {
  int best = 0;
  for (const auto& d : datasets) {
    if (!d.resolutions.empty()) best = std::max(best, d.resolutions.back());
  }
  return best;
}

std::vector<int> JobConfig::all_resolutions() const {
  std::set<int> all;
  for (const auto& d : datasets) all.insert(d.resolutions.begin(), d.resolutions.end());
  return {all.begin(), all.end()};
}

int JobConfig::max_num_frames() const {
  int best = 1;
  for (const auto& d : datasets) best = std::max(best, d.num_frames);
  return best;
}

bool JobConfig::has_control_images() const {
  if (sample.has_control_images) return true;
  return std::any_of(datasets.begin(), datasets.end(),
                     [](const DatasetView& d) { return d.has_control_images; });
}

int JobConfig::effective_batch_size() const {
  int best = batch_size;
  for (const auto& d : datasets) {
    if (d.batch_size) best = std::max(best, *d.batch_size);
  }
  return best;
}

Result<JobConfig> parse_job_config(std::string_view text, ConfigFormat format,
                                   std::string_view source) {
  std::map<std::string, int> lines;
  ordered_json doc;
  if (format == ConfigFormat::kYaml) {
    OOMTRIAGE_ASSIGN_OR_RETURN(doc, yaml_to_json(text, source, &lines));
  } else {
    OOMTRIAGE_ASSIGN_OR_RETURN(doc, parse_ordered_json(text, source));
  }

  JobConfig config;
  config.format = format;
  ordered_json process;
  if (format == ConfigFormat::kPrintedProcess) {
    process = doc;
  } else {
    if (!doc.is_object() || !doc.contains("config") || !doc["config"].is_object()) {
      return make_error(ErrorCode::kBadInput,
                        std::string(source) + ": the config has no `config` section");
    }
    const ordered_json& section = doc["config"];
    if (section.contains("name") && section["name"].is_string()) {
      config.name = section["name"].get<std::string>();
    }
    if (!section.contains("process") || !section["process"].is_array() ||
        section["process"].empty() || !section["process"][0].is_object()) {
      const auto it = lines.find("config");
      return make_error(ErrorCode::kBadInput,
                        std::string(source) + ":" +
                            (it != lines.end() ? std::to_string(it->second) + ":" : "") +
                            " config.process is missing or empty");
    }
    process = section["process"][0];
  }
  if (!process.is_object()) {
    return make_error(ErrorCode::kBadInput,
                      std::string(source) + ": the process config is not an object");
  }

  std::set<std::string> failed_paths;
  Reader r(lines, source, config.problems, failed_paths);
  r.set_implausible(&config.implausible);
  const std::string p = config.process_path;
  config.targets.push_back({format == ConfigFormat::kJson ? TargetKind::kJson : TargetKind::kYaml,
                            std::string(source), ""});
  if (config.name.empty()) r.read(process, p, "name", config.name);

  const ordered_json empty = ordered_json::object();
  const ordered_json& train = process.contains("train") ? process["train"] : empty;
  const std::string tp = p + ".train";
  r.read(train, tp, "batch_size", config.batch_size);
  r.read(train, tp, "steps", config.steps);
  if (train.is_object() && train.contains("gradient_accumulation_steps") &&
      !train.contains("gradient_accumulation")) {
    config.gradient_accumulation_key = "gradient_accumulation_steps";
    r.read(train, tp, "gradient_accumulation_steps", config.gradient_accumulation);
  } else {
    r.read(train, tp, "gradient_accumulation", config.gradient_accumulation);
  }
  if (train.is_object() && train.contains("gradient_checkpointing") &&
      !train["gradient_checkpointing"].is_null()) {
    config.gradient_checkpointing_explicit = true;
    r.read(train, tp, "gradient_checkpointing", config.gradient_checkpointing);
  }
  r.read(train, tp, "dtype", config.dtype);
  r.read(train, tp, "optimizer", config.optimizer);
  r.read(train, tp, "disable_sampling", config.disable_sampling);
  r.read(train, tp, "skip_first_sample", config.skip_first_sample);
  r.read(train, tp, "cache_text_embeddings", config.cache_text_embeddings);
  r.read(train, tp, "unload_text_encoder", config.unload_text_encoder);
  r.read(train, tp, "train_text_encoder", config.train_text_encoder);

  // A process without a network trains the whole model in AI Toolkit (its full fine-tune
  // example, tests/testdata/trainer-examples/ai-toolkit/flex_full_finetune_48gb.yaml, has none).
  const ordered_json& network = process.contains("network") ? process["network"] : empty;
  if (network.is_object() && !network.empty()) {
    config.network_type = "lora";
    r.read(network, p + ".network", "type", config.network_type);
    r.read(network, p + ".network", "linear", config.lora_rank);
  } else if (!process.contains("network") || network.is_null() ||
             (network.is_object() && network.empty())) {
    config.network_type = "full";
  }

  const ordered_json& model = process.contains("model") ? process["model"] : empty;
  const std::string mp = p + ".model";
  r.read(model, mp, "name_or_path", config.name_or_path);
  r.read(model, mp, "arch", config.arch);
  r.read(model, mp, "quantize", config.quantize);
  r.read(model, mp, "qtype", config.qtype);
  config.quantize_te = config.quantize;  // quantize_te defaults to quantize
  r.read(model, mp, "quantize_te", config.quantize_te);
  r.read(model, mp, "qtype_te", config.qtype_te);
  r.read(model, mp, "low_vram", config.low_vram);
  r.read(model, mp, "auto_memory", config.layer_offloading);
  r.read(model, mp, "layer_offloading", config.layer_offloading);
  r.read(model, mp, "layer_offloading_transformer_percent",
         config.layer_offloading_transformer_percent);
  r.read(model, mp, "layer_offloading_text_encoder_percent",
         config.layer_offloading_text_encoder_percent);
  if (model.is_object() && model.contains("model_kwargs") && model["model_kwargs"].is_object()) {
    r.read(model["model_kwargs"], mp + ".model_kwargs", "match_target_res",
           config.match_target_res);
  }
  if (!config.arch.empty()) {
    config.family = family_from_arch(config.arch, config.name_or_path);
  } else {
    bool is_flux = false, is_xl = false;
    r.read(model, mp, "is_flux", is_flux);
    r.read(model, mp, "is_xl", is_xl);
    if (is_flux) {
      config.family = config.name_or_path.find("Flex.1") != std::string::npos ? ModelFamily::kFlex1
                                                                              : ModelFamily::kFlux1;
    } else if (is_xl) {
      config.family = ModelFamily::kSdxl;
    } else {
      config.family = family_from_name(config.name_or_path);
    }
  }

  if (process.contains("datasets") && process["datasets"].is_array()) {
    const ordered_json& datasets = process["datasets"];
    for (size_t i = 0; i < datasets.size(); ++i) {
      DatasetView view;
      read_dataset(datasets[i], p + ".datasets[" + std::to_string(i) + "]", r, view);
      config.datasets.push_back(std::move(view));
    }
  }
  if (process.contains("sample") && process["sample"].is_object()) {
    config.has_sample_section = true;
    read_sample(process["sample"], p + ".sample", r, config.sample);
  }
  for (const std::string& path : failed_paths) {
    if (const auto knob = knob_of_path(path)) {
      config.forget(*knob);
      config.unread.set(static_cast<size_t>(*knob));
    }
  }
  return config;
}

}  // namespace oomtriage::parsers
