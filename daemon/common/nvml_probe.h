// daemon/common/nvml_probe.h
//
// The memory of the GPU a job will run on, asked of NVML (`check --gpu auto`). NVML is opened
// with dlopen the first time it is asked, so oomtriage links no NVIDIA library and runs on
// machines without one; there the answer is an error, never a guessed size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "parsers/result.h"

namespace oomtriage::daemon {

inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

// The NVML library to open: OOMTRIAGE_NVML_LIBRARY when set (a test's stand-in, an unusual
// install), else kNvmlLibrary.
std::string nvml_library();

// The card a CUDA job sees first: CUDA_VISIBLE_DEVICES's first entry when it is an index
// ("1,0" -> 1), else 0 (unset, empty, or a UUID such as "GPU-8f3a...", which NVML would need
// looked up by UUID; the first card is the likelier guess than none).
unsigned cuda_device_index(std::optional<std::string_view> cuda_visible_devices);

// The total memory of card `index` in bytes. A kIo error when libnvidia-ml.so.1 cannot be
// opened ("NVML is not available (libnvidia-ml.so.1)") or an NVML call fails (its name and
// NVML's own words).
Result<uint64_t> nvml_total_memory(unsigned index);

// The total memory of the card this process's CUDA_VISIBLE_DEVICES points at, or nullopt
// without NVML: what the daemon's and `run`'s pre-flight judge against when no size is set.
std::optional<uint64_t> visible_card_memory();

}  // namespace oomtriage::daemon
