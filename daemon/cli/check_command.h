// daemon/cli/check_command.h
//
// `oomtriage check`: the pre-flight check (triage/preflight.h) of a job before it starts — from
// its config, its trainer's command line (`check -- COMMAND ARGS...`) or the model's own input
// (`check --spec FILE.json`) — against a card (`--gpu 24GiB`) or the GPU NVML sees (`--gpu auto`).
// Prints every phase's peak with its terms, the verdict, the assumptions and the changes that
// make every phase fit; `--json` the same as one object; `--explain` the spec it read.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "daemon/render/text_output.h"

namespace oomtriage::daemon {

struct CheckOptions {
  std::optional<std::string> config;  // CONFIG
  std::optional<std::string> spec;    // --spec FILE.json
  std::vector<std::string> command;   // after --
  std::string trainer = "auto";
  std::optional<std::string> model;  // --model: the family, over what the input names
  std::string gpu = "auto";          // "24GiB", "24" (GiB), "auto"
  bool json = false;
  bool explain = false;
  std::string store;  // the state dir's store: the fleet's corrections are read from it
  ColorMode color = ColorMode::kAuto;
};

// 0 the job fits (or is tight), 3 it will not fit, 4 unknown (the model is not known, or a value
// the verdict depends on could not be read: never "fits" in its place), 1 bad input (exactly one of
// CONFIG, --spec and COMMAND is needed), 2 the environment failed (a file that cannot be read;
// `--gpu auto` without NVML: there is no silent default card).
int run_check(const CheckOptions& options);

}  // namespace oomtriage::daemon
