// triage/spec_from_config.cc: the job config's knobs in the spec's words.
#include "triage/spec_from_config.h"

#include <algorithm>

#include "triage/architectures.h"

namespace oomtriage::triage {
namespace {

using parsers::Knob;

// The most specific family a config names: its model name or path ("Wan-AI/Wan2.1-T2V-1.3B"),
// then its arch tag ("wan21:1b"), then the family the trainer's dialect settled on.
std::string family_id(const parsers::JobConfig& c) {
  // The trainer's own words for the model (parsers/trainer_words.h) name it exactly.
  if (const Architecture* a = find_architecture(c.family_id); a && !c.family_id.empty()) {
    return std::string(a->id);
  }
  for (const std::string& name : {c.name_or_path, c.arch}) {
    if (const Architecture* a = find_architecture(name)) return std::string(a->id);
  }
  if (const Architecture* a = find_architecture(parsers::to_string(c.family))) {
    return std::string(a->id);
  }
  return c.name_or_path.empty() ? std::string(parsers::to_string(c.family)) : c.name_or_path;
}

// "fp32" for AI Toolkit's "float32", "bf16" for "bfloat16" and the others' spellings.
std::string dtype_word(const std::string& dtype) {
  if (dtype == "float32" || dtype == "fp32" || dtype == "float" || dtype == "no") return "fp32";
  if (dtype == "float16" || dtype == "fp16" || dtype == "half") return "fp16";
  return "bf16";
}

// Issue 44: the dataset that states both sides, the largest by area ([960, 544] is not 960x960).
std::optional<std::pair<int, int>> largest_sized_dataset(const parsers::JobConfig& c) {
  std::optional<std::pair<int, int>> best;
  for (const parsers::DatasetView& d : c.datasets) {
    if (d.width <= 0 || d.height <= 0) continue;
    if (!best || d.width * d.height > best->first * best->second) best = {d.width, d.height};
  }
  return best;
}

// Issue 44: what the readers say of where the weights live, how the trained weights are kept,
// and the training types beyond a LoRA.
void add_training_words(const parsers::JobConfig& c, MemorySpec& spec) {
  if (c.blocks_to_swap > 0) {
    spec.offload = Offload{"block_swap", static_cast<double>(c.blocks_to_swap)};
  } else if (c.layer_offload_fraction >= 1.0) {
    spec.offload = Offload{"stream_all_blocks", std::nullopt};
  } else if (c.layer_offload_fraction > 0) {
    spec.offload = Offload{"layer_fraction", c.layer_offload_fraction};
  } else if (c.activation_offload && (!spec.offload || spec.offload->kind == "none")) {
    spec.offload = Offload{"activation_offload", std::nullopt};
  }
  if (c.ema) spec.ema = *c.ema;
  if (c.fused_backward_pass) spec.fused_backward_pass = *c.fused_backward_pass;
  if (!c.weight_dtype.empty() && c.network_type == "full") spec.master_weights = c.weight_dtype;
  // Class images for prior preservation ride in the same batch.
  if (c.prior_preservation && spec.batch_size) spec.batch_size = *spec.batch_size * 2;
  if (const auto size = largest_sized_dataset(c)) {
    spec.width = size->first;
    spec.height = size->second;
  }
}

}  // namespace

MemorySpec spec_from_config(const parsers::JobConfig& c) {
  MemorySpec spec;
  spec.model_family = family_id(c);
  if (c.knows(Knob::kResolution) && c.max_resolution() > 0) {
    spec.width = spec.height = c.max_resolution();
  }
  if ((parsers::is_video_family(c.family) || c.max_num_frames() > 1) && c.knows(Knob::kNumFrames)) {
    spec.frames = c.max_num_frames();
  }
  if (c.knows(Knob::kBatchSize)) spec.batch_size = c.effective_batch_size();
  if (c.knows(Knob::kGradientAccumulation)) spec.gradient_accumulation = c.gradient_accumulation;
  if (c.knows(Knob::kGradientCheckpointing)) {
    spec.gradient_checkpointing = c.gradient_checkpointing;
  }
  if (c.knows(Knob::kDtype)) spec.dtype = dtype_word(c.dtype);
  if (c.knows(Knob::kQuantize)) {
    spec.quantization = c.quantize ? c.qtype.substr(0, c.qtype.find('|')) : "none";
    spec.text_encoder_quantization =
        c.quantize_te ? c.qtype_te.substr(0, c.qtype_te.find('|')) : "none";
  }
  if (c.knows(Knob::kOptimizer)) spec.optimizer = c.optimizer;
  if (c.knows(Knob::kTextEncoder)) {
    spec.text_encoder_cached = c.cache_text_embeddings || c.unload_text_encoder;
  }
  spec.text_encoder_trained = c.train_text_encoder;
  if (c.knows(Knob::kNetwork)) {
    if (!c.network_type.empty()) spec.training_type = c.network_type;
    if (c.lora_rank > 0) spec.lora_rank = c.lora_rank;
  }
  if (c.knows(Knob::kOffloading) || c.knows(Knob::kLowVram)) {
    Offload offload;
    if (c.layer_offloading) {
      offload.kind = "layer_fraction";
      offload.amount = c.layer_offloading_transformer_percent;
    } else if (c.low_vram) {
      offload.kind = "low_vram";
    }
    spec.offload = offload;
  }
  if (c.knows(Knob::kSampling)) {
    SamplingSpec s;
    s.enabled = !c.disable_sampling && c.has_sample_section;
    s.width = c.sample.max_width;
    s.height = c.sample.max_height;
    s.frames = c.sample.max_frames;
    s.batch_size = std::max(1, c.sample.batch_size);
    spec.sampling = s;
  }
  add_training_words(c, spec);
  return spec;
}

}  // namespace oomtriage::triage
