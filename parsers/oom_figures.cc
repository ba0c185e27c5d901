// parsers/oom_figures.cc: the figure patterns, one per clause of the allocator messages quoted
// in docs/formats.md §1-§2 (PyTorch 1.0 "cached", 1.4+ "reserved in total", 2.1 "capacty",
// 2.2+ "of which", XPU without a free clause, MPS in KB/MB/GB or KiB/MiB/GiB, cudaMallocAsync).
#include "parsers/oom_figures.h"

#include <re2/re2.h>

#include "parsers/sizes.h"

namespace oomtriage::parsers {
namespace {

RE2::Options quiet_options() {
  RE2::Options options;
  options.set_log_errors(false);
  return options;
}

#define SIZE R"((\d+bytes|\d+\.\d{2}(?:KiB|MiB|GiB)))"
#define SIZE_MPS R"((\d+bytes|\d+\.\d{2}(?:KiB|MiB|GiB|KB|MB|GB)))"

void set_size(std::optional<uint64_t>& field, std::string_view text) {
  if (auto bytes = parse_size(text)) {
    field = bytes;
  }
}

std::optional<int> parse_index(std::string_view digits) {
  if (digits.empty() || digits.size() > 6) return std::nullopt;
  int value = 0;
  for (char c : digits) value = value * 10 + (c - '0');
  return value;
}

void extract_torch(std::string_view s, MemoryFigures& f) {
  static const RE2 kTried("Triedtoallocate" SIZE, quiet_options());
  static const RE2 kGpu(R"(GPU(\d+)hasatotalcapac|Allocationondevice(\d+))", quiet_options());
  static const RE2 kTotal("hasatotalcapaci?tyof" SIZE, quiet_options());
  static const RE2 kFree("ofwhich" SIZE "isfree", quiet_options());
  static const RE2 kAllocated("Oftheallocatedmemory" SIZE "isallocatedbyPyTorch", quiet_options());
  static const RE2 kUnallocated("isallocatedbyPyTorch,(?:with" SIZE
                                R"(allocatedinprivatepools\(e\.g\.,CUDAGraphs\),)?and)" SIZE "is",
                                quiet_options());
  static const RE2 kProcess(R"((?:Process(\d+)|Includingnon-PyTorchmemory,thisprocess)has)" SIZE
                            "memoryinuse",
                            quiet_options());
  // 1.x: "(GPU 0; 12.00 GiB total capacity; 1.33 GiB already allocated; 8.57 GiB free; ...)"
  static const RE2 kOld(R"(\((?:GPU|NPU)(\d+);)" SIZE "totalcapacity;(?:" SIZE
                        "alreadyallocated;(?:" SIZE "currentactive;)?(?:" SIZE "free;)?(?:" SIZE
                        "allowed;)?(?:" SIZE "reservedintotal)?)?",
                        quiet_options());
  // cudaMallocAsync prints a table, one figure per line.
  static const RE2 kAsyncAllocated("Currentlyallocated:" SIZE, quiet_options());
  static const RE2 kAsyncRequested("Requested:" SIZE, quiet_options());
  static const RE2 kAsyncLimit("Devicelimit:" SIZE, quiet_options());
  static const RE2 kAsyncFree(R"(Free\(accordingtoCUDA\):)" SIZE, quiet_options());

  re2::StringPiece text;
  re2::StringPiece a, b, c, d, e, g;
  if (RE2::PartialMatch(s, kTried, &text)) set_size(f.tried_to_allocate_bytes, text);
  if (RE2::PartialMatch(s, kGpu, &text, &a)) f.gpu_index = parse_index(text.empty() ? a : text);
  if (RE2::PartialMatch(s, kTotal, &text)) set_size(f.total_capacity_bytes, text);
  if (RE2::PartialMatch(s, kFree, &text)) set_size(f.free_bytes, text);
  if (RE2::PartialMatch(s, kAllocated, &text)) set_size(f.allocated_by_pytorch_bytes, text);
  if (RE2::PartialMatch(s, kUnallocated, &a, &text)) set_size(f.reserved_unallocated_bytes, text);

  re2::StringPiece rest(s);
  re2::StringPiece pid, size;
  while (RE2::FindAndConsume(&rest, kProcess, &pid, &size)) {
    const auto bytes = parse_size(size);
    if (!bytes) continue;
    if (pid.empty()) {
      f.this_process_in_use_bytes = bytes;
    } else {
      f.other_processes.push_back({std::stoll(std::string(pid.data(), pid.size())), *bytes});
    }
  }

  if (RE2::PartialMatch(s, kOld, &text, &a, &b, &c, &d, &e, &g)) {
    f.gpu_index = parse_index(text);
    set_size(f.total_capacity_bytes, a);
    set_size(f.allocated_by_pytorch_bytes, b);
    set_size(f.free_bytes, d);
    set_size(f.reserved_total_bytes, g);
  }
  if (RE2::PartialMatch(s, kAsyncAllocated, &text)) set_size(f.allocated_by_pytorch_bytes, text);
  if (RE2::PartialMatch(s, kAsyncRequested, &text)) set_size(f.tried_to_allocate_bytes, text);
  if (RE2::PartialMatch(s, kAsyncLimit, &text)) set_size(f.total_capacity_bytes, text);
  if (RE2::PartialMatch(s, kAsyncFree, &text)) set_size(f.free_bytes, text);
}

void extract_mps(std::string_view s, MemoryFigures& f) {
  static const RE2 kMps("MPSallocated:" SIZE_MPS ",otherallocations:" SIZE_MPS, quiet_options());
  static const RE2 kTried("Triedtoallocate" SIZE_MPS "on", quiet_options());
  re2::StringPiece allocated, other, tried;
  if (RE2::PartialMatch(s, kMps, &allocated, &other)) {
    set_size(f.allocated_by_pytorch_bytes, allocated);
  }
  if (RE2::PartialMatch(s, kTried, &tried)) set_size(f.tried_to_allocate_bytes, tried);
}

#undef SIZE
#undef SIZE_MPS

}  // namespace

std::string squash_whitespace(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') out.push_back(c);
  }
  return out;
}

MemoryFigures extract_figures(std::string_view message, OomKind kind) {
  MemoryFigures figures;
  const std::string squashed = squash_whitespace(message);
  if (kind == OomKind::kMps) {
    extract_mps(squashed, figures);
  } else {
    extract_torch(squashed, figures);
  }
  return figures;
}

bool looks_incomplete(std::string_view message) {
  static const RE2 kComplete(
      R"(SeedocumentationforMemoryManagement|empty_cache|PYTORCH_MPS_HIGH_WATERMARK_RATIO|)"
      R"((?:PyTorch\)|cached\)|pool\.|memory\.)$)",
      quiet_options());
  const std::string squashed = squash_whitespace(message);
  return !RE2::PartialMatch(squashed, kComplete);
}

}  // namespace oomtriage::parsers
