// parsers/trainer_table.h
//
// The trainer table: one row per trainer with what the rest of the program asks of it by name:
// its names, the log lines that are its own, how its settings are written, how it resumes after
// a crash and where its checkpoints are, what to check when its previews run out of memory, and
// the files beside its log that hold its config. parsers/ reads the names, the rules prefix and
// the dialect; triage/ the resume option and the preview check (triage/heal_plan.h,
// triage/planner_previews.cc); daemon/ the checkpoint pattern and the config files
// (daemon/cli/run_command.cc, daemon/service/job_locator.cc), and the completions and the man
// page under scripts/ are held to its names by tests/daemon/open_set_tables_test.cc. A new
// trainer is its enum value (parsers/event.h), a row here, and its own code: its context
// patterns, its dialect rows (parsers/trainer_dialect.cc) and its config reader. Pure.
#pragma once

#include <string_view>
#include <vector>

#include "parsers/event.h"

namespace oomtriage::parsers {

// What a trainer's command line needs to resume from its newest checkpoint
// (triage::with_resume()).
struct ResumeOption {
  enum class How {
    kNotKnown,    // the trainer is not known, so neither is how it resumes
    kByItself,    // AI Toolkit: the same job name resumes from the newest save
    kFlag,        // `flag value`: the flag's value replaced where given, else appended
    kGluedFlag,   // `flag=value` appended, every earlier spelling of the flag removed
    kAppendOnce,  // `flag value` appended unless `value` is already there (--config-value)
  };
  How how = How::kNotKnown;
  std::string_view flag = {};
  std::string_view value = {};  // "": the newest saved state the caller found (checkpoint below)
  std::string_view also_switch = {};    // a switch added with it ("--skip_until_initial_step")
  std::string_view first_attempt = {};  // a switch a first attempt needs to leave a state at all
};

// Where a trainer saves the states it can resume from: folders in the folder `folder_flag`
// names, matched by `glob` ("*-state": a name ending so; "checkpoint-*": a name starting so).
struct CheckpointPattern {
  // The last written; the highest number after the prefix.
  enum class Newest { kByTime, kByNumber };
  std::string_view folder_flag = {};  // "" when it keeps no such folders
  std::string_view glob = {};
  Newest newest = Newest::kByTime;
  std::string_view missing = {};  // why it cannot resume when there is none
};

struct TrainerRow {
  Trainer trainer = Trainer::kUnknown;
  std::string_view name = {};        // the contract's name (docs/design.md): "sd-scripts"
  std::string_view short_name = {};  // the alias a "did you mean" offers too ("kohya"), or ""
  std::vector<std::string_view> aliases = {};  // more names people use, lower case, '-' for '_'
  // Its fingerprint: the rows of the context table (parsers/context_patterns.cc) named with this
  // prefix are the log lines only it prints; "" when it has none.
  std::string_view rules_prefix = {};
  bool writes_flags =
      false;  // its settings are command-line flags (fixes' args targets take `--key`)
  ResumeOption resume = {};
  // What to check first when a preview OOMs and the config does not show the preview
  // settings; "": the general advice (triage/planner_previews.cc).
  std::string_view preview_check = {};
  CheckpointPattern checkpoint = {};
  // The files beside its log that hold its config, in the order they are tried.
  std::vector<std::string_view> config_files = {};
};

// Every trainer, kUnknown ("auto") first, in the enum's order.
const std::vector<TrainerRow>& trainer_table();

// The row of `trainer` (every enum value has one).
const TrainerRow& trainer_row(Trainer trainer);

}  // namespace oomtriage::parsers
