// daemon/cli/trainer_command.h
//
// What a trainer's own command line says about its job before it runs: the config file it names
// ("run.py job.yaml", "--config_file x.toml", "--config=x.json"). `run` starts the job from it
// (daemon/cli/run_command.cc) and `check -- COMMAND` reads the job from it
// (daemon/cli/check_input.cc).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace oomtriage::daemon {

// A name a trainer's config file has: .yaml, .yml, .json or .toml.
bool is_config_name(const std::filesystem::path& path);

// The first argument after the program that is an existing config file ("run.py job.yaml",
// "--config_file x.toml", "--config=x.json"); nullopt when there is none.
std::optional<std::string> config_in_command(const std::vector<std::string>& argv);

}  // namespace oomtriage::daemon
