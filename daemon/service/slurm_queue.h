// daemon/service/slurm_queue.h
//
// The Slurm jobs running on this node and the files their output goes to, from squeue: the
// daemon follows those files as it follows logs found by a glob (a `source: slurm` watch rule).
// squeue prints the output path with its %j/%A/%a patterns expanded (--expand-patterns); each
// field is given a width, so a path is cut only past 4096 bytes. squeue runs on a thread of its
// own every poll interval, never in the daemon's event loop.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "parsers/result.h"

namespace oomtriage::daemon {

struct SlurmJob {
  std::string job_id;         // 1234, or 1234_7 for an array element
  std::string array_job_id;   // %A: the array's job id (the job id when not an array)
  std::string array_task_id;  // %a, empty when not an array
  std::string stdout_path;    // where its output goes, patterns expanded
};

// The squeue command line for the jobs of `host` (short name).
std::vector<std::string> squeue_command(const std::string& host);

// Reads squeue's output for squeue_command(): three fields, then the path to the line's end.
// Lines that do not read so are skipped (a header, a pending job without a path).
std::vector<SlurmJob> parse_squeue(std::string_view output);

// This machine's short host name, as Slurm names nodes.
std::string short_host_name();

// How a job ended, from `sacct -j ID -X -n -P -o JobID,State,ExitCode`: OUT_OF_MEMORY is the
// cgroup's kill (host RAM), a CUDA OOM is a plain FAILED (the log tells that one).
struct SlurmEnd {
  std::string job_id;
  std::string state;      // COMPLETED, FAILED, OUT_OF_MEMORY, CANCELLED, TIMEOUT, ...
  std::string exit_code;  // "0:125"
};
std::vector<std::string> sacct_command(const std::string& job_id);
// The line of `job_id` in sacct's parsable output, its state's first word ("CANCELLED by 1000"
// is CANCELLED); nothing while the job is not in a final state yet (RUNNING, COMPLETING, ...).
std::optional<SlurmEnd> parse_sacct(std::string_view output, const std::string& job_id);

// Runs `argv` (found in PATH) and returns what it printed on stdout when it exits 0 within
// `timeout`; otherwise an error naming the command and why.
Result<std::string> run_command(const std::vector<std::string>& argv,
                                std::chrono::milliseconds timeout);

// Runs squeue every `interval` on its own thread and hands each answer to `on_jobs`, on that
// thread (the daemon posts it to its loop). The first run is at once.
class SlurmPoller {
 public:
  using OnJobs = std::function<void(Result<std::vector<SlurmJob>>)>;
  // A job it saw running left the queue: sacct's final word on it, asked at the next polls
  // until sacct has one (given up after ten).
  using OnEnded = std::function<void(SlurmJob, SlurmEnd)>;
  SlurmPoller(std::chrono::milliseconds interval, OnJobs on_jobs, OnEnded on_ended = nullptr);
  ~SlurmPoller();
  SlurmPoller(const SlurmPoller&) = delete;
  SlurmPoller& operator=(const SlurmPoller&) = delete;

 private:
  void loop();

  void judge_ended(const std::vector<SlurmJob>& running);

  std::chrono::milliseconds interval_;
  OnJobs on_jobs_;
  OnEnded on_ended_;
  std::vector<SlurmJob> running_;                 // at the last poll
  std::vector<std::pair<SlurmJob, int>> ending_;  // left the queue; sacct asked this many times
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace oomtriage::daemon
