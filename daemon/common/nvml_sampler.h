// daemon/common/nvml_sampler.h
//
// GPU memory as NVML sees it now, per card and per compute process: what the memory timeline
// samples. NVML is opened with dlopen, as in nvml_probe.h (no NVIDIA header or library to build
// or run), initialised once per sampler and shut down with it. Only NVML's long-standing entry
// points are required (nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2,
// nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetMemoryInfo); the per-process query is
// nvmlDeviceGetComputeRunningProcesses_v2 (R450 on), else the unversioned one of older drivers,
// looked up with dlsym, so old drivers work and a library without either still gives each
// card's memory. _v3 is not used although newer: its record's size changed between drivers
// under the same name (R535's is 32 bytes, others' 24), and every library with it has _v2.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "parsers/result.h"

namespace oomtriage::daemon {

struct GpuProcess {
  uint32_t pid = 0;
  std::optional<uint64_t> used_bytes;  // NVML does not always know (NVML_VALUE_NOT_AVAILABLE)
};

struct GpuSample {
  unsigned index = 0;
  uint64_t total_bytes = 0;
  uint64_t used_bytes = 0;
  std::vector<GpuProcess> processes;
  // Why this card's memory or its processes could not be read (NVML's words), else empty.
  std::string error;
};

class NvmlSampler {
 public:
  // nvml_library() (nvml_probe.h), or the library at `library`. A kIo error, one line, when it
  // cannot be opened, lacks a required entry point, fails to initialise or finds no GPU.
  static Result<std::unique_ptr<NvmlSampler>> open();
  static Result<std::unique_ptr<NvmlSampler>> open(const std::string& library);
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  unsigned device_count() const { return device_count_; }
  // The per-process query in use (e.g. "nvmlDeviceGetComputeRunningProcesses_v2"), or empty
  // when the library has none.
  const std::string& process_query() const { return process_query_; }
  // Every card's memory and compute processes now, in index order. It may not return for as
  // long as the driver does not (gpu_sample_worker.h calls it on a thread of its own).
  std::vector<GpuSample> sample();
  // The card and NVML call that sample() is in now (another thread may ask); call is null
  // between calls.
  unsigned call_gpu() const { return call_gpu_.load(std::memory_order_relaxed); }
  const char* call_name() const { return call_name_.load(std::memory_order_relaxed); }

 private:
  struct Api;
  NvmlSampler() = default;
  void read_processes(void* device, GpuSample& sample);
  void entering(unsigned gpu, const char* call) {
    call_gpu_.store(gpu, std::memory_order_relaxed);
    call_name_.store(call, std::memory_order_relaxed);
  }

  void* library_ = nullptr;
  std::unique_ptr<Api> api_;
  unsigned device_count_ = 0;
  std::string process_query_;
  std::atomic<unsigned> call_gpu_{0};
  std::atomic<const char*> call_name_{nullptr};
};

}  // namespace oomtriage::daemon
