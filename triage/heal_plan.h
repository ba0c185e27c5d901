// triage/heal_plan.h
//
// What `oomtriage run --heal` does after an attempt ends, decided from the attempt's analysis
// and its ranked fixes alone: stop (completed, not an OOM, a crash no config change fixes, every
// lever tried) or take the next resume-safe fix; and the command line of the next attempt: the
// fix's flags, the patched config copy in place of the original, the trainer's resume option.
// Pure. Facts behind the choices: docs/self-healing-and-fleet.md §A.1, §A.10, §B.2.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/event.h"
#include "triage/fix.h"

namespace oomtriage::triage {

// Whether a fix leaves the checkpoint and the optimizer state valid, so that the next attempt
// resumes where the last save left it (batch, buckets, resolution, previews, checkpointing,
// low_vram, quantization, offloading, caching, the allocator). A rank, optimizer or precision
// change is never applied unattended.
bool resume_safe(std::string_view fix_id);

struct HealStep {
  const Fix* fix = nullptr;  // the fix to apply before the next attempt; null: stop
  std::string stop_reason;   // when stopping, why, in words
};

// The next step after an attempt ended with `analysis`, given the fixes ranked for it and the
// fix ids already applied in earlier attempts of this job: the first resume-safe fix the memory
// model predicts to make every phase fit, else (no prediction fits) the first resume-safe one.
HealStep next_heal_step(const parsers::LogAnalysis& analysis, const std::vector<Fix>& ranked,
                        const std::vector<std::string>& tried);

// The fix's changes in words, "sample.width 1024 -> 768, sample.height 1024 -> 768": AI
// Toolkit's paths without the "config.process[0]." they all share.
std::string describe_changes(const Fix& fix);

// `argv` with the fix's command-line changes: a flag's value replaced ("--flag V" or
// "--flag=V"), a switch added or removed, a missing flag appended.
std::vector<std::string> apply_argument_changes(std::vector<std::string> argv,
                                                const std::vector<ConfigChange>& changes);

// `argv` with every argument equal to `from` (or "--flag=from") pointing at `to` instead.
std::vector<std::string> replace_path_argument(std::vector<std::string> argv,
                                               const std::string& from, const std::string& to);

// What a trainer needs on its command line to resume from its newest checkpoint; the value of a
// flag that names a folder ("--output_dir X") is read by the caller, which finds the newest
// state in it (kohya's "*-state", HF's "checkpoint-N").
struct ResumeArguments {
  std::vector<std::string> argv;
  std::string missing;  // non-empty: the trainer cannot be resumed this way, and why
};
// `newest_state`: the newest saved state the caller found (kohya, HF Trainer), if any.
ResumeArguments with_resume(parsers::Trainer trainer, std::vector<std::string> argv,
                            const std::optional<std::string>& newest_state);

// The flags a first attempt gets so that a later one can resume (kohya: --save_state).
std::vector<std::string> prepare_first_attempt(parsers::Trainer trainer,
                                               std::vector<std::string> argv);

// The value of `--flag V` or `--flag=V` in argv, if present.
std::optional<std::string> argument_value(const std::vector<std::string>& argv,
                                          std::string_view flag);

}  // namespace oomtriage::triage
