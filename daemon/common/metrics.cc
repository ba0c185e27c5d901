// daemon/common/metrics.cc: rendering. Counters end in _total; every family has HELP and TYPE.
#include "daemon/common/metrics.h"

#include <fmt/format.h>

namespace oomtriage::daemon {

std::string escape_label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string Metrics::render() const {
  std::string out;
  const auto family = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  family("oomtriage_events_total", "counter", "Out-of-memory events stored, by kind and phase.");
  for (const auto& [key, n] : events) {
    out += fmt::format("oomtriage_events_total{{kind=\"{}\",phase=\"{}\"}} {}\n",
                       escape_label(key.first), escape_label(key.second), n);
  }
  family("oomtriage_job_gpu_memory_bytes", "gauge",
         "GPU memory a running job's processes hold now, by job and card (NVML).");
  for (const auto& [key, bytes] : job_gpu_memory) {
    out += fmt::format("oomtriage_job_gpu_memory_bytes{{job=\"{}\",gpu=\"{}\"}} {}\n",
                       escape_label(key.first), key.second, bytes);
  }
  family("oomtriage_gpu_other_processes_bytes", "gauge",
         "GPU memory held now by processes of no followed job, by card (NVML).");
  for (const auto& [gpu, bytes] : gpu_other_memory) {
    out += fmt::format("oomtriage_gpu_other_processes_bytes{{gpu=\"{}\"}} {}\n", gpu, bytes);
  }
  family("oomtriage_gpu_not_answering", "gauge",
         "1 while a card's NVML call has not returned past its deadline (a GPU off the bus or a "
         "stuck driver): its memory timeline has a gap.");
  for (const auto& [gpu, silent] : gpu_not_answering) {
    out += fmt::format("oomtriage_gpu_not_answering{{gpu=\"{}\"}} {}\n", gpu, silent);
  }
  family("oomtriage_gpu_stalls_total", "counter",
         "Times a card's NVML call did not return within its deadline.");
  out += fmt::format("oomtriage_gpu_stalls_total {}\n", gpu_stalls);
  family("oomtriage_reloads_total", "counter", "SIGHUP reloads run.");
  out += fmt::format("oomtriage_reloads_total {}\n", reloads);
  family("oomtriage_reloads_coalesced_total", "counter",
         "SIGHUPs that came while a reload was pending: the pending one reads the file then.");
  out += fmt::format("oomtriage_reloads_coalesced_total {}\n", reloads_coalesced);
  family("oomtriage_near_oom_warnings_total", "counter",
         "TrainingNearOOM warnings sent: a running job's GPU memory near its card's limit.");
  out += fmt::format("oomtriage_near_oom_warnings_total {}\n", near_oom_warnings);
  family("oomtriage_jobs_stalled", "gauge",
         "Running jobs whose log has been silent past stalled_after_seconds.");
  out += fmt::format("oomtriage_jobs_stalled {}\n", stalled_jobs.size());
  family("oomtriage_job_stalled", "gauge",
         "1 for each stalled job, by name (a job stalls rarely: the names stay few).");
  for (const auto& [job, logs] : stalled_jobs) {
    if (logs > 0) out += fmt::format("oomtriage_job_stalled{{job=\"{}\"}} 1\n", escape_label(job));
  }
  family("oomtriage_stalled_warnings_total", "counter", "TrainingStalled warnings sent.");
  out += fmt::format("oomtriage_stalled_warnings_total {}\n", stalled_warnings);
  family("oomtriage_files_watched", "gauge", "Log files followed now.");
  out += fmt::format("oomtriage_files_watched {}\n", files_watched);
  family("oomtriage_bytes_read_total", "counter", "Bytes read from followed logs.");
  out += fmt::format("oomtriage_bytes_read_total {}\n", bytes_read);
  family("oomtriage_records_total", "counter", "Records (lines and progress frames) analysed.");
  out += fmt::format("oomtriage_records_total {}\n", records);
  family("oomtriage_handler_failures_total", "counter",
         "Handlers of the event loop that threw; the loop went on (the journal names each).");
  out += fmt::format("oomtriage_handler_failures_total {}\n", handler_failures);
  family("oomtriage_files_closed_idle_total", "counter",
         "Idle logs closed to stay within the descriptor budget (reopened when they grow).");
  out += fmt::format("oomtriage_files_closed_idle_total {}\n", files_closed_idle);
  family("oomtriage_store_failures_total", "counter",
         "Commits the store refused (disk full, locked); the logs are read again from the last "
         "commit.");
  out += fmt::format("oomtriage_store_failures_total {}\n", store_failures);
  family("oomtriage_alert_storms_total", "counter",
         "Alert messages that listed several OOMs that came due within a receiver's "
         "group_wait_ms.");
  out += fmt::format("oomtriage_alert_storms_total {}\n", alert_storms);
  family("oomtriage_store_damaged_total", "counter",
         "Store calls SQLite answered with 'database disk image is malformed' or 'not a "
         "database'; the store is then moved aside and salvaged.");
  out += fmt::format("oomtriage_store_damaged_total {}\n", store_damaged);
  family("oomtriage_store_recoveries_total", "counter",
         "Damaged stores moved aside and salvaged into a fresh one since the daemon started.");
  out += fmt::format("oomtriage_store_recoveries_total {}\n", store_recoveries);
  family("oomtriage_store_errors_total", "counter",
         "Store calls besides event commits that failed, by operation (job rows, snapshots, "
         "history reads, alert bookkeeping).");
  for (const auto& [operation, n] : store_errors) {
    out += fmt::format("oomtriage_store_errors_total{{operation=\"{}\"}} {}\n",
                       escape_label(operation), n);
  }
  family("oomtriage_parse_errors_total", "counter",
         "Input that could not be used as it was, by reason.");
  for (const auto& [reason, n] : parse_errors) {
    out +=
        fmt::format("oomtriage_parse_errors_total{{reason=\"{}\"}} {}\n", escape_label(reason), n);
  }
  family("oomtriage_alerts_total", "counter", "Alert delivery attempts, by receiver and result.");
  for (const auto& [key, n] : alerts) {
    out += fmt::format("oomtriage_alerts_total{{receiver=\"{}\",result=\"{}\"}} {}\n",
                       escape_label(key.first), escape_label(key.second), n);
  }
  family("oomtriage_preflight_checks_total", "counter",
         "Job configs judged against the GPU before their first step, by verdict.");
  for (const auto& [verdict, n] : preflight_checks) {
    out += fmt::format("oomtriage_preflight_checks_total{{verdict=\"{}\"}} {}\n",
                       escape_label(verdict), n);
  }
  family("oomtriage_outbox_pending", "gauge", "Alerts waiting for delivery.");
  out += fmt::format("oomtriage_outbox_pending {}\n", outbox_pending);
  if (fleet_configured) {
    family("oomtriage_fleet_up", "gauge",
           "1 when the last attempt to ship reached the fleet store.");
    out += fmt::format("oomtriage_fleet_up {}\n", fleet_up ? 1 : 0);
    family("oomtriage_fleet_backlog", "gauge", "Rows waiting to be shipped to the fleet store.");
    out += fmt::format("oomtriage_fleet_backlog {}\n", fleet_backlog);
    family("oomtriage_fleet_shipped_total", "counter", "Rows shipped to the fleet store.");
    out += fmt::format("oomtriage_fleet_shipped_total {}\n", fleet_shipped);
  }
  family("oomtriage_build_info", "gauge", "The running oomtriage's version.");
  out += fmt::format("oomtriage_build_info{{version=\"{}\"}} 1\n", escape_label(version));
  return out;
}

}  // namespace oomtriage::daemon
