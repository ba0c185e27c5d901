// parsers/trainer_words.cc: the tables. Each row is one of a trainer's own names (a script, a
// model_type, a flavour, a task) and what it means; docs/trainer-readers.md names the files of
// each trainer the rows come from.
#include "parsers/trainer_words.h"

#include <algorithm>
#include <cctype>

namespace oomtriage::parsers {
namespace {

using T = Trainer;

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool has(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

struct ScriptRow {
  std::string_view name;  // the script's file name, without ".py"
  ScriptFacts facts;
};

// Exact script names first; a name no row has is tried by its shape below.
constexpr ScriptRow kScripts[] = {
    // kohya sd-scripts: *_train_network.py trains an adapter, *_train.py / train_db.py /
    // fine_tune.py the whole model, *control_net* a ControlNet.
    {"train_network", {T::kSdScripts, "lora", ""}},
    {"sdxl_train_network", {T::kSdScripts, "lora", "sdxl"}},
    {"flux_train_network", {T::kSdScripts, "lora", "flux1-dev", 1.5}},
    {"sd3_train_network", {T::kSdScripts, "lora", "sd35-medium"}},
    {"lumina_train_network", {T::kSdScripts, "lora", "lumina2"}},
    {"hunyuan_image_train_network", {T::kSdScripts, "lora", "hunyuan-image-2.1", 1.5}},
    {"fine_tune", {T::kSdScripts, "full", ""}},
    {"train_db", {T::kSdScripts, "full", ""}},
    {"sdxl_train", {T::kSdScripts, "full", "sdxl"}},
    {"flux_train", {T::kSdScripts, "full", "flux1-dev", 1.5}},
    {"sd3_train", {T::kSdScripts, "full", "sd35-medium"}},
    {"lumina_train", {T::kSdScripts, "full", "lumina2"}},
    {"train_control_net", {T::kSdScripts, "controlnet", ""}},
    {"sdxl_train_control_net", {T::kSdScripts, "controlnet", "sdxl"}},
    {"flux_train_control_net", {T::kSdScripts, "controlnet", "flux1-dev"}},
    {"train_textual_inversion", {T::kSdScripts, "embedding", ""}},
    {"sdxl_train_textual_inversion", {T::kSdScripts, "embedding", "sdxl"}},
    // musubi-tuner: the same conventions (its options are sd-scripts' dialect).
    {"wan_train_network", {T::kSdScripts, "lora", "", 1.0, true, true}},  // the family is in --task
    {"hv_train_network", {T::kSdScripts, "lora", "hunyuan-video", 1.0, true, true}},
    {"hv_train", {T::kSdScripts, "full", "hunyuan-video", 1.0, true}},  // its own default "no"
    {"hv_1_5_train_network", {T::kSdScripts, "lora", "hunyuan-video-1.5", 1.0, true, true}},
    // FramePack is a HunyuanVideo-architecture model (13B).
    {"fpack_train_network", {T::kSdScripts, "lora", "hunyuan-video", 1.0, true, true}},
    {"qwen_image_train_network", {T::kSdScripts, "lora", "qwen-image", 1.0, true, true}},
    {"qwen_image_train", {T::kSdScripts, "full", "qwen-image", 1.0, true, true}},
    {"flux_kontext_train_network", {T::kSdScripts, "lora", "flux1-kontext", 1.0, true, true}},
    {"flux_2_train_network", {T::kSdScripts, "lora", "flux2-dev", 1.0, true, true}},
    {"zimage_train_network", {T::kSdScripts, "lora", "z-image", 1.0, true, true}},
    {"zimage_train", {T::kSdScripts, "full", "z-image", 1.0, true, true}},
    // diffusers' examples.
    {"train_dreambooth", {T::kDiffusers, "full", ""}},
    {"train_text_to_image", {T::kDiffusers, "full", ""}},
    {"train_text_to_image_sdxl", {T::kDiffusers, "full", "sdxl"}},
    {"train_dreambooth_flux", {T::kDiffusers, "full", "flux1-dev"}},
    {"train_dreambooth_sd3", {T::kDiffusers, "full", "sd35-medium"}},
    {"train_controlnet", {T::kDiffusers, "controlnet", ""}},
    {"train_controlnet_sdxl", {T::kDiffusers, "controlnet", "sdxl"}},
    {"train_controlnet_flux", {T::kDiffusers, "controlnet", "flux1-dev"}},
    {"train_controlnet_sd3", {T::kDiffusers, "controlnet", "sd35-medium"}},
};

// A diffusers example's model suffix ("_lora_sdxl", "_flux") -> a family.
constexpr std::pair<std::string_view, std::string_view> kDiffusersSuffixes[] = {
    {"sdxl", "sdxl"},         {"flux_kontext", "flux1-kontext"},
    {"flux", "flux1-dev"},    {"sd3", "sd35-medium"},
    {"sana", "sana"},         {"hidream", "hidream"},
    {"lumina2", "lumina2"},   {"qwen", "qwen-image"},
    {"wan", "wan21-t2v-14b"},
};

std::string_view file_stem(std::string_view path) {
  if (const size_t slash = path.find_last_of("/\\"); slash != std::string_view::npos) {
    path.remove_prefix(slash + 1);
  }
  if (path.size() > 3 && path.substr(path.size() - 3) == ".py") path.remove_suffix(3);
  return path;
}

}  // namespace

std::optional<ScriptFacts> script_facts(std::string_view script) {
  const std::string_view stem = file_stem(script);
  for (const ScriptRow& row : kScripts) {
    if (row.name != stem) continue;
    ScriptFacts facts = row.facts;
    facts.precision_from_launcher |= facts.trainer == T::kDiffusers;
    return facts;
  }
  // diffusers: train_dreambooth_lora_sdxl, train_text_to_image_lora, train_dreambooth_lora_flux
  // ...: the words say the kind, the suffix the family.
  if (stem.rfind("train_dreambooth", 0) == 0 || stem.rfind("train_text_to_image", 0) == 0 ||
      stem.rfind("train_controlnet", 0) == 0) {
    ScriptFacts facts{T::kDiffusers,
                      has(stem, "controlnet") ? "controlnet"
                      : has(stem, "lora")     ? "lora"
                                              : "full",
                      ""};
    facts.precision_from_launcher = true;
    for (const auto& [suffix, family] : kDiffusersSuffixes) {
      if (has(stem, suffix)) {
        facts.family = family;
        break;
      }
    }
    return facts;
  }
  return std::nullopt;
}

std::string script_in(const std::vector<std::string>& argv) {
  for (const std::string& word : argv) {
    if (word.size() > 3 && word.compare(word.size() - 3, 3, ".py") == 0 &&
        word.rfind("-", 0) != 0) {
      return word;
    }
  }
  return "";
}

std::string simpletuner_family(std::string_view family, std::string_view flavour) {
  const std::string f = lower(family), v = lower(flavour);
  if (f == "flux") {
    if (has(v, "kontext")) return "flux1-kontext";
    if (has(v, "schnell")) return "flux1-schnell";
    return "flux1-dev";  // dev, krea, fluxbooru, libreflux: FLUX.1's 12B transformer
  }
  if (f == "wan") {
    if (has(v, "1.3b")) return "wan21-t2v-1.3b";
    if (has(v, "5b")) return "wan22-ti2v-5b";
    if (has(v, "2.2")) return "wan22-14b";
    if (has(v, "i2v") || has(v, "flf2v")) return "wan21-i2v-14b";
    return "wan21-t2v-14b";
  }
  if (f == "qwen_image") return has(v, "edit") ? "qwen-image-edit" : "qwen-image";
  if (f == "sd3") return has(v, "large") ? "sd35-large" : "sd35-medium";
  if (f == "ltxvideo") return has(v, "13b") ? "ltx-video-13b" : "ltx-video";
  if (f == "sd1x") return "sd15";
  if (f == "sd2x") return "sd2";
  constexpr std::pair<std::string_view, std::string_view> kSame[] = {
      {"sdxl", "sdxl"},
      {"kolors", "kolors"},
      {"pixart_sigma", "pixart-sigma"},
      {"sana", "sana"},
      {"auraflow", "auraflow"},
      {"hidream", "hidream"},
      {"chroma", "chroma"},
      {"lumina2", "lumina2"},
      {"cosmos2image", "cosmos2-image"},
      {"hunyuanvideo", "hunyuan-video-1.5"},  // SimpleTuner trains HunyuanVideo 1.5
      {"ltxvideo2", "ltx2"},
      {"deepfloyd", "deepfloyd-if"},
      {"z_image", "z-image"},
      {"stable_cascade", "stable-cascade"},
  };
  for (const auto& [name, id] : kSame) {
    if (f == name) return std::string(id);
  }
  if (f == "flux2")
    return has(v, "klein") ? (has(v, "9b") ? "flux2-klein-9b" : "flux2-klein-4b") : "flux2-dev";
  return "";
}

std::string onetrainer_family(std::string_view model_type) {
  const std::string t = lower(model_type);
  constexpr std::pair<std::string_view, std::string_view> kTypes[] = {
      {"stable_diffusion_15", "sd15"},
      {"stable_diffusion_20", "sd2"},
      {"stable_diffusion_21", "sd2"},
      {"stable_diffusion_35", "sd35-large"},
      {"stable_diffusion_3", "sd35-medium"},
      {"stable_diffusion_xl", "sdxl"},
      {"wuerstchen", "stable-cascade"},
      {"stable_cascade", "stable-cascade"},
      {"pixart", "pixart-sigma"},
      {"flux_dev", "flux1-dev"},
      {"flux_fill_dev", "flux1-dev"},
      {"flux_2", "flux2-dev"},
      {"sana", "sana"},
      {"hunyuan_video", "hunyuan-video"},
      {"hi_dream", "hidream"},
      {"chroma", "chroma"},
      {"qwen", "qwen-image"},
      {"z_image", "z-image"},
  };
  for (const auto& [prefix, id] : kTypes) {
    if (t.rfind(prefix, 0) == 0) return std::string(id);
  }
  return "";
}

std::string musubi_task_family(std::string_view task) {
  const std::string t = lower(task);
  if (t.empty()) return "";
  if (has(t, "ti2v-5b")) return "wan22-ti2v-5b";
  if (has(t, "a14b")) return "wan22-14b";
  if (has(t, "1.3b")) return "wan21-t2v-1.3b";
  if (has(t, "i2v") || has(t, "flf2v")) return "wan21-i2v-14b";
  if (has(t, "t2v")) return "wan21-t2v-14b";
  return "";
}

std::optional<std::string> quantization_word(std::string_view native) {
  const std::string q = lower(native);
  if (q.empty() || q == "no_change" || q == "none" || q == "no" || q == "false" ||
      q == "float_32" || q == "float_16" || q == "bfloat_16" || q == "tfloat_32" || q == "bf16" ||
      q == "fp16" || q == "fp32") {
    return "none";
  }
  // SimpleTuner "int8-quanto", "fp8-torchao", "nf4-bnb"; OneTrainer's DataType names.
  const std::string bare = q.substr(0, q.find('-'));
  constexpr std::pair<std::string_view, std::string_view> kWords[] = {
      {"int2", "int2"},
      {"int4", "int4"},
      {"int8", "int8"},
      {"fp8", "fp8"},
      {"fp8uz", "fp8"},
      {"nf4", "nf4"},
      {"float_8", "fp8"},
      {"float_w8a8", "fp8"},
      {"int_w8a8", "int8"},
      {"int_8", "int8"},
      {"nfloat_4", "nf4"},
      {"float_w8a8_compressed", "fp8"},
      {"int_w8a8_compressed", "int8"},
      {"gguf", "q4"},
      {"gguf_a8_float", "q4"},
      {"gguf_a8_int", "q4"},
      {"true", "fp8"},
  };
  for (const auto& [word, spec] : kWords) {
    if (bare == word || q == word) return std::string(spec);
  }
  return std::nullopt;
}

std::optional<std::string> training_word(std::string_view native) {
  const std::string w = lower(native);
  if (w == "fine_tune" || w == "full" || w == "finetune") return "full";
  // OneTrainer's FINE_TUNE_VAE trains the VAE alone: the denoiser is frozen, as under an adapter.
  if (w == "fine_tune_vae") return "vae";
  if (w == "lora" || w == "standard" || w == "peft" || w == "lycoris.kohya" ||
      w == "networks.lora" || w == "networks.lora_flux" || w == "networks.lora_sd3" ||
      w == "networks.lora_wan" || w.rfind("networks.lora", 0) == 0) {
    return "lora";
  }
  if (w == "lokr" || w == "lycoris") return "lokr";
  if (w == "loha") return "loha";
  if (w == "locon" || w == "lierla") return "lora";
  if (w == "embedding" || w == "textual_inversion") return "embedding";
  if (w == "controlnet") return "controlnet";
  if (w.rfind("networks.", 0) == 0 || w.rfind("musubi_tuner.networks.", 0) == 0) return "lora";
  return std::nullopt;
}

void apply_script(JobConfig& config, const ScriptFacts& facts) {
  if (config.network_type.empty() && !facts.training_type.empty()) {
    config.network_type = std::string(facts.training_type);
    config.unknown.reset(static_cast<size_t>(Knob::kNetwork));
  }
  // sd-scripts and diffusers' full fine-tunes keep the trained weights in fp32 under mixed
  // precision (sd-scripts unless --full_bf16 / --full_fp16).
  if (config.network_type == "full" && config.weight_dtype.empty()) config.weight_dtype = "fp32";
  if (facts.text_encoder_cached) {
    config.cache_text_embeddings = true;
    config.unknown.reset(static_cast<size_t>(Knob::kTextEncoder));
  }
  if (config.blocks_to_swap > 0 && facts.blocks_per_swap_unit != 1.0) {
    config.blocks_to_swap =
        static_cast<int>(config.blocks_to_swap * facts.blocks_per_swap_unit + 0.5);
  }
  if (config.family_id.empty() && !facts.family.empty() && config.arch.empty()) {
    config.arch = std::string(facts.family);  // after the model's own name, before a guess
  }
}

}  // namespace oomtriage::parsers
