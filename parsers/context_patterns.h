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
#include "parsers/result.h"

namespace re2 {
class RE2;
}

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
  kGpuIndex,  // group "n" names the GPU of the error printed just before
  // Arguments that kohya, diffusers and HF Trainer print (group "n" or "flag"):
  kArgBatchSize,
  kArgGradientAccumulation,
  kArgResolution,
  kArgGradientCheckpointing,
  // HF Trainer's banner when the batch it trains with differs from the one asked for. Smaller
  // means auto_find_batch_size (accelerate's find_executable_batch_size) caught an OOM and
  // retried: the only trace such an OOM leaves.
  kBatchSizeAdjusted,
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
// Its regex, an alternation of literals.
const re2::RE2& context_literals();

// The trainer whose output a row was written from (its name's prefix: "aitk-", "kohya-", ...);
// kUnknown for rows that hold for any trainer. The leave-one-trainer-out test switches a
// trainer's own rows off to prove the generic evidence finds its phase and step.
Trainer rules_of(const ContextPattern& pattern);

// A traceback frame: Python's "File "x.py", line 3, in generate_images", IPython's "File
// ~/t.py:12, in Trainer.train(...)", rich's "│ /w/train_network.py:1045 in train", C++'s
// "frame #4: at::native::..._backward_...". The stage lexicon reads the function, then the
// module path (its folder and file), and the caller reads the source line below a frame that
// said nothing. `strong` is false for what every traceback shows (an entry point named "train"
// or "main", a training script's file name): weaker than the markers before the error.
struct FrameEvidence {
  Phase phase = Phase::kUnknown;
  bool strong = false;
  bool wants_source_line = false;  // a Python frame that named no stage: its source line may
  bool top_level = false;  // "in <module>": the interpreter's own traceback, the process is dying
};
std::optional<FrameEvidence> traceback_frame(std::string_view line);
// A statement that runs the backward pass ("loss.backward()", autograd's
// "Variable._execution_engine.run_backward(" that every backward traceback shows): training.
bool calls_backward(std::string_view line);
// IPython marks the statement each frame (and the cell) was running with an arrow: "----> 3
// trainer.train()", "-> 1539     return inner_training_loop(". The statement, or empty.
std::string_view ipython_statement(std::string_view line);
// What a statement names, as a frame's function would: any stage; a training word alone
// ("trainer.train()") is only a hint.
FrameEvidence statement_evidence(std::string_view code);
// The phase alone, for callers that need no strength.
std::optional<Phase> traceback_frame_phase(std::string_view line);
// What a frame's source line adds ("self.transformer = quantize(...)", "load_file(path)"): only
// model loading and quantizing, the stages a line of code names without ambiguity.
Phase source_line_phase(std::string_view line);

// A UI node type that names its stage: "- **Node Type:** KSampler", "Exception in node 12
// (VAEDecode)": the type, or empty.
std::string_view node_type(std::string_view line);

// A line that announces a stage in any trainer's words: a gerund first ("Caching latents for
// /data", "Loading Flux model", "Running validation...", "Encoding prompts"). kUnknown otherwise.
bool may_announce_stage(std::string_view line);
Phase announced_stage(std::string_view line);
// An announcement of caching that does not say what is cached: musubi-tuner's latent and text
// encoder caching scripts both print "Encoding dataset [0]". Whatever stage came before is over
// (the models are loaded); which caching it is, the traceback's frames may say.
bool announces_unnamed_caching(std::string_view line);

// A failure line printed after an error that names the stage that failed ("stage 'latents'
// failed, see above", "Validation run failed at step 500"). kUnknown otherwise.
Phase failed_stage(std::string_view line);

// Whether every regex of the marker table and of the frame, node and announcement rules compiled.
Result<Ok> context_patterns_ok();

// The final line of a Python traceback: "torch.OutOfMemoryError: ...", "KeyboardInterrupt".
bool is_exception_line(std::string_view line);

}  // namespace oomtriage::parsers
