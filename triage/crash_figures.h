// triage/crash_figures.h
//
// A deliberately simple model of a training job's peak GPU memory, used to say whether a fix is
// likely to fit when the memory model (triage/memory_model.h) cannot price the fix itself.
// Documented assumptions, not a simulator:
//   peak = weights + activations
//   weights      = the memory model's weight terms of a training step (triage/memory_model.h):
//                  the transformer at its precision, quantization and share on the GPU, plus the
//                  text encoders while they stay resident (not cached, not unloaded); one price
//                  list, so a fix's weights cost what `check` says they cost
//   activations  = whatever the memory pressure says was needed beyond the weights
//                  (triage/memory_pressure.h: a crash's memory in use plus the failed request, a
//                  prediction's or a sample's peak); activations = need - weights (at least 10%
//                  of need).
// A fix scales one part: gradient checkpointing keeps ~40% of the activations, activations scale
// linearly with batch and frames and with pixels (resolution squared), quantization rescales the
// weights (the model's price of the config before and after the fix). The estimate is only made
// when the need and the card are known (calibrated); it is never shown as a measurement, and a fix
// "fits" when the estimate stays under kFitMargin of the memory the job can use (capacity minus
// other processes).
#pragma once

#include <cstdint>
#include <optional>

#include "parsers/job_config.h"
#include "triage/memory_pressure.h"

namespace oomtriage::triage {

struct Calibration {
  uint64_t need_bytes = 0;         // what the job needed, from the memory pressure
  uint64_t weights_bytes = 0;      // modelled
  uint64_t activations_bytes = 0;  // need - weights
  uint64_t usable_bytes = 0;       // capacity minus other processes
  uint64_t capacity_bytes = 0;
  uint64_t other_processes_bytes = 0;
};

// Needs the pressure's need and card; the config refines the split.
std::optional<Calibration> calibrate(const MemoryPressure& pressure,
                                     const parsers::JobConfig* config);

// The weights a config keeps on the GPU, as the memory model prices them (its training step's
// denoiser and text-encoder weight terms); 0 when the model does not know the family.
uint64_t weights_bytes(const parsers::JobConfig& config);

}  // namespace oomtriage::triage
