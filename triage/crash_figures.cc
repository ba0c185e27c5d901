// triage/crash_figures.cc: the weights a config keeps on the GPU, priced by the memory model's
// tables, and the calibration step.
#include "triage/crash_figures.h"

#include <algorithm>

#include "triage/architectures.h"
#include "triage/memory_model.h"
#include "triage/spec_from_config.h"

namespace oomtriage::triage {

std::optional<ModelSize> model_size(const parsers::JobConfig& c) {
  const Architecture* a = find_architecture(spec_from_config(c).model_family);
  if (a == nullptr) return std::nullopt;
  return ModelSize{a->denoiser_billions, a->text_encoder_billions};
}

uint64_t weights_bytes(const parsers::JobConfig& c) {
  const auto size = model_size(c);
  if (!size) return 0;
  constexpr double kBillion = 1e9;
  const double transformer_bpp = bytes_per_weight(c.dtype, c.quantize ? c.qtype : "");
  double bytes = size->transformer_params_billion * kBillion * transformer_bpp;
  const bool te_resident = !c.cache_text_embeddings && !c.unload_text_encoder;
  if (te_resident) {
    const double te_bpp = bytes_per_weight(c.dtype, c.quantize_te ? c.qtype_te : "");
    bytes += size->text_encoder_params_billion * kBillion * te_bpp;
  }
  return static_cast<uint64_t>(bytes);
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
