// daemon/daemon_config.h
//
// The daemon's YAML config (docs/design.md "Daemon config"): where the store lives, which logs
// to watch (globs, the trainer, how the job is named, where its config is), the alert receivers
// and the metrics listener. Every mistake is refused at load with the file, line and reason, so
// SIGHUP can keep the old config when the new one is bad. `watch DIR...` builds one inline.
#pragma once

#include <string>
#include <vector>

#include "parsers/event.h"
#include "parsers/result.h"

namespace oomtriage::daemon {

struct WatchRule {
  std::string logs;  // a glob: /srv/ai-toolkit/output/*/log.txt
  parsers::Trainer trainer = parsers::Trainer::kUnknown;  // kUnknown = auto
  std::string job = "{parent}";  // {parent}: the log's folder name, {stem}: its name
  std::string config;            // "{dir}/.job_config.json"; empty: the trainer's default
};

struct Receiver {
  std::string name;  // "slack", "webhook-2": the outbox's receiver key
  std::string type;
};

struct DaemonConfig {
  std::string source;  // the file it came from, or "inline"
  std::string state_dir;
  std::vector<WatchRule> watch;
  std::vector<Receiver> alerts;
  std::string metrics_listen;
  int rescan_seconds = 10;
  // How long a file must be quiet before an open incident is reported: AI Toolkit prints the
  // error line and then the traceback that names the phase, in one burst.
  int settle_ms = 25;
  // A busy log is read at most this often; a log that was quiet is read at once. Each read costs
  // a few system calls, so this is what keeps 1,000 busy logs cheap.
  int read_interval_ms = 500;
};

Result<DaemonConfig> load_daemon_config(const std::string& path);
Result<DaemonConfig> parse_daemon_config(const std::string& text, const std::string& source);

// `oomtriage watch DIR...`: AI Toolkit's layout under each training folder.
DaemonConfig inline_watch_config(const std::vector<std::string>& dirs);

// Expands {parent}, {dir} and {stem} for one log path.
std::string expand_template(const std::string& pattern, const std::string& log_path);

}  // namespace oomtriage::daemon
