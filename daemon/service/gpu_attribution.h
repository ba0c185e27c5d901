// daemon/service/gpu_attribution.h
//
// Which followed job a process on a GPU works for, read from /proc, for the memory timeline
// (nvml_sampler.h gives pids, not jobs). In order of certainty:
//  1. the process, or its nearest ancestor that does, holds one of the job's logs open for
//     writing (a trainer writing its log, or the shell or launcher whose output goes to it:
//     `python train.py > log.txt` leaves the log with the shell and python both);
//  2. the process, or an ancestor, has its working folder in the job's folder;
//  3. its command line, or an ancestor's, names the job's own files: one of its logs or its
//     config file (any argument), or its folder or a folder in it as the value of an output
//     option (`--output_dir`, `--logging_dir`, `--save_path`: names_an_output()). Any other
//     path in the job's folder is something a process reads (another job's weights to resume
//     from, its images, its samples) and says nothing about whose process it is.
// When two jobs' folders hold a working folder or an output folder, the innermost job's wins.
// Reading another user's descriptors and working folder needs ptrace rights over it (the same
// user, or CAP_SYS_PTRACE); the command line does not, so a daemon running as its own user still
// attributes trainers started with their config's path. A process matched by none is "another
// process on the GPU", which is itself a cause of OOMs. NVML gives pids as the host sees them and
// paths are compared as this process sees them: the daemon runs in the host's pid and mount
// namespaces. A Kubernetes container's job is found first, by its cgroup: the pod's UID (which
// kubelet's log path carries) is in the cgroup path of every process of the pod, as
// `pod<uid>` (cgroupfs driver) or `pod<uid with '_' for '-'>.slice` (systemd driver).
// A pid is not a process: the kernel hands a freed pid out again. A caller that keeps an answer
// keeps it with start_time(), and a pid whose start time differs is another process.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace oomtriage::daemon {

struct JobFiles {
  std::string job;
  std::string folder;             // the job's folder (AI Toolkit: output/<job>), may be empty
  std::vector<std::string> logs;  // the job's followed logs, absolute
  std::string pod_uid;            // a container log's pod (daemon_config.h PodLog), else empty
  std::string config;  // the config file the daemon read for the job, absolute, may be empty
};

class GpuAttribution {
 public:
  // `proc` is where procfs is mounted.
  explicit GpuAttribution(std::string proc = "/proc") : proc_(std::move(proc)) {}

  // The job `pid` works for, or nullopt.
  std::optional<std::string> job_of(pid_t pid, const std::vector<JobFiles>& jobs) const;
  // Whether `pid` or an ancestor runs the program at `exe` (an `oomtriage run` supervising it).
  bool runs_under(pid_t pid, const std::string& exe) const;
  // When the process now at `pid` started, in clock ticks after boot (/proc/PID/stat's 22nd
  // field); nullopt when there is none (gone) or it cannot be read. With the pid, it names one
  // process for as long as the machine runs.
  std::optional<uint64_t> start_time(pid_t pid) const;

 private:
  std::vector<pid_t> lineage(pid_t pid) const;  // pid, its parent, ... up to (not with) init
  std::vector<std::string> files_written(pid_t pid) const;  // its descriptors open for writing
  std::string working_folder(pid_t pid) const;
  std::vector<std::string> arguments(pid_t pid) const;
  std::string cgroup(pid_t pid) const;
  // The job whose own file or output folder a command line names (rule 3 above).
  const JobFiles* named_by_arguments(pid_t pid, const std::vector<JobFiles>& jobs) const;

  std::string proc_;
};

// Whether `path` is `folder` or lies under it (both absolute, no trailing slash needed).
bool is_within(const std::string& path, const std::string& folder);

// Whether a command-line option of this name (`--output_dir`, `logging-dir`) is where a
// run writes: a word of it is `output` or `out`, or it is a log, save or workspace word followed
// by a place (`log_dir`, `logging_dir`, `save_path`, `workspace_dir`, `log_file`). Inputs
// (`--network_weights`, `--train_data_dir`, `--resume`, `--pretrained_model_name_or_path`) are
// not.
bool names_an_output(std::string_view option);

}  // namespace oomtriage::daemon
