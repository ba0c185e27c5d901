// daemon/job_locator.h
//
// Finds the job a log belongs to and its config: --config when given, else AI Toolkit's files
// beside the log (.job_config.json, then config.yaml), else the process config AI Toolkit prints
// at the top of log.txt. Names the job (the config's config.name, else what the log prints, else
// the folder) and hashes the config file. A config that does not parse gives one warning line
// with file, line and reason, and the triage goes on without it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "parsers/event.h"
#include "parsers/job_config.h"

namespace oomtriage::daemon {

struct JobInfo {
  std::string name;
  std::optional<std::string> config_path;
  std::optional<std::string> config_sha256;
};

struct JobLookup {
  std::optional<JobInfo> job;
  std::optional<parsers::JobConfig> config;  // the typed view, when a config parsed
  std::string config_text;                   // the config file's bytes (for `fix`)
  std::string config_problem;  // why there is no config, in words ("no job config found")
  std::string warning;  // one line for stderr, empty when there is nothing to say
  std::string error;    // set when an explicitly given config cannot be read
};

JobLookup locate_job(const std::filesystem::path& log,
                     const std::optional<std::filesystem::path>& explicit_config,
                     const parsers::LogAnalysis& analysis);

// Hex SHA-256 of `bytes`.
std::string sha256_hex(std::string_view bytes);

}  // namespace oomtriage::daemon
