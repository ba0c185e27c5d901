// triage/planner_weights.cc: the fixes for the model's weights and what stays on the GPU beside
// them: the low-VRAM path, quantizing the transformer or the text encoder, cached text
// embeddings, layers offloaded to the CPU, latents cached to disk, bf16 instead of fp32 and an
// 8-bit optimizer.
#include "triage/planner.h"

#include <algorithm>

#include "triage/config_edits.h"

namespace oomtriage::triage::detail {
namespace {

bool is_fp32(const std::string& dtype) {
  return dtype == "fp32" || dtype == "float32" || dtype == "float";
}

bool big_text_encoder(ModelFamily f) {
  return f != ModelFamily::kSd1 && f != ModelFamily::kSdxl && f != ModelFamily::kOther;
}

}  // namespace

void Planner::plan_low_vram(int priority, const char* why) {
  if (!knows(Knob::kLowVram) || c_.low_vram) return;
  Fix fix = make("enable_low_vram", "Use the model's low-VRAM path", why,
                 "Slower loading and quantizing (done on the CPU); needs more host RAM", 0.6);
  change(fix, "model.low_vram", js(false), js(true));
  add(priority, std::move(fix), unmodelled());
}

void Planner::plan_quantize(int priority) {
  if (!knows(Knob::kQuantize)) return;
  const double bpp = bytes_per_weight(c_.dtype, c_.qtype);
  std::string to_qtype;
  if (!c_.quantize) {
    to_qtype = c_.qtype.empty() ? "qfloat8" : c_.qtype;
  } else if (bpp > bytes_per_weight(c_.dtype, "uint4")) {
    to_qtype = "uint4";
  } else {
    return;  // already at 4 bits or below
  }
  Fix fix = make(
      "quantize_model",
      !ai_toolkit() ? fmt::format("Load the base model quantized ({})",
                                  setting("model.quantize", "model.quantize"))
      : c_.quantize
          ? fmt::format("Quantize the transformer to {} instead of {}", to_qtype, c_.qtype)
          : fmt::format("Quantize the transformer ({})", to_qtype),
      fmt::format(
          "The {} weights are a large share of the GPU memory{}", parsers::to_string(c_.family),
          cal_ && cal_->weights_bytes ? fmt::format(" (about {} of the {} needed)",
                                                    gib(cal_->weights_bytes), gib(cal_->need_bytes))
                                      : ""),
      c_.quantize ? "Some quality loss at 4 bits; AI Toolkit's accuracy-recovery "
                    "adapters (qtype \"uint4|<adapter>\") limit it"
                  : "Slightly lower quality; quantizing takes a few minutes at start",
      0.65);
  if (!c_.quantize) change(fix, "model.quantize", js(false), js(true));
  if (c_.quantize || to_qtype != "qfloat8") change(fix, "model.qtype", js(c_.qtype), js(to_qtype));
  const double old_bpp = c_.quantize ? bpp : bytes_per_weight(c_.dtype);
  const double new_bpp = bytes_per_weight(c_.dtype, to_qtype);
  Effect effect = weights_effect(
      fix, fmt::format("transformer weights {:.2f} -> {:.2f} bytes/param", old_bpp, new_bpp));
  add(priority, std::move(fix), effect);
}

void Planner::plan_quantize_te(int priority) {
  if (!knows(Knob::kTextEncoder) || c_.quantize_te || c_.cache_text_embeddings ||
      c_.unload_text_encoder)
    return;
  Fix fix = make("quantize_text_encoder", "Quantize the text encoder",
                 "The text encoder stays on the GPU unquantized",
                 "Slightly different text features", 0.5);
  change(fix, "model.quantize_te", js(false), js(true));
  add(priority, std::move(fix), unmodelled());
}

void Planner::plan_cache_text_embeddings(int priority) {
  if (!knows(Knob::kTextEncoder) || c_.cache_text_embeddings || c_.unload_text_encoder ||
      c_.train_text_encoder || !big_text_encoder(c_.family)) {
    return;
  }
  Fix fix = make(
      "cache_text_embeddings", "Cache text embeddings and unload the text encoder",
      fmt::format("{}'s text encoder stays on the GPU for the whole run; caching the "
                  "caption embeddings once lets it leave",
                  parsers::to_string(c_.family)),
      "A caching pass at start; caption dropout and trigger-word changes need a re-cache", 0.6);
  change(fix, "train.cache_text_embeddings", js(false), js(true));
  Effect effect = weights_effect(fix, "text encoder off the GPU");
  add(priority, std::move(fix), effect);
}

void Planner::plan_layer_offloading(int priority) {
  if (!knows(Knob::kOffloading) || c_.layer_offloading) return;
  Fix fix = make("layer_offloading", "Offload transformer layers to the CPU",
                 "Keeps part of the transformer in host RAM and streams it to the GPU",
                 "Much slower steps and a lot of host RAM", 0.45);
  change(fix, "model.layer_offloading", js(false), js(true));
  add(priority, std::move(fix), unmodelled());
}

void Planner::plan_cache_latents_to_disk(int priority) {
  if (!knows(Knob::kLatentCache)) return;
  // For a host-RAM kill only latents held in host RAM are a cause; the VAE's GPU memory is not.
  const bool host = e_.kind == OomKind::kHostKilled || e_.kind == OomKind::kHostMemoryError;
  const bool in_host_ram = std::any_of(
      c_.datasets.begin(), c_.datasets.end(),
      [](const parsers::DatasetView& d) { return d.cache_latents && !d.cache_latents_to_disk; });
  if (host && !in_host_ram) return;
  Fix fix =
      make("cache_latents_to_disk", "Cache latents to disk",
           host ? "Latents cached in memory hold every image's latents in host RAM for the whole "
                  "run; on disk they are read as needed"
                : "Without cached latents the VAE stays on the GPU for the whole run",
           "A caching pass at start and disk space; augmentations that change pixels are off", 0.4);
  for (size_t i = 0; i < c_.datasets.size(); ++i) {
    if (!c_.datasets[i].cache_latents_to_disk) {
      change(fix, fmt::format("datasets[{}].cache_latents_to_disk", i), js(false), js(true));
    }
  }
  if (fix.changes.empty()) return;
  add(priority, std::move(fix), unmodelled());
}

void Planner::plan_bf16(int priority) {
  if (!knows(Knob::kDtype) || !is_fp32(c_.dtype)) return;
  Fix fix = make("use_bf16", "Train in bf16 instead of fp32",
                 fmt::format("{} is fp32{}: every weight and activation takes twice the memory "
                             "of bf16",
                             setting("train.dtype", "train.dtype"),
                             ai_toolkit() ? " (AI Toolkit's default when the key is absent)"
                                          : " (full precision)"),
                 "Needs a GPU with bf16 (Ampere or newer); no visible quality loss for LoRAs", 0.7);
  change(fix, "train.dtype", js(c_.dtype), js("bf16"));
  Effect effect = weights_effect(fix, "fp32 -> bf16");
  if (!effect.modelled) effect = Effect{.what = "fp32 -> bf16"};  // no modelled weights to scale
  effect.activations = 0.5;  // a crash's activations were held in fp32
  add(priority, std::move(fix), effect);
}

Effect Planner::weights_effect(const Fix& fix, std::string what) const {
  if (!cal_ || cal_->weights_bytes == 0) return unmodelled();
  const auto before = static_cast<double>(weights_bytes(c_));
  const auto after = static_cast<double>(weights_bytes(with_changes(c_, fix.changes)));
  if (before <= 0) return unmodelled();
  return Effect{.weights = std::max(0.0, 1.0 - (before - after) / cal_->weights_bytes),
                .what = std::move(what)};
}

void Planner::plan_8bit_optimizer(int priority) {
  if (!knows(Knob::kOptimizer)) return;
  if (c_.optimizer != "adamw" && c_.optimizer != "adam") return;
  Fix fix = make("use_8bit_optimizer", "Use an 8-bit optimizer",
                 fmt::format("{} keeps two fp32 states per trained parameter", c_.optimizer),
                 "Negligible for LoRA training", 0.35);
  change(fix, "train.optimizer", js(c_.optimizer), js("adamw8bit"));
  add(priority, std::move(fix), unmodelled());
}

}  // namespace oomtriage::triage::detail
