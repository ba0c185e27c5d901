// daemon/common/gpu_sample_worker.h
//
// NVML on a thread of its own, so that a driver that does not answer holds that thread alone
// (docs/gpu-memory.md, "A card that does not answer"). NVML calls cannot be cancelled: when a GPU
// fell off the bus or its driver is wedged, nvmlDeviceGetMemoryInfo may not return for tens of
// seconds, or ever; nvmlInit_v2 too. NVML is opened on the worker's thread, and the daemon's
// event loop and `run`'s pass-through loop ask for a sample and go on; the sample comes back
// when NVML answers. A call in flight past the deadline is "not
// answering": the owner says so once, leaves a gap in the timelines, and asks again only once
// the call has returned. A worker destroyed while a call hangs leaves its thread behind with the
// sampler (it cannot be joined); process exit ends both.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon/common/nvml_sampler.h"

namespace oomtriage::daemon {

class GpuSampleWorker {
 public:
  // A call in flight longer than this is "not answering" (a healthy one takes microseconds).
  static constexpr std::chrono::milliseconds kDefaultDeadline{3000};

  using Open = std::function<Result<std::unique_ptr<NvmlSampler>>()>;
  // Opens NVML with `open` (NvmlSampler::open by default) on the worker's thread. `ready` is
  // called on that thread when NVML is opened (or could not be) and when a sample is done; the
  // owner posts to its loop from it, so it must not block. Never called after the destructor.
  explicit GpuSampleWorker(std::function<void()> ready = nullptr, Open open = nullptr,
                           std::chrono::milliseconds deadline = kDefaultDeadline);
  ~GpuSampleWorker();
  GpuSampleWorker(const GpuSampleWorker&) = delete;
  GpuSampleWorker& operator=(const GpuSampleWorker&) = delete;

  // What opening NVML came to: nothing yet, the sampler's cards, or why it could not be opened.
  struct Opened {
    bool done = false;
    std::string error;  // one line; empty when NVML is open
    unsigned device_count = 0;
    std::string process_query;
  };
  Opened opened() const;

  // Asks for one sample; false (and nothing asked) while the previous one is still in flight.
  bool request();
  // The sample done since the last take, if any.
  std::optional<std::vector<GpuSample>> take();

  // The call that has been in flight past the deadline, if one has.
  struct Stuck {
    std::optional<unsigned> gpu;  // none: opening NVML
    std::string call;             // e.g. "nvmlDeviceGetMemoryInfo"
    std::chrono::milliseconds waited{0};
  };
  std::optional<Stuck> stuck() const;

 private:
  struct Shared;  // held by the thread too, so a thread left behind has what it uses
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
  std::chrono::milliseconds deadline_;
};

// What a sampling loop says about its cards: each card's NVML error as it starts and ends, a
// card that stops answering and answers again. Once per change of state, never per sample.
class GpuHealth {
 public:
  using Say = std::function<void(const std::string&)>;
  explicit GpuHealth(Say say) : say_(std::move(say)) {}

  // After each sample: its cards' errors.
  void sampled(const std::vector<GpuSample>& cards);
  // On each turn while a call is in flight: true the first time it is past its deadline.
  bool not_answering(const GpuSampleWorker::Stuck& stuck, int64_t now);
  // When a sample came back after not answering: the Unix time it stopped answering.
  std::optional<int64_t> answered(int64_t now);
  bool silent() const { return silent_; }

 private:
  Say say_;
  std::vector<std::string> errors_;  // per card, the last error said (empty: none)
  bool silent_ = false;
  std::optional<unsigned> silent_gpu_;
  int64_t silent_since_ = 0;
};

}  // namespace oomtriage::daemon
