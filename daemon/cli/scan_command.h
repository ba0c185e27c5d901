// daemon/cli/scan_command.h
//
// `oomtriage scan LOG... [--config FILE] [--trainer NAME] [--json]`: reads each log through the
// streaming analyzer (the same one the daemon uses), finds its job, prints text or JSON.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "daemon/render/text_output.h"
#include "daemon/service/job_locator.h"
#include "parsers/event.h"
#include "parsers/result.h"

namespace oomtriage::daemon {

struct ScanOptions {
  std::vector<std::string> logs;
  std::optional<std::string> config;
  parsers::Trainer trainer = parsers::Trainer::kUnknown;
  bool json = false;
  bool fail_on_oom = false;  // exit kExitFatalOom when a log shows a fatal OOM
  ColorMode color = ColorMode::kAuto;
  std::string store;  // read (never created): a job's history changes the order of its fixes
  // A folder among `logs` is walked for these file names (fnmatch; with a '/', matched against
  // the path below the folder); empty: log.txt, *.log, *.out, *.err and their rotations.
  std::vector<std::string> globs;
};

// The logs under `dir`, sorted: file names that match `globs` (see ScanOptions), hidden folders
// skipped, symbolic links to folders not followed.
std::vector<std::string> logs_under(const std::string& dir, const std::vector<std::string>& globs);

// One log read as `scan` reads it, through the streaming analyzer; what its reader should know
// (an empty file, a binary one, records cut) said on stderr. An error when it cannot be read.
// `scan` and `report LOG` (daemon/cli/log_story.h) both read through it.
Result<ScannedLog> analyse_log(const std::string& path, parsers::Trainer trainer);

// The log's job found (locate_job(), `config` when the user named one) and its incident's fixes
// ranked into `log` with the job's history from `store` (read, never made). Returns the lookup for
// what else it read (the config's bytes); an error when the config cannot be read or is refused.
Result<JobLookup> rank_log(ScannedLog& log, const std::optional<std::filesystem::path>& config,
                           const std::string& store);

// `scan --follow FILE`: reads it to its end, then as it grows, printing each incident when it
// settles (text, or one JSON object per line with `json`), until SIGINT or SIGTERM.
int run_follow(const std::string& path, const ScanOptions& options);

// Returns the process exit code: 0 analysed, 1 bad input (a directory, a bad --config), 2 an
// unreadable file, 3 (with fail_on_oom) a fatal OOM found. Every log is attempted; bad input and
// unreadable files win over 3. LOG "-" is standard input.
int run_scan(const ScanOptions& options);

}  // namespace oomtriage::daemon
