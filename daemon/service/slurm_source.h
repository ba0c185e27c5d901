// daemon/service/slurm_source.h
//
// The logs of a `source: slurm` rule: the output files of the Slurm jobs running on this node, as
// squeue names them (asked on its own thread every poll_seconds, slurm_queue.h), each followed
// under the rule. When a job leaves the queue, sacct's word on it is its log's last: a job the
// kernel killed for its cgroup's memory limit (OUT_OF_MEMORY) that the log does not show becomes
// a host OOM at the log's end.
#pragma once

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/io_context.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/service/followed_logs.h"
#include "daemon/service/slurm_queue.h"

namespace oomtriage::daemon {

class SlurmSource {
 public:
  // `found_logs` runs on the loop when squeue named new output files (the caller scans them).
  SlurmSource(boost::asio::io_context& io, FollowedLogs& logs, LogHost& host,
              std::function<void()> found_logs, bool verbose);

  // Starts asking squeue under the first `source: slurm` rule of `rules`, or stops asking when
  // there is none. The files named so far are forgotten until squeue names them again.
  void configure(const std::vector<WatchRule>& rules);
  // The output files squeue named, with the rule they are followed under.
  const std::map<std::string, WatchRule>& paths() const { return paths_; }
  std::optional<WatchRule> rule_of(const std::string& path) const;

 private:
  void on_jobs(const Result<std::vector<SlurmJob>>& jobs);
  void on_ended(const SlurmJob& job, const SlurmEnd& end);

  boost::asio::io_context& io_;
  FollowedLogs& logs_;
  LogHost& host_;
  std::function<void()> found_logs_;
  bool verbose_;
  std::optional<WatchRule> rule_;
  std::map<std::string, WatchRule> paths_;
  std::string error_;                    // logged once until squeue answers
  std::unique_ptr<SlurmPoller> poller_;  // last: stopped before the rest goes
};

}  // namespace oomtriage::daemon
