// daemon/service/slurm_source.cc: squeue's output files followed, sacct's last word on each.
#include "daemon/service/slurm_source.h"

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include "daemon/common/journal_log.h"

namespace oomtriage::daemon {

SlurmSource::SlurmSource(boost::asio::io_context& io, FollowedLogs& logs, LogHost& host,
                         std::function<void()> found_logs, bool verbose)
    : io_(io), logs_(logs), host_(host), found_logs_(std::move(found_logs)), verbose_(verbose) {}

void SlurmSource::configure(const std::vector<WatchRule>& rules) {
  poller_.reset();
  paths_.clear();
  rule_.reset();
  for (const WatchRule& rule : rules) {
    if (rule.source == "slurm") {
      rule_ = rule;
      break;
    }
  }
  if (!rule_) return;
  poller_ = std::make_unique<SlurmPoller>(
      std::chrono::seconds(rule_->poll_seconds),
      [this](Result<std::vector<SlurmJob>> jobs) {
        boost::asio::post(io_, [this, jobs = std::move(jobs)] { on_jobs(jobs); });
      },
      [this](SlurmJob job, SlurmEnd end) {
        boost::asio::post(
            io_, [this, job = std::move(job), end = std::move(end)] { on_ended(job, end); });
      });
}

std::optional<WatchRule> SlurmSource::rule_of(const std::string& path) const {
  if (auto it = paths_.find(path); it != paths_.end()) return it->second;
  return std::nullopt;
}

void SlurmSource::on_jobs(const Result<std::vector<SlurmJob>>& jobs) {
  if (!rule_) return;  // a reload took the rule away
  if (!jobs) {
    if (error_ != jobs.error().message) {
      log_line(kWarning, "slurm: {} (will ask again in {} s)", jobs.error().message,
               rule_->poll_seconds);
      error_ = jobs.error().message;
    }
    return;
  }
  error_.clear();
  bool found = false;
  for (const SlurmJob& job : *jobs) {
    if (paths_.emplace(job.stdout_path, *rule_).second) {
      found = true;
      if (verbose_) log_line(kDebug, "slurm job {} writes to {}", job.job_id, job.stdout_path);
    }
  }
  if (found) found_logs_();
}

// A CUDA OOM is in the log (sacct says FAILED); a cgroup kill (OUT_OF_MEMORY) usually is too, as
// slurmstepd's "Detected 1 oom_kill event" line, but when the log does not show it (the line went
// to another file, or the node lost it) it becomes a host OOM at the log's end, in the phase and
// at the step the log was in.
void SlurmSource::on_ended(const SlurmJob& job, const SlurmEnd& end) {
  Tracked* file = logs_.find(job.stdout_path);
  if (!file) return;
  if (verbose_)
    log_line(kDebug, "slurm job {} ended {} ({})", job.job_id, end.state, end.exit_code);
  host_.read(*file);  // all it wrote, before its last word
  parsers::LogAnalyzer& analyzer = file->analyzer();
  if (analyzer.has_open_incident()) {
    analyzer.settle();
    if (!host_.commit(*file, analyzer.take_events(), /*can_rewind=*/true)) return;
  }
  if (end.state != "OUT_OF_MEMORY" || analyzer.outcome_so_far() == parsers::Outcome::kCrashedOom)
    return;
  analyzer.add_reported_event(
      parsers::OomKind::kHostKilled,
      fmt::format("Slurm job {} ended OUT_OF_MEMORY (sacct; exit code {}): the job's cgroup "
                  "reached its memory limit (host RAM) and the kernel killed it",
                  job.job_id, end.exit_code));
  // Its last word: kept by the sink if the store refuses, never read again from the file.
  host_.commit(*file, analyzer.take_events(), /*can_rewind=*/false);
}

}  // namespace oomtriage::daemon
