// daemon/cli/check_input.h
//
// What `oomtriage check` was given, read into what the pre-flight (triage/preflight.h) takes: a
// spec file (`--spec FILE.json`), a job's config (CONFIG: any file the job registry reads, read
// by daemon/service/job_locator.h), or a trainer's command line (`-- COMMAND`: the config file it
// names, found as `run` finds it, else the arguments it passes, read as the registry reads the
// command line a log echoes). What could not be read cleanly becomes an assumption shown beside
// the memory model's own; only a file that does not parse at all is an error.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "parsers/event.h"
#include "parsers/job_config.h"
#include "parsers/launcher.h"
#include "parsers/native_config.h"
#include "parsers/result.h"
#include "triage/memory_spec.h"

namespace oomtriage::daemon {

struct CheckInput {
  std::optional<triage::MemorySpec> spec;    // --spec
  std::optional<parsers::JobConfig> config;  // CONFIG or COMMAND
  // Bad fields (file, line, reason), dataset configs that cannot be read, arguments not read.
  std::vector<std::string> assumptions;
  // Issue 44, one reading everywhere: the config files read, main first (empty for a spec or a
  // command line's own arguments); `run`'s pre-flight digests them.
  std::vector<parsers::NativeFile> files;
  // Issue 45, command lines: how the command's launcher spreads an image trainer's job over GPUs
  // (its files read), kept beside the config so that the job keeps its config's fixes, priced
  // per GPU (triage/preflight.h). Unset when the launch changes nothing (one process, no sharding).
  std::optional<parsers::DistributedSetup> launch;
};

// Errors: kIo when a file cannot be read; kBadInput naming the file (and line, when the parser
// says) when it does not parse or a field has the wrong type (a spec), or when a command line
// names neither a config file nor arguments of a known trainer.
Result<CheckInput> read_spec_input(const std::string& path);
Result<CheckInput> read_config_input(const std::string& path, parsers::Trainer trainer);
Result<CheckInput> read_command_input(const std::vector<std::string>& argv,
                                      parsers::Trainer trainer);

}  // namespace oomtriage::daemon
