// triage/crash_figures.h
//
// A deliberately simple model of a training job's peak GPU memory, used to say whether a fix is
// likely to fit. Documented assumptions, not a simulator:
//   peak = weights + activations
//   weights      = transformer params x bytes/param (qtype when quantized, else train.dtype)
//                  + text-encoder params x bytes/param while the text encoder stays resident
//                  (not cached with cache_text_embeddings, not unloaded)
//   activations  = whatever the event's own figures say was needed beyond the weights:
//                  need = memory in use by this process (or allocated + reserved) + the failed
//                  request; activations = need - weights (at least 10% of need).
// A fix scales one part: gradient checkpointing keeps ~40% of the activations, activations scale
// linearly with batch and frames and with pixels (resolution squared), quantization rescales the
// weights. The estimate is only made when the event carries allocator figures (calibrated); it
// is never shown as a measurement, and a fix "fits" when the estimate stays under 95% of the
// memory the job can use (capacity minus other processes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "parsers/event.h"
#include "parsers/job_config.h"

namespace oomtriage::triage {

struct ModelSize {
  double transformer_params_billion = 0;
  double text_encoder_params_billion = 0;
};

// Parameter counts by family (and arch tag for sized variants); nullopt for unknown families.
std::optional<ModelSize> model_size(const parsers::JobConfig& config);

// Bytes per parameter for a qtype ("qfloat8", "uint4|ara-path", ...) or a dtype ("bf16").
double bytes_per_param(const std::string& qtype_or_dtype);

struct Calibration {
  uint64_t need_bytes = 0;         // what the failed step needed, from the event's figures
  uint64_t weights_bytes = 0;      // modelled
  uint64_t activations_bytes = 0;  // need - weights
  uint64_t usable_bytes = 0;       // capacity minus other processes
  uint64_t capacity_bytes = 0;
  uint64_t other_processes_bytes = 0;
};

// Needs the event's figures (capacity plus in-use or allocated); the config refines the split.
std::optional<Calibration> calibrate(const parsers::OomEvent& event,
                                     const parsers::JobConfig* config);

// Modelled weights on the GPU for a config (0 when the family is unknown).
uint64_t weights_bytes(const parsers::JobConfig& config);

}  // namespace oomtriage::triage
