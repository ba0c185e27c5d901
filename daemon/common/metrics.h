// daemon/common/metrics.h
//
// The daemon's Prometheus metrics, in the text exposition format: served at /metrics on the
// configured address (loopback by default) and/or written to a node_exporter textfile. No
// per-job labels but one: jobs are unbounded, so their detail stays in the store (`oomtriage
// report`); the GPU memory gauge names the jobs on a GPU now, which the cards bound.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace oomtriage::daemon {

struct Metrics {
  std::map<std::pair<std::string, std::string>, uint64_t> events;  // (kind, phase)
  uint64_t files_watched = 0;
  uint64_t bytes_read = 0;
  uint64_t records = 0;
  std::map<std::string, uint64_t> parse_errors;                    // reason
  std::map<std::pair<std::string, std::string>, uint64_t> alerts;  // (receiver, result)
  uint64_t alert_storms = 0;  // messages that listed several alerts (group_wait_ms)
  std::map<std::string, uint64_t> preflight_checks;  // verdict: fits | tight | will_not_fit
  uint64_t outbox_pending = 0;
  uint64_t store_failures = 0;    // commits the store refused (each is retried, nothing is lost)
  uint64_t store_damaged = 0;     // SQLite said the store was damaged (then it is recovered)
  uint64_t store_recoveries = 0;  // damaged stores moved aside and salvaged since the start
  // Store calls other than event commits that failed (a job row, a snapshot, a history read),
  // by operation: each is retried at the next event or told in a log line, never silent.
  std::map<std::string, uint64_t> store_errors;
  // Handlers of the loop that threw (daemon/common/guarded_run.h); the loop went on.
  uint64_t handler_failures = 0;
  uint64_t files_closed_idle = 0;  // idle logs closed to stay within the descriptor budget
  // GPU memory now (daemon/service/gpu_monitor.h): each sampled job's on each card, and what
  // processes of no followed job hold per card. Empty while nothing is sampled.
  std::map<std::pair<std::string, unsigned>, uint64_t> job_gpu_memory;  // (job, gpu)
  std::map<unsigned, uint64_t> gpu_other_memory;                        // gpu
  uint64_t near_oom_warnings = 0;
  // Running jobs whose log went silent past stalled_after_seconds (daemon/service/daemon_live.cc),
  // by name: few at any time, so each is named.
  std::map<std::string, uint64_t> stalled_jobs;  // job -> how many of its logs are stalled
  uint64_t stalled_warnings = 0;
  // Cards whose NVML call is in flight past its deadline now (1), and how often one stopped
  // answering (daemon/common/gpu_sample_worker.h).
  std::map<unsigned, int> gpu_not_answering;
  uint64_t gpu_stalls = 0;
  uint64_t reloads = 0;            // SIGHUP reloads run (each read the file once or twice)
  uint64_t reloads_coalesced = 0;  // SIGHUPs that came while a reload was pending
  bool fleet_configured = false;   // the fleet figures are shown only with a fleet store
  uint64_t fleet_backlog = 0;
  uint64_t fleet_shipped = 0;
  bool fleet_up = false;
  std::string version;

  // The text exposition format (version 0.0.4), HELP and TYPE lines included.
  std::string render() const;
};

// Escapes a label value for the text format (backslash, quote, newline).
std::string escape_label(const std::string& value);

}  // namespace oomtriage::daemon
