// daemon/cli/launch_input.h
//
// `check`'s reading of what decides memory per GPU and of decoder-LLM fine-tunes (issue 44): the
// files a command line's launcher names (an accelerate YAML, a DeepSpeed JSON: parsers/
// distributed_config.h) and an LLM trainer's config or command (parsers/llm_config.h), read here
// because reading a file is I/O; the readers themselves are pure. daemon/cli/check_input.cc calls
// these before its image-trainer readers.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "daemon/cli/check_input.h"
#include "parsers/launcher.h"
#include "parsers/result.h"

namespace oomtriage::daemon {

// The setup with the accelerate config and DeepSpeed JSON it names read into it (the command
// line's own words win); a file that cannot be read becomes an assumption in `said`.
parsers::DistributedSetup with_distributed_files(parsers::DistributedSetup setup,
                                                 const std::string& relative_to,
                                                 std::vector<std::string>& said);

// An LLM trainer's config file as check's input; nullopt when the file is not an LLM trainer's
// (it goes on to the image trainers' readers). kBadInput when it does not parse.
Result<std::optional<CheckInput>> read_llm_config_input(const std::string& path);

// A command line that runs an LLM trainer (after its launcher words) as check's input; nullopt
// when it does not.
std::optional<CheckInput> read_llm_command_input(const parsers::LaunchedCommand& launched);

// The launcher's setup (its files already read) kept beside an image trainer's config when it
// spreads the job: more than one process, sharding, offloading or context parallelism.
void apply_launch(CheckInput& input, const parsers::DistributedSetup& setup);

}  // namespace oomtriage::daemon
