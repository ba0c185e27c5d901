// tests/support/log_samples.h: pieces of invented training logs for the analyzer's tests: an
// allocator OOM message as PyTorch 2.x prints it, a tqdm frame, a traceback ending in the OOM.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "parsers/log_analyzer.h"

namespace oomtriage::test {

inline constexpr const char* kOom =
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 23.55 GiB of which 1.19 GiB is free. Of the allocated memory 21.80 GiB is "
    "allocated by PyTorch, and 95.43 MiB is reserved by PyTorch but unallocated. See "
    "documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html)";

// "desc:  40%|          | 4/10 [00:03<00:10,  1.50it/s]"
inline std::string bar(const std::string& desc, int n, int total) {
  return desc + ": " + std::to_string(100 * n / total) + "%|          | " + std::to_string(n) +
         "/" + std::to_string(total) + " [00:03<00:10,  1.50it/s]";
}

// `frames` (each "  File ..." line, perhaps with its source line), outermost first.
inline std::string traceback(const std::string& frames) {
  return "Traceback (most recent call last):\n" + frames + kOom + "\n";
}

inline oomtriage::parsers::OomEvent only_event(const oomtriage::parsers::LogAnalysis& a) {
  REQUIRE(a.events.size() == 1);
  return a.events[0];
}

}  // namespace oomtriage::test
