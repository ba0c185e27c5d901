// daemon/service/job_locator.h
//
// The job registry: log -> trainer -> config, the one lookup behind `scan`, `fix`, `report` and
// the daemon, so that the same log gets the same verdict and the same fixes everywhere. In
// order: --config (or the daemon rule's config); the files the log says it loads (kohya's
// `Loading settings from X...`, and the --dataset_config a kohya TOML names); files beside the
// log (AI Toolkit's .job_config.json and config.yaml, SimpleTuner's config.json/config.toml,
// HF's training_args.json, a kohya config.toml), each recognised by its content; the process
// config AI Toolkit prints at the top of log.txt; the arguments a log prints
// (`Namespace(...)`, `TrainingArguments(`). What the log shows about its job is read from its
// first MiB by the same analyzer, whoever asks. A config with bad fields keeps its good ones
// (one warning line per bad field: file, line, reason).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "parsers/event.h"
#include "parsers/job_config.h"
#include "parsers/native_config.h"
#include "parsers/result.h"
#include "triage/triage_job.h"

namespace oomtriage::daemon {

struct JobLookup {
  std::optional<triage::JobInfo> job;
  std::optional<parsers::JobConfig> config;  // the typed view, when a config was read
  std::vector<parsers::NativeFile> files;    // the config files read, main first (for `fix`)
  std::string config_text;                   // the main config file's bytes (snapshots)
  std::string config_problem;  // why there is no config, in words ("no job config was found")
  // The config the log printed (AI Toolkit's process config) beside a file that was read: what
  // the run had, when the file changed since (triage/run_config.h).
  std::optional<parsers::JobConfig> run_config;
  std::string warning;  // lines for stderr, empty when there is nothing to say
};

// `trainer` is the trainer the caller knows (scan --trainer, the daemon rule, the analysis so
// far), kUnknown to let the log and the files tell. `facts` is used only when the log cannot be
// re-read (standard input).
// An error when an explicitly given config cannot be read.
Result<JobLookup> locate_job(const std::filesystem::path& log,
                             const std::optional<std::filesystem::path>& explicit_config,
                             parsers::Trainer trainer, const parsers::LogAnalysis& facts);

// One config file the user named, read as locate_job() reads an explicit --config (`check
// CONFIG`, `check -- COMMAND`): its trainer from its content, else `trainer`, else AI Toolkit's
// YAML/JSON; kohya's dataset config beside it (the one its TOML names, else
// `named_dataset_config`).
struct ConfigFile {
  parsers::JobConfig config;               // its bad fields are in config.problems
  std::vector<parsers::NativeFile> files;  // main first
  std::vector<std::string> warnings;       // a dataset config that cannot be read
};
// A kIo error when the file cannot be read; a kBadInput error (file, line, reason) when it does
// not parse.
Result<ConfigFile> read_config_file(const std::filesystem::path& path, parsers::Trainer trainer,
                                    const std::optional<std::string>& named_dataset_config);

// The same for a config whose bytes were read before (a snapshot the store keeps): `path` is
// where they came from, for the format and a kohya dataset config beside it.
Result<ConfigFile> read_config_text(const std::filesystem::path& path, const std::string& text,
                                    parsers::Trainer trainer,
                                    const std::optional<std::string>& named_dataset_config);

}  // namespace oomtriage::daemon
