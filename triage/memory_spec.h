// triage/memory_spec.h
//
// The memory model's input (triage/memory_model.h): a training job in a small trainer-neutral
// vocabulary (docs/memory-model.md lists it) — what is trained, at what size, in which precision,
// with which optimizer and offloading. `oomtriage check --spec FILE.json` reads it as JSON; a job
// config becomes one through triage/spec_from_config.h. An unset field is one the job does not
// state: the model assumes the common default and says so. Pure: JSON in, spec out.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/result.h"

namespace oomtriage::triage {

// Where the denoiser's weights live while it trains.
struct Offload {
  // none | block_swap | layer_fraction | stream_all_blocks | zero2 | zero2_cpu | low_vram |
  // activation_offload | text_encoder_offload
  std::string kind = "none";
  // block_swap: blocks kept on the CPU; layer_fraction: the fraction of layers offloaded.
  std::optional<double> amount;
};

// Previews (validation images or clips) while training; not part of the shared vocabulary:
// configs fill it, a spec file may.
struct SamplingSpec {
  bool enabled = true;
  int width = 0;  // 0: the training resolution
  int height = 0;
  int frames = 0;  // 0: the training frames
  int batch_size = 1;
  bool tiled_vae = false;
};

struct MemorySpec {
  std::string model_family;  // "flux1-dev", "sdxl", "wan21-t2v-14b", ... (triage/architectures.h)
  std::optional<std::string> training_type;  // lora | lokr | full | controlnet
  std::optional<int> width;                  // the largest bucket
  std::optional<int> height;
  std::optional<int> frames;
  std::optional<int> batch_size;
  std::optional<int> gradient_accumulation;
  std::optional<int> lora_rank;
  std::optional<bool> gradient_checkpointing;
  std::optional<bool> text_encoder_cached;
  std::optional<bool> text_encoder_trained;
  // The denoiser's weights: none | fp8 | int8 | nf4 | int4 | int2 | qfloat8 | uint4 | uint3 ...
  std::optional<std::string> quantization;
  std::optional<std::string> text_encoder_quantization;  // the same words, for the text encoders
  std::optional<std::string> dtype;                      // bf16 | fp16 | fp32
  // adamw | adamw_bf16 | adamw8bit | adafactor | lion | lion8bit | prodigy | automagic | sgd
  std::optional<std::string> optimizer;
  std::optional<Offload> offload;
  std::optional<std::string> attention;  // sdpa | xformers | flash | sage | eager
  std::optional<SamplingSpec> sampling;  // unset: the trainer's previews are not known

  // Per GPU and decoder LLMs (issue 44, wt-llm; docs/memory-model.md "Per GPU", "Decoder LLMs").
  std::optional<int> processes;  // GPUs the job runs on, over every machine
  std::optional<int> machines;   // for hybrid sharding: shards within a machine
  // none | ddp | zero1 | zero2 | zero3 | fsdp_full | fsdp_grad_op | fsdp_hybrid |
  // fsdp_hybrid_zero2 | fsdp_no_shard
  std::optional<std::string> sharding;
  std::optional<std::string> offload_optimizer;  // none | cpu | nvme
  std::optional<std::string> offload_params;     // none | cpu | nvme
  std::optional<int> context_parallel;           // each sequence split over this many GPUs
  std::optional<int> sequence_length;            // LLMs: tokens per sample (padded or packed)
  // LLMs: the linears a LoRA adapts ("q_proj", "v_proj", ... or "all-linear").
  std::optional<std::vector<std::string>> lora_targets;
  // LLMs: the dtype the weights are loaded in (fp32: masters under mixed precision).
  std::optional<std::string> weights_dtype;
  std::optional<bool> fused_loss;  // LLMs: the loss without whole logits (unsloth, Liger, CCE)
  // Issue 44, every training type (readers): unset keeps the model's assumption.
  std::optional<bool> ema;  // a second copy of the trained weights on the GPU
  // Gradients applied as the backward pass makes them (one block's at a time); unset: a full
  // fine-tune with Adafactor fuses (OneTrainer's and sd-scripts' way), nothing else does.
  std::optional<bool> fused_backward_pass;
  // The dtype a full fine-tune keeps its trained weights in: fp32 master weights under mixed
  // precision (diffusers, sd-scripts without --full_bf16), or bf16; unset: the job's dtype.
  std::optional<std::string> master_weights;
};

// Reads a spec object. A field of the wrong type is a kBadInput error naming `source` and the
// field ("spec.json: resolution must be [width, height] or null"); unknown fields are ignored and
// words the model does not know are kept as written (the model says what it assumed).
Result<MemorySpec> parse_memory_spec(const nlohmann::json& object, std::string_view source);

// The spec as JSON, in the same vocabulary (`check --explain`); unset fields are null.
nlohmann::ordered_json to_json(const MemorySpec& spec);

}  // namespace oomtriage::triage
