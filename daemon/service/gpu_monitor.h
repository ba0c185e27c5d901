// daemon/service/gpu_monitor.h
//
// The daemon's GPU memory timeline (docs/gpu-memory.md; `run` has its own, daemon/cli/run_gpu.h):
// on a timer, every card's memory and compute processes through NVML (nvml_sampler.h); each
// process put to a followed run (gpu_attribution.h: its pod, the log it writes, its folder, its
// config or output folder on its command line), remembered per process: a pid with its start
// time, so a pid the kernel hands to another process is looked at afresh; each run's memory per
// card added to its timeline with the step and phase its log shows now (triage/gpu_timeline.h) and
// written to the store every kStoreInterval and when the run leaves; one TrainingNearOOM warning
// when a run nears its card's limit; the Prometheus gauges. A run's timeline and warning survive a
// restart (read back from the store). A job under `oomtriage run` is sampled but warned by `run`
// alone. Without NVML: one log line, nothing sampled, nothing else changes. NVML is called on a
// thread of its own (gpu_sample_worker.h): a card that does not answer leaves a gap in the
// timelines and is said once, while tailing, storing and alerting go on.
#pragma once

#include <sys/types.h>

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/common/clock.h"
#include "daemon/alerts/near_oom_alert.h"
#include "daemon/common/metrics.h"
#include "daemon/common/gpu_sample_worker.h"
#include "daemon/common/nvml_sampler.h"
#include "daemon/service/gpu_attribution.h"
#include "db/store.h"
#include "triage/fix.h"
#include "triage/gpu_timeline.h"

namespace oomtriage::daemon {

// The store's row for a run's timeline on one card (db/store.h GpuMemoryRow); nullopt before
// its first point. The daemon and `run` (daemon/cli/run_gpu.h) write their timelines through it.
std::optional<db::GpuMemoryRow> timeline_row(int64_t run_id, const triage::GpuTimeline& timeline,
                                             int64_t now);

// A run that may hold GPU memory, as the monitor's owner sees it at one sample.
struct SampledRun {
  int64_t run_id = 0;
  std::string folder;             // the job's folder, may be empty
  std::vector<std::string> logs;  // its followed logs, absolute
  std::string pod_uid;            // a container log's pod (gpu_attribution.h)
  std::string config;             // the config file read for the job, may be empty
  std::optional<int64_t> step;
  parsers::Phase phase = parsers::Phase::kUnknown;
  NearOomRun alert;  // job, trainer, family, log path, total steps (the monitor fills the rest)
  // The fixes ranked for an OOM in `phase` at this memory: the near-OOM warning's top change.
  std::function<std::vector<triage::Fix>(parsers::Phase, uint64_t peak, uint64_t card)> fixes;
};

class GpuMonitor {
 public:
  // Written at most this often per run while it is sampled (and when it leaves).
  static constexpr std::chrono::seconds kStoreInterval{10};
  // An unattributed process is looked at again after this long (its job's log may appear).
  static constexpr std::chrono::seconds kRetryUnattributed{30};

  using Runs = std::function<std::vector<SampledRun>()>;
  // `wall_clock` gives Unix seconds; `warn` sends a near-OOM warning (once to each receiver)
  // and `say` writes one journal line. Sampling turns wait on `clock`; processes are read
  // from the procfs at `proc`.
  GpuMonitor(boost::asio::io_context& io, db::Store& store, Metrics& metrics,
             std::function<int64_t()> wall_clock, Runs runs, std::function<void(AlertContent)> warn,
             std::function<void(const std::string&)> say, LoopClock& clock = real_clock(),
             std::string proc = "/proc");
  ~GpuMonitor();

  // Samples every `interval` (0: off) through `sampler`, or NVML as nvml_library() finds it;
  // without it, says so in one line and samples nothing. Restarting with other settings keeps
  // the runs' timelines. A call in flight past `deadline` is a card not answering.
  void start(std::chrono::milliseconds interval, double near_oom_share,
             std::unique_ptr<NvmlSampler> sampler = nullptr,
             std::chrono::milliseconds deadline = GpuSampleWorker::kDefaultDeadline);
  // Writes every run's timeline and stops the timer.
  void stop();
  bool sampling() const { return worker_ != nullptr; }

 private:
  struct RunState {
    std::map<unsigned, triage::GpuTimeline> cards;
    triage::NearOomWatch watch;
    int warnings = 0;
    std::map<unsigned, uint64_t> warned_bytes;  // per card, for the store
    bool dirty = false;
    std::chrono::steady_clock::time_point stored_at{};
    std::string job;
  };
  // What a process was found to be, kept while NVML lists its pid and the process at that pid
  // has the same start time.
  struct Owner {
    std::optional<uint64_t> started;  // gpu_attribution.h start_time(); none: never kept
    std::optional<int64_t> run_id;
    std::chrono::steady_clock::time_point checked_at;
    int64_t runs_seen = 0;    // the followed runs when it was looked at (owner_of)
    bool supervised = false;  // under `oomtriage run`, which warns for it
  };

  void arm();
  // The timer's turn: ask for a sample, or notice that the one asked for does not come.
  void turn();
  // The worker opened NVML or finished a sample (run on the loop).
  void on_ready();
  // A sample came back from the worker's thread.
  void sampled(const std::vector<GpuSample>& cards);
  // `runs_seen`: a signature of `runs` (sample_once), which changes when a run comes or goes.
  std::optional<int64_t> owner_of(pid_t pid, const std::vector<SampledRun>& runs,
                                  const std::vector<JobFiles>& files, int64_t runs_seen);
  // Null when the store could not say what it holds for the run (then it is left out).
  RunState* state_of(int64_t run_id, const std::string& job);
  void store(int64_t run_id, RunState& state);
  void warn(const SampledRun& run, RunState& state, unsigned gpu, uint64_t card_bytes,
            const triage::NearOomWatch::Warning& warning);

  boost::asio::io_context& io_;
  db::Store& store_;
  Metrics& metrics_;
  std::function<int64_t()> wall_clock_;
  Runs runs_;
  std::function<void(AlertContent)> warn_;
  std::function<void(const std::string&)> say_;
  std::unique_ptr<GpuSampleWorker> worker_;
  GpuHealth health_;
  // Handlers the worker posted check it: they may run after a reload replaced the worker.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  GpuAttribution attribution_;
  std::string self_exe_;  // this binary: an `oomtriage run` above a process is ours
  LoopClock& clock_;
  std::unique_ptr<LoopTimer> timer_;
  std::chrono::milliseconds interval_{0};
  double share_ = 0.95;
  bool fast_ = false;  // a run is above 90% of what it may use: sample five times as often
  bool said_unavailable_ = false;
  bool announced_ = false;  // what opening NVML came to was said
  std::map<int64_t, RunState> states_;
  std::map<pid_t, Owner> owners_;
};

}  // namespace oomtriage::daemon
