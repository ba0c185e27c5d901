// parsers/context_patterns.h
//
// The lines around an OOM that say where the job was: phase markers ("Generating baseline
// samples before training", "Saving at step 250", kohya's "generating sample images at step"),
// run boundaries, crash and stop envelopes, completion lines, trainer fingerprints, and the
// traceback frames whose function names give the phase away (generate_images, cache_latents,
// quantize, backward...). One table, each row with sample lines checked by
// tests/parsers/context_patterns_test.cc.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "parsers/event.h"

namespace oomtriage::parsers {

enum class MarkerEffect {
  kNone,            // a trainer fingerprint only
  kPhase,           // the job entered `phase` (group "n", when present, is the exact step)
  kBaselineSample,  // AI Toolkit's sample before training: step 0 or the resume step
  kResumeStep,      // "Found step N in metadata"
  kRunStart,        // a new run starts in the same log: incidents before it are closed
  kTotalSteps,      // group "n" is the number of training steps
  kCrash,           // the process died (an error envelope or a non-zero exit)
  kStop,            // a user stop, not a failure
  kCompleted,       // the run finished
  kTracebackHeader,
  kGpuIndex,        // group "n" names the GPU of the error printed just before
  // Arguments that kohya, diffusers and HF Trainer print (group "n" or "flag"):
  kArgBatchSize,
  kArgGradientAccumulation,
  kArgResolution,
  kArgGradientCheckpointing,
};

struct ContextPattern {
  std::string_view name;
  std::string_view regex;  // RE2; optional groups "n" (a number) and "job" (AI Toolkit job name)
  MarkerEffect effect = MarkerEffect::kNone;
  Phase phase = Phase::kUnknown;
  Trainer trainer = Trainer::kUnknown;  // a vote for the trainer that prints this line
  std::vector<std::string_view> samples;
};

struct ContextMatch {
  const ContextPattern* pattern = nullptr;
  std::optional<int64_t> n;
  std::string_view job;
  std::string_view flag;  // "True" / "False"
};

const std::vector<ContextPattern>& context_patterns();

// Appends every row that matches the cleaned line (a line can be a marker and a fingerprint).
void match_context(std::string_view line, std::vector<ContextMatch>& out);

// Cheap literal check: false means no row can match.
bool may_be_context(std::string_view line);

// "  File "x.py", line 3, in generate_images", IPython's "File ~/t.py:12, in Trainer.train(...)",
// and C++ "frame #4: at::native::..._backward_...": the phase the frame's function implies.
// nullopt when the line is no frame; Phase::kUnknown when the frame says nothing.
std::optional<Phase> traceback_frame_phase(std::string_view line);

// The final line of a Python traceback: "torch.OutOfMemoryError: ...", "KeyboardInterrupt".
bool is_exception_line(std::string_view line);

}  // namespace oomtriage::parsers
