// daemon/common/nvml_sampler.cc: NVML's memory calls, declared here (a stable C ABI, nvml.h's
// layouts copied field for field) and looked up with dlsym.
#include "daemon/common/nvml_sampler.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include "daemon/common/nvml_probe.h"

namespace oomtriage::daemon {

namespace {

using NvmlReturn = int;  // nvmlReturn_t: 0 is NVML_SUCCESS
using NvmlDevice = void*;
constexpr NvmlReturn kInsufficientSize = 7;               // NVML_ERROR_INSUFFICIENT_SIZE
constexpr unsigned long long kValueNotAvailable = ~0ull;  // NVML_VALUE_NOT_AVAILABLE
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
// nvmlProcessInfo_v1_t (the unversioned query's) and nvmlProcessInfo_v2_t (_v2's).
struct ProcessInfoV1 {
  unsigned int pid;
  unsigned long long used_gpu_memory;
};
struct ProcessInfoV2 {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
template <class Info>
using ProcessesFn = NvmlReturn (*)(NvmlDevice, unsigned int*, Info*);

}  // namespace

struct NvmlSampler::Api {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*count)(unsigned int*) = nullptr;
  NvmlReturn (*handle)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  ProcessesFn<ProcessInfoV2> processes_v2 = nullptr;
  ProcessesFn<ProcessInfoV1> processes_v1 = nullptr;

  std::string words(NvmlReturn code) const {
    const char* text = error_string ? error_string(code) : nullptr;
    return text ? fmt::format("{} (NVML error {})", text, code)
                : fmt::format("NVML error {}", code);
  }
};

namespace {

template <class Fn>
Fn symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(::dlsym(library, name));
}

// Asks until the buffer holds every process: the count can grow between two calls.
template <class Info>
NvmlReturn query_processes(ProcessesFn<Info> query, NvmlDevice device,
                           std::vector<GpuProcess>& out) {
  std::vector<Info> infos(64);
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto count = static_cast<unsigned int>(infos.size());
    const NvmlReturn rc = query(device, &count, infos.data());
    if (rc == kInsufficientSize) {
      infos.resize(std::max<size_t>(infos.size() * 2, count + 16));
      continue;
    }
    if (rc != 0) return rc;
    for (unsigned int i = 0; i < count && i < infos.size(); ++i) {
      GpuProcess process{infos[i].pid, std::nullopt};
      if (infos[i].used_gpu_memory != kValueNotAvailable)
        process.used_bytes = infos[i].used_gpu_memory;
      out.push_back(process);
    }
    return 0;
  }
  return kInsufficientSize;
}

}  // namespace

Result<std::unique_ptr<NvmlSampler>> NvmlSampler::open() { return open(nvml_library()); }

Result<std::unique_ptr<NvmlSampler>> NvmlSampler::open(const std::string& library) {
  std::unique_ptr<NvmlSampler> sampler(new NvmlSampler);
  sampler->library_ = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!sampler->library_)
    return make_error(ErrorCode::kIo, fmt::format("NVML is not available ({})", library));
  auto api = std::make_unique<Api>();
  void* lib = sampler->library_;
  api->init = symbol<decltype(api->init)>(lib, "nvmlInit_v2");
  api->shutdown = symbol<decltype(api->shutdown)>(lib, "nvmlShutdown");
  api->error_string = symbol<decltype(api->error_string)>(lib, "nvmlErrorString");
  api->count = symbol<decltype(api->count)>(lib, "nvmlDeviceGetCount_v2");
  api->handle = symbol<decltype(api->handle)>(lib, "nvmlDeviceGetHandleByIndex_v2");
  api->memory = symbol<decltype(api->memory)>(lib, "nvmlDeviceGetMemoryInfo");
  if (!api->init || !api->shutdown || !api->count || !api->handle || !api->memory) {
    return make_error(ErrorCode::kIo,
                      fmt::format("NVML is not available ({} lacks one of nvmlInit_v2, "
                                  "nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2, "
                                  "nvmlDeviceGetMemoryInfo)",
                                  library));
  }
  // _v2, not _v3: every library with _v3 has _v2 too, and _v3's record is not one size (the
  // R535 drivers write 32 bytes a process into it, others 24) while _v2's has stayed 24.
  api->processes_v2 =
      symbol<ProcessesFn<ProcessInfoV2>>(lib, "nvmlDeviceGetComputeRunningProcesses_v2");
  if (api->processes_v2) sampler->process_query_ = "nvmlDeviceGetComputeRunningProcesses_v2";
  if (!api->processes_v2) {
    api->processes_v1 =
        symbol<ProcessesFn<ProcessInfoV1>>(lib, "nvmlDeviceGetComputeRunningProcesses");
    if (api->processes_v1) sampler->process_query_ = "nvmlDeviceGetComputeRunningProcesses";
  }
  if (const NvmlReturn rc = api->init(); rc != 0)
    return make_error(ErrorCode::kIo, fmt::format("NVML: nvmlInit_v2: {}", api->words(rc)));
  sampler->api_ = std::move(api);  // from here the destructor shuts NVML down
  unsigned int count = 0;
  if (const NvmlReturn rc = sampler->api_->count(&count); rc != 0) {
    return make_error(ErrorCode::kIo,
                      fmt::format("NVML: nvmlDeviceGetCount_v2: {}", sampler->api_->words(rc)));
  }
  if (count == 0) return make_error(ErrorCode::kIo, "NVML found no GPU");
  sampler->device_count_ = count;
  return sampler;
}

NvmlSampler::~NvmlSampler() {
  if (api_) (void)api_->shutdown();  // nothing to do about a failed shutdown
  if (library_) ::dlclose(library_);
}

std::vector<GpuSample> NvmlSampler::sample() {
  std::vector<GpuSample> samples;
  samples.reserve(device_count_);
  for (unsigned index = 0; index < device_count_; ++index) {
    GpuSample& sample = samples.emplace_back();
    sample.index = index;
    NvmlDevice device = nullptr;
    entering(index, "nvmlDeviceGetHandleByIndex_v2");
    if (const NvmlReturn rc = api_->handle(index, &device); rc != 0) {
      sample.error = fmt::format("nvmlDeviceGetHandleByIndex_v2: {}", api_->words(rc));
      continue;
    }
    NvmlMemory memory{};
    entering(index, "nvmlDeviceGetMemoryInfo");
    if (const NvmlReturn rc = api_->memory(device, &memory); rc != 0) {
      sample.error = fmt::format("nvmlDeviceGetMemoryInfo: {}", api_->words(rc));
      continue;
    }
    sample.total_bytes = memory.total;
    sample.used_bytes = memory.used;
    entering(index, process_query_.empty() ? "" : process_query_.c_str());
    read_processes(device, sample);
  }
  call_name_.store(nullptr, std::memory_order_relaxed);
  return samples;
}

void NvmlSampler::read_processes(void* device, GpuSample& sample) {
  NvmlReturn rc = 0;
  if (api_->processes_v2) {
    rc = query_processes(api_->processes_v2, device, sample.processes);
  } else if (api_->processes_v1) {
    rc = query_processes(api_->processes_v1, device, sample.processes);
  }
  if (rc != 0) sample.error = fmt::format("{}: {}", process_query_, api_->words(rc));
}

}  // namespace oomtriage::daemon
