// triage/crash_figures.cc: parameter counts (public model cards) and the calibration step.
#include "triage/crash_figures.h"

#include <algorithm>

namespace oomtriage::triage {

using parsers::ModelFamily;

std::optional<ModelSize> model_size(const parsers::JobConfig& c) {
  const auto has = [&](const char* s) { return c.arch.find(s) != std::string::npos; };
  switch (c.family) {
    case ModelFamily::kZImage: return ModelSize{6.2, 4.0};
    case ModelFamily::kQwenImage:
    case ModelFamily::kQwenImageEdit:
    case ModelFamily::kQwenImageEditPlus: return ModelSize{20.4, 8.3};
    case ModelFamily::kFlux1: return ModelSize{11.9, 4.9};
    case ModelFamily::kFlex1: return ModelSize{8.2, 4.9};
    case ModelFamily::kFlex2: return ModelSize{8.2, 4.9};
    case ModelFamily::kFlux2:
      if (has("klein_4b")) return ModelSize{4.0, 4.0};
      if (has("klein_9b")) return ModelSize{9.0, 8.0};
      return ModelSize{32.0, 24.0};
    case ModelFamily::kChroma: return ModelSize{8.9, 4.8};
    case ModelFamily::kWan21: return has("1b") ? ModelSize{1.3, 5.7} : ModelSize{14.0, 5.7};
    case ModelFamily::kWan22: return has("5b") ? ModelSize{5.0, 5.7} : ModelSize{14.0, 5.7};
    case ModelFamily::kLtx: return ModelSize{19.0, 12.0};
    case ModelFamily::kSdxl: return ModelSize{2.6, 0.8};
    case ModelFamily::kSd1: return ModelSize{0.86, 0.12};
    case ModelFamily::kOther: return std::nullopt;
  }
  return std::nullopt;
}

double bytes_per_param(const std::string& spec) {
  const std::string q = spec.substr(0, spec.find('|'));
  if (q.rfind("uint", 0) == 0 && q.size() == 5 && q[4] >= '1' && q[4] <= '8') {
    return (q[4] - '0') / 8.0;
  }
  if (q.rfind("convrotint", 0) == 0 && q.size() == 11) return (q[10] - '0') / 8.0;
  if (q == "uint4" || q == "convrot4" || q == "nvfp4") return 0.5;
  if (q == "qfloat8" || q == "float8" || q == "convrot8" || q == "qint8" || q == "fp8") return 1.0;
  if (q == "fp32" || q == "float32" || q == "float") return 4.0;
  return 2.0;  // bf16, fp16, float16, bfloat16
}

uint64_t weights_bytes(const parsers::JobConfig& c) {
  const auto size = model_size(c);
  if (!size) return 0;
  constexpr double kBillion = 1e9;
  const double transformer_bpp = c.quantize ? bytes_per_param(c.qtype) : bytes_per_param(c.dtype);
  double bytes = size->transformer_params_billion * kBillion * transformer_bpp;
  const bool te_resident = !c.cache_text_embeddings && !c.unload_text_encoder;
  if (te_resident) {
    const double te_bpp = c.quantize_te ? bytes_per_param(c.qtype_te) : bytes_per_param(c.dtype);
    bytes += size->text_encoder_params_billion * kBillion * te_bpp;
  }
  return static_cast<uint64_t>(bytes);
}

std::optional<Calibration> calibrate(const parsers::OomEvent& event,
                                     const parsers::JobConfig* config) {
  const auto& f = event.figures;
  if (!f.total_capacity_bytes) return std::nullopt;
  Calibration cal;
  cal.capacity_bytes = *f.total_capacity_bytes;
  for (const auto& p : f.other_processes) cal.other_processes_bytes += p.bytes;
  cal.other_processes_bytes = std::min(cal.other_processes_bytes, cal.capacity_bytes);
  cal.usable_bytes = cal.capacity_bytes - cal.other_processes_bytes;

  uint64_t in_use = 0;
  if (f.this_process_in_use_bytes && *f.this_process_in_use_bytes < cal.capacity_bytes) {
    in_use = *f.this_process_in_use_bytes;
  } else if (f.allocated_by_pytorch_bytes) {
    in_use = *f.allocated_by_pytorch_bytes + f.reserved_unallocated_bytes.value_or(0);
  } else if (f.free_bytes) {
    in_use = cal.capacity_bytes - std::min(*f.free_bytes, cal.capacity_bytes) -
             std::min(cal.other_processes_bytes, cal.capacity_bytes - *f.free_bytes);
  } else {
    return std::nullopt;
  }
  cal.need_bytes = in_use + f.tried_to_allocate_bytes.value_or(0);
  const uint64_t modelled = config ? weights_bytes(*config) : 0;
  cal.weights_bytes = std::min(modelled, cal.need_bytes * 9 / 10);
  cal.activations_bytes = cal.need_bytes - cal.weights_bytes;
  return cal;
}

}  // namespace oomtriage::triage
