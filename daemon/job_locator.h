// daemon/job_locator.h
//
// Finds the job a log belongs to: its config beside the log (AI Toolkit writes .job_config.json
// and config.yaml into the job folder), the config's hash, and the job name (the config's
// config.name, else what the log itself prints, else the folder name).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace oomtriage::daemon {

struct JobInfo {
  std::string name;
  std::optional<std::string> config_path;
  std::optional<std::string> config_sha256;
};

struct JobLookup {
  std::optional<JobInfo> job;
  std::string warning;  // one line, empty when the config was fine or absent
  std::string error;    // set when an explicitly given config cannot be read
};

// `explicit_config` is scan's --config; `name_from_log` the analyzer's job name.
JobLookup locate_job(const std::filesystem::path& log,
                     const std::optional<std::filesystem::path>& explicit_config,
                     const std::optional<std::string>& name_from_log);

// Hex SHA-256 of `bytes`.
std::string sha256_hex(std::string_view bytes);

}  // namespace oomtriage::daemon
