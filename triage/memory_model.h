// triage/memory_model.h
//
// The per-phase memory model: from a job's spec (triage/memory_spec.h) and its family's row of
// the architecture table (triage/architectures.h), the peak GPU memory of every phase the job
// runs — model load, text-encoder and latent caching, a training step, previews, saving — each
// as named terms (weights by precision and residency, trainable parameters, gradients, optimizer
// states, activations, the VAE, the allocator's overhead). docs/memory-model.md gives the
// formulas and the constants fitted on measured jobs. The peak excludes the CUDA context, which
// usable_bytes() takes off the card instead. Pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/event.h"
#include "triage/memory_spec.h"

namespace oomtriage::triage {

struct MemoryTerm {
  std::string name;  // "denoiser_weights", "activations", ...
  uint64_t bytes = 0;
};

// The terms that depend on the data a phase works on (activations, a decode, the allocator's
// slack), as opposed to the weights and training state it holds, which the parameter counts
// fix: the model's uncertainty is mostly here, so a crash's figures correct these.
bool is_working_memory(const MemoryTerm& term);

struct PhaseEstimate {
  parsers::Phase phase = parsers::Phase::kTrainStep;
  uint64_t peak_bytes = 0;
  std::vector<MemoryTerm> terms;  // they add up to peak_bytes
};

// What a run of this very config showed (issue 45): a crash in `phase` (the model's phase)
// needed at least `need_bytes`; the phases it came through before it fit in `room_bytes` (what
// the job could hold of its card; 0 when unknown). The job's own evidence outranks the model
// and the fleet: estimate_memory() raises the crashed phase to the need and caps the others.
struct PhaseEvidence {
  parsers::Phase phase = parsers::Phase::kTrainStep;
  uint64_t need_bytes = 0;
  std::vector<parsers::Phase> came_through;
  uint64_t room_bytes = 0;
  std::string source;  // "run 3 crashed in sampling at step 500"
};

// A correction learnt from finished runs of the same family (triage/fleet_correction.h): the
// model's figures are multiplied by `factor`; then this config's own runs' evidence applies.
struct MemoryCorrection {
  double factor = 1.0;
  int runs = 0;
  std::string scope;  // "flux1-dev on this fleet"
  int measured = 0;   // of `runs`, those whose peak was measured (not bounded by a crash)
  std::vector<PhaseEvidence> evidence;
};

struct MemoryEstimate {
  std::string family;                    // the architecture row used ("flux1-dev")
  std::vector<PhaseEstimate> phases;     // the phases the job runs, in the order it runs them
  std::vector<std::string> assumptions;  // "batch_size not stated: 1 assumed"
  MemoryCorrection correction;           // factor 1 when none applied
  // Why the model is not known, when it is not ("'$MODEL_NAME' is a shell variable the command
  // line did not expand"): the phases then price a FLUX-sized stand-in and judge() gives no
  // verdict. Empty when the family is in the table or its id states its size.
  std::string model_unknown;
  // Per GPU (issue 44): the phases are one GPU's; `per_gpu` says why ("per GPU, 4 processes:
  // ZeRO-3 shards ..."), empty for one GPU without sharding.
  int processes = 1;
  std::string per_gpu;

  // The run's peak: the phase with the largest peak once training starts (the training step when
  // phases tie). Caching phases are judged too but not counted here: trainers can run them in a
  // pass of their own, and measurements of a run leave them out.
  const PhaseEstimate& peak() const;
  const PhaseEstimate* phase(parsers::Phase phase) const;
};

MemoryEstimate estimate_memory(const MemorySpec& spec, const MemoryCorrection& correction = {});

// Bytes per weight of a model kept in `dtype` ("bf16", "float32"), or quantized as `quantization`
// says ("qfloat8", "uint4|adapter", "int8-quanto") unless that is empty or "none": the model's
// one table of bytes per parameter, which the crash figures (triage/crash_figures.h) read too. A
// quantization the table does not know is read as 8-bit, as the model reads it.
double bytes_per_weight(std::string_view dtype, std::string_view quantization = {});

// What a job can use of a card: its size less the CUDA context and the allocator's slack.
uint64_t usable_bytes(uint64_t card_bytes);

// kUnknown: the model is not known, or a value the verdict depends on could not be read
// (FitVerdict::unread says which: "model", "batch_size", ...); never "fits" for a job whose
// batch, say, was refused, nor for a model that was guessed.
enum class Fit { kFits, kTight, kWillNotFit, kUnknown };
std::string_view to_string(Fit fit);

struct FitVerdict {
  Fit fit = Fit::kFits;
  parsers::Phase first_failing = parsers::Phase::kUnknown;  // the first phase over the usable
  // Caching phases over the usable memory: a warning, not the verdict, because trainers run
  // them in a pass of their own, on the CPU or with the encoder quantized.
  std::vector<parsers::Phase> caching_over;
  // kUnknown: the knobs (parsers::to_string(Knob)) whose values could not be read.
  std::vector<std::string> unread;
};

// kWillNotFit when a phase of the run (peak()) exceeds `usable`; kTight when the peak is within
// 10% under it; kUnknown (unread "model") when the estimate's model is not known.
FitVerdict judge(const MemoryEstimate& estimate, uint64_t usable);

}  // namespace oomtriage::triage
