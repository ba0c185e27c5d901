// triage/crash_figures.cc: the weights a config keeps on the GPU, priced by the memory model,
// and the calibration step.
#include "triage/crash_figures.h"

#include <algorithm>

#include "triage/architectures.h"
#include "triage/memory_model.h"
#include "triage/spec_from_config.h"

namespace oomtriage::triage {

uint64_t weights_bytes(const parsers::JobConfig& c) {
  const MemorySpec spec = spec_from_config(c);
  if (find_architecture(spec.model_family) == nullptr) return 0;
  // The memory model's own weight terms of a training step: the denoiser at its precision,
  // quantization and share on the GPU, the text encoders while they stay. The VAE's are left
  // out: no fix moves them.
  const MemoryEstimate estimate = estimate_memory(spec);
  const PhaseEstimate* step = estimate.phase(parsers::Phase::kTrainStep);
  if (step == nullptr) return 0;
  uint64_t bytes = 0;
  for (const MemoryTerm& term : step->terms) {
    if (term.name == "denoiser_weights" || term.name == "text_encoder_weights") bytes += term.bytes;
  }
  return bytes;
}

std::optional<Calibration> calibrate(const MemoryPressure& pressure,
                                     const parsers::JobConfig* config) {
  if (!pressure.card_bytes || !pressure.need_bytes) return std::nullopt;
  Calibration cal;
  cal.capacity_bytes = *pressure.card_bytes;
  cal.other_processes_bytes = std::min(pressure.others_bytes, cal.capacity_bytes);
  cal.usable_bytes = cal.capacity_bytes - cal.other_processes_bytes;
  cal.need_bytes = *pressure.need_bytes;
  const uint64_t modelled = config ? weights_bytes(*config) : 0;
  cal.weights_bytes = std::min(modelled, cal.need_bytes * 9 / 10);
  cal.activations_bytes = cal.need_bytes - cal.weights_bytes;
  return cal;
}

}  // namespace oomtriage::triage
