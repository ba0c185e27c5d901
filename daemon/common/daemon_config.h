// daemon/common/daemon_config.h
//
// The daemon's YAML config (docs/design.md "Daemon config"): where the store lives, which logs
// to watch (globs, the trainer, how the job is named, where its config is), the alert receivers
// and the metrics listener. Every mistake is refused at load with the file, line and reason, so
// SIGHUP can keep the old config when the new one is bad. `watch DIR...` builds one inline.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "parsers/event.h"
#include "parsers/result.h"

namespace oomtriage::daemon {

struct WatchRule {
  // files: plain logs; kubernetes: container logs in kubelet's CRI format, by default every
  // container's under /var/log/pods, each job named "{namespace}/{pod_owner}"; slurm: the output
  // files of the Slurm jobs running on this node, from squeue every poll_seconds, each job named
  // after its file ("{stem}": slurm-1234, slurm-1234_7).
  std::string source = "files";
  int poll_seconds = 15;
  std::string logs;  // a glob: /srv/ai-toolkit/output/*/log.txt
  parsers::Trainer trainer = parsers::Trainer::kUnknown;  // kUnknown = auto
  std::string job = "{parent}";  // {parent}: the log's folder name, {stem}: its name
  std::string config;            // "{dir}/.job_config.json"; empty: the trainer's default
  // Where rotated logs go besides their own folder and its logs/ (AI Toolkit's restarts):
  // logrotate's olddir, say "{dir}/old" or "/var/log/archive".
  std::vector<std::string> rotated_to;

  // A reload keeps the logs of a rule it did not change.
  bool operator==(const WatchRule&) const = default;
};

// An alert receiver. Secrets (a Slack or Discord URL carries its token; an HMAC key) come from
// files or the environment and are never logged: logs name the receiver and redact_url() it.
struct Receiver {
  std::string name;  // the outbox's receiver key: `name:` or "<type>-<n>"
  std::string type;  // slack | discord | webhook | alertmanager
  std::string url;
  std::string hmac_secret;  // webhook only: signs the body (Standard Webhooks headers)
  std::string ca_file;      // trust this CA instead of the system store (private receivers)
  int timeout_ms = 10000;
  int retry_initial_ms = 1000;  // backoff: initial delay, doubled per attempt, +-50% jitter
  int retry_max_ms = 300000;
  int retry_horizon_seconds = 86400;  // then the alert is kept as failed
  // Storm control: alerts that come due within this window of the first go out as one message
  // listing them (each keeps its outbox row and idempotency key). Alertmanager groups by itself
  // (0); a person reads Slack, Discord and webhooks (2,000 ms when a config names the receiver).
  int group_wait_ms = 0;
};

// Self-healing of AI Toolkit UI jobs (opt-in): after a fatal OOM of a matching job, the next
// resume-safe fix is written into the job's config in the UI's database and the job re-queued.
struct HealConfig {
  // Where the UI is: its HTTP routes (preferred: they keep Prisma's bookkeeping right), its
  // database (read directly, and written when the UI does not answer), or both. Neither: off.
  std::string ui_url;              // http://127.0.0.1:8675
  std::string ui_token;            // AI_TOOLKIT_AUTH, read from `token_file:`
  std::string ai_toolkit_db;       // <TOOLKIT_ROOT>/aitk_db.db
  std::vector<std::string> jobs;   // job-name globs; empty: every job
  std::vector<std::string> fixes;  // allowed fix ids; empty: every resume-safe fix
  int max_attempts = 3;
  // How long to wait for the UI to mark the crashed job failed before giving up on it.
  int wait_seconds = 300;

  bool enabled() const { return !ui_url.empty() || !ai_toolkit_db.empty(); }
};

struct DaemonConfig {
  std::string source;  // the file it came from, or "inline"
  std::string state_dir;
  std::vector<WatchRule> watch;
  std::vector<Receiver> alerts;
  std::string metrics_listen;    // "127.0.0.1:9839": serve /metrics there
  std::string metrics_textfile;  // write the metrics here for node_exporter's textfile collector
  int rescan_seconds = 10;
  // Recovered OOMs of one job within this window are one message (AI Toolkit skips batches in
  // bursts); a fatal OOM of the same job sends the burst at once.
  int alert_group_seconds = 30;
  std::string host;  // in alerts and on fleet store rows; default: this machine's host name
  // `store: postgresql://...`: the fleet store this node ships into (db/fleet_store.h); its
  // own SQLite store stays where it is and keeps working when the fleet store is down.
  std::string store;
  // `fleet: keep_days: 90`: jobs not seen for this many days leave the fleet store with all
  // their rows (FleetStore::prune, a batch of jobs per transaction), once a day; 0 keeps all.
  int fleet_keep_days = 0;
  // The very first start reads the logs already there from their end (no alerts for old
  // crashes); `backfill: true` (or --backfill) reads them from their beginning instead.
  bool backfill = false;
  // How long a file must be quiet before an open incident is reported: AI Toolkit prints the
  // error line and then the traceback that names the phase, in one burst.
  int settle_ms = 25;
  // A busy log is read at most this often; a log that was quiet is read at once. Each read costs
  // a few system calls, so this is what keeps 1,000 busy logs cheap.
  int read_interval_ms = 1000;
  // How often each busy log is looked at for a completed record between its polls (one pread;
  // read_scheduler.h); 0: never, a busy log's OOM then waits for its poll.
  int burst_check_ms = 200;
  // The GPU memory timeline (docs/gpu-memory.md): every card's memory and its processes are
  // sampled through NVML this often (five times as often while a job is above 90% of what it
  // may use); 0: off. A machine without NVML logs one line and samples nothing.
  int gpu_sample_ms = 1000;
  // A job whose sampled memory reaches this share of what it may use on its card (the card less
  // other processes) gets one TrainingNearOOM warning per run (again only if it rises further).
  double near_oom_share = 0.95;
  // A running job whose log has not grown for this long (or for 20 times its own step time,
  // when that is longer) is stalled: one TrainingStalled warning, resolved when the log grows;
  // 0: off.
  int stalled_after_seconds = 900;
  // The address people open `oomtriage serve` at ("https://oom.example.com"), as Alertmanager's
  // --web.external-url: every alert then links to its job's page (<web_url>/job/<name>). "":
  // no links.
  std::string web_url;
  HealConfig heal;
  // Pre-flight (triage/preflight.h): a job's config is judged against the GPU when the daemon
  // first sees it, and one predicted not to fit gets one TrainingOOMPredicted warning. "warn"
  // (the default) or "off".
  std::string preflight = "warn";
  // The card the pre-flight judges against: `gpu_memory: 24GiB`; unset (`auto`): the card-size
  // provider the daemon was given (NVML when present), and no judgement when it does not know.
  std::optional<uint64_t> gpu_memory;
  // Legal but probably mistakes, each "file:line: what": a glob under a folder that does not
  // exist or cannot be entered. The daemon logs them at start and on SIGHUP; check-config
  // prints them.
  std::vector<std::string> warnings;
};

// What check-config says of the pre-flight: "pre-flight warns against a 24.00 GiB card",
// "pre-flight warns against the card NVML reports", "pre-flight off".
std::string describe_preflight(const DaemonConfig& config);

Result<DaemonConfig> load_daemon_config(const std::string& path);
Result<DaemonConfig> parse_daemon_config(const std::string& text, const std::string& source);

// `oomtriage watch DIR...`: AI Toolkit's layout under each training folder.
DaemonConfig inline_watch_config(const std::vector<std::string>& dirs);

// A container log's place in kubelet's tree, /var/log/pods/<namespace>_<pod>_<uid>/<container>/
// <restart>.log, read from its path (no API needed): the owner is the pod's name without the
// five random characters a Job or ReplicaSet adds.
struct PodLog {
  std::string namespace_name;
  std::string pod;
  std::string owner;
  std::string container;
  std::string uid;  // the pod's UID: its processes' cgroup path carries it
};
PodLog pod_of(const std::string& log_path);

// Expands {parent}, {dir}, {stem} and, for container logs, {namespace}, {pod}, {pod_owner} and
// {container} for one log path.
std::string expand_template(const std::string& pattern, const std::string& log_path);

}  // namespace oomtriage::daemon
