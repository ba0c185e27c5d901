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

}  // namespace

MemorySpec spec_from_config(const parsers::JobConfig& c) {
  MemorySpec spec;
  spec.model_family = family_id(c);
  if (c.knows(Knob::kResolution) && c.max_resolution() > 0) {
    spec.width = spec.height = c.max_resolution();
  }
  if (parsers::is_video_family(c.family) && c.knows(Knob::kNumFrames)) {
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
  return spec;
}

}  // namespace oomtriage::triage
