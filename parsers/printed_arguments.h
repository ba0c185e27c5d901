// parsers/printed_arguments.h
//
// The job's settings as a log prints them at start: Python's `Namespace(a=1, b='x', ...)`
// (diffusers' and kohya's scripts when they log their args), HF's `TrainingArguments(` block
// (one `name=value,` per line), the command line a launch script echoes, and the config files a
// trainer says it loads (kohya's
// `Loading settings from config.toml...`, `Loading dataset config from dataset.toml`). The
// analyzer collects them from the first records of a log; the job registry reads the job's
// config through them. Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace oomtriage::parsers {

using Arguments = std::vector<std::pair<std::string, std::string>>;

// Every `name=value` of the first `Namespace(...)` in `text`, values as printed (quotes kept).
// Empty when `text` holds no Namespace.
Arguments parse_namespace(std::string_view text);

// The arguments of a trainer's command line echoed into the log (`accelerate launch ...
// train_network.py --train_batch_size 2 --gradient_checkpointing`): every `--name value` after
// the script, a bare `--flag` as True. Empty when `text` is not such a command line.
Arguments parse_command_line(std::string_view text);

// One `name=value,` line of a printed dataclass (HF's TrainingArguments), else nullopt.
std::optional<std::pair<std::string, std::string>> parse_field_line(std::string_view text);

struct NamedConfig {
  std::string path;
  bool dataset = false;  // kohya's --dataset_config
};

// A line where a trainer names the config file it loads, else nullopt.
std::optional<NamedConfig> named_config_file(std::string_view text);

// Sample lines of each shape, for the pattern tests.
const std::vector<std::string_view>& printed_argument_samples();

}  // namespace oomtriage::parsers
