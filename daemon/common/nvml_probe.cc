// daemon/common/nvml_probe.cc: NVML's few calls we need, declared here (a stable C ABI) and
// looked up with dlsym, so that no NVIDIA header or library is needed to build or run.
#include "daemon/common/nvml_probe.h"

#include <cstdlib>

#include <dlfcn.h>
#include <fmt/format.h>

#include <charconv>

namespace oomtriage::daemon {
namespace {

// From nvml.h: nvmlReturn_t is an int (0 is NVML_SUCCESS), a device is an opaque pointer, and
// nvmlMemory_t is three unsigned long longs.
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
using InitFn = NvmlReturn (*)();
using ShutdownFn = NvmlReturn (*)();
using HandleFn = NvmlReturn (*)(unsigned, NvmlDevice*);
using MemoryFn = NvmlReturn (*)(NvmlDevice, NvmlMemory*);
using ErrorStringFn = const char* (*)(NvmlReturn);

// Closes the library however the probe ends.
struct Library {
  void* handle = nullptr;
  ~Library() {
    if (handle) ::dlclose(handle);
  }
  template <class Fn>
  Fn symbol(const char* name) const {
    return reinterpret_cast<Fn>(::dlsym(handle, name));
  }
};

std::string nvml_words(const Library& nvml, NvmlReturn code) {
  const auto error_string = nvml.symbol<ErrorStringFn>("nvmlErrorString");
  const char* words = error_string ? error_string(code) : nullptr;
  return words ? fmt::format("{} (NVML error {})", words, code)
               : fmt::format("NVML error {}", code);
}

}  // namespace

std::string nvml_library() {
  const char* library = std::getenv("OOMTRIAGE_NVML_LIBRARY");
  return library && *library ? library : kNvmlLibrary;
}

unsigned cuda_device_index(std::optional<std::string_view> cuda_visible_devices) {
  if (!cuda_visible_devices) return 0;
  const std::string_view first = cuda_visible_devices->substr(0, cuda_visible_devices->find(','));
  unsigned index = 0;
  const auto [end, ec] = std::from_chars(first.data(), first.data() + first.size(), index);
  if (ec != std::errc() || end != first.data() + first.size()) return 0;
  return index;
}

Result<uint64_t> nvml_total_memory(unsigned index) {
  const std::string library = nvml_library();
  Library nvml{::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL)};
  if (!nvml.handle) {
    return make_error(ErrorCode::kIo, fmt::format("NVML is not available ({})", library));
  }
  const auto init = nvml.symbol<InitFn>("nvmlInit_v2");
  const auto shutdown = nvml.symbol<ShutdownFn>("nvmlShutdown");
  const auto handle_of = nvml.symbol<HandleFn>("nvmlDeviceGetHandleByIndex_v2");
  const auto memory_of = nvml.symbol<MemoryFn>("nvmlDeviceGetMemoryInfo");
  if (!init || !shutdown || !handle_of || !memory_of) {
    return make_error(ErrorCode::kIo,
                      fmt::format("NVML is not available ({} lacks nvmlInit_v2, "
                                  "nvmlDeviceGetHandleByIndex_v2 or nvmlDeviceGetMemoryInfo)",
                                  library));
  }
  if (const NvmlReturn rc = init(); rc != 0) {
    return make_error(ErrorCode::kIo, fmt::format("NVML: nvmlInit_v2: {}", nvml_words(nvml, rc)));
  }
  NvmlDevice device = nullptr;
  NvmlMemory memory{};
  NvmlReturn rc = handle_of(index, &device);
  const char* failed = "nvmlDeviceGetHandleByIndex_v2";
  if (rc == 0) {
    rc = memory_of(device, &memory);
    failed = "nvmlDeviceGetMemoryInfo";
  }
  const std::string words = rc == 0 ? "" : nvml_words(nvml, rc);
  (void)shutdown();  // nothing to do about a failed shutdown: the answer is already read
  if (rc != 0) {
    return make_error(ErrorCode::kIo, fmt::format("NVML: {} (GPU {}): {}", failed, index, words));
  }
  return static_cast<uint64_t>(memory.total);
}

std::optional<uint64_t> visible_card_memory() {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  auto total = nvml_total_memory(
      cuda_device_index(visible ? std::optional<std::string_view>(visible) : std::nullopt));
  return total ? std::optional<uint64_t>(*total) : std::nullopt;
}

}  // namespace oomtriage::daemon
