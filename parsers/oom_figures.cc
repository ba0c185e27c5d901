// parsers/oom_figures.cc: the figure patterns, one per clause of the allocator messages quoted
// in docs/formats.md §1-§2 (PyTorch 1.0 "cached", 1.4+ "reserved in total", 2.1 "capacty",
// 2.2+ "of which", XPU without a free clause, MPS in KB/MB/GB or KiB/MiB/GiB, cudaMallocAsync).
// Each clause is matched on its own, in any case, so an unknown clause loses nothing else.
#include "parsers/oom_figures.h"

#include <re2/re2.h>

#include <utility>
#include <vector>

#include "parsers/sizes.h"

namespace oomtriage::parsers {
namespace {

// Every figure pattern ignores case: a UI or wrapper that re-cases the message ("cuda out of
// memory. tried to allocate 20.00 mib") loses no figure.
RE2::Options figure_options() {
  RE2::Options options;
  options.set_log_errors(false);
  options.set_case_sensitive(false);
  return options;
}

#define SIZE R"((\d+bytes|\d+\.\d{2}(?:KiB|MiB|GiB)))"
#define SIZE_MPS R"((\d+bytes|\d+\.\d{2}(?:KiB|MiB|GiB|KB|MB|GB)))"

// One pattern per clause, each anchored to its own words only, so that a clause this table does
// not know (a build's extra "X something;", "N allowed;", a private-pool note) costs nothing but
// itself. The text they see has no whitespace (squash_whitespace).
struct FigureRegexes {
  // 2.1+: "Tried to allocate S. GPU N has a total capacity of S of which S is free. [Process P
  // has S memory in use. ...] [S allowed; ]Of the allocated memory S is allocated by PyTorch,
  // [with S allocated in private pools (e.g., CUDA Graphs), ]and S is reserved by PyTorch but
  // unallocated." (XPU: no "of which" clause.)
  RE2 tried{"Triedtoallocate" SIZE, figure_options()};
  RE2 gpu{R"(GPU(\d+)hasatotalcapac|Allocationondevice(\d+))", figure_options()};
  RE2 total{"hasatotalcapaci?tyof" SIZE, figure_options()};
  RE2 free{"ofwhich" SIZE "isfree", figure_options()};
  RE2 allocated{"Oftheallocatedmemory" SIZE "isallocatedbyPyTorch", figure_options()};
  // "and S is reserved by PyTorch but unallocated", also when cut after "is" or "is res".
  RE2 unallocated{"and" SIZE "is(?:r|$)", figure_options()};
  RE2 process{R"((?:Process(\d+)|Includingnon-PyTorchmemory,thisprocess)has)" SIZE "memoryinuse",
              figure_options()};
  // 1.x: "(GPU 0; S total capacity; S already allocated; [S current active; ]S free; [S allowed; ]
  // S reserved in total by PyTorch)" or "...; S cached)". Every clause follows a ';'.
  RE2 old_gpu{R"(\((?:GPU|NPU)(\d+);)", figure_options()};
  RE2 old_total{";" SIZE "totalcapacity", figure_options()};
  RE2 old_allocated{";" SIZE "alreadyallocated", figure_options()};
  RE2 old_free{";" SIZE "free(?:[;)]|$)", figure_options()};
  RE2 old_reserved{";" SIZE "reservedintotal", figure_options()};
  // cudaMallocAsync prints a table, one figure per line.
  RE2 async_allocated{"Currentlyallocated:" SIZE, figure_options()};
  RE2 async_requested{"Requested:" SIZE, figure_options()};
  RE2 async_limit{"Devicelimit:" SIZE, figure_options()};
  RE2 async_free{R"(Free\(accordingtoCUDA\):)" SIZE, figure_options()};
  // MPS: "MPS allocated: S, other allocations: S, max allowed: S). Tried to allocate S on ..."
  RE2 mps_allocated{"MPSallocated:" SIZE_MPS, figure_options()};
  RE2 mps_tried{"Triedtoallocate" SIZE_MPS "on", figure_options()};
  // What ends a complete allocator message. ComfyUI prints only "Allocation on device" (maybe
  // with rich's "execution.py:430" after it): that is all there is.
  RE2 complete{R"(SeedocumentationforMemoryManagement|empty_cache|)"
               R"(PYTORCH_MPS_HIGH_WATERMARK_RATIO|(?:PyTorch\)|cached\)|pool\.|memory\.)$|)"
               R"(^Allocationondevice(?:[\w.]+\.py:\d+)?$)",
               figure_options()};

  std::vector<std::pair<const char*, const RE2*>> all() const {
    return {{"tried", &tried},
            {"gpu", &gpu},
            {"total", &total},
            {"free", &free},
            {"allocated", &allocated},
            {"unallocated", &unallocated},
            {"process", &process},
            {"old_gpu", &old_gpu},
            {"old_total", &old_total},
            {"old_allocated", &old_allocated},
            {"old_free", &old_free},
            {"old_reserved", &old_reserved},
            {"async_allocated", &async_allocated},
            {"async_requested", &async_requested},
            {"async_limit", &async_limit},
            {"async_free", &async_free},
            {"mps_allocated", &mps_allocated},
            {"mps_tried", &mps_tried},
            {"complete", &complete}};
  }
};

#undef SIZE
#undef SIZE_MPS

const FigureRegexes& regexes() {
  static const FigureRegexes kRegexes;
  return kRegexes;
}

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

// Sets `field` from the first capture of `regex` in `s`, if it matches and parses.
void find_size(std::string_view s, const RE2& regex, std::optional<uint64_t>& field) {
  re2::StringPiece text;
  if (RE2::PartialMatch(s, regex, &text)) set_size(field, text);
}

void extract_torch(std::string_view s, MemoryFigures& f) {
  const FigureRegexes& re = regexes();
  re2::StringPiece text, other;
  find_size(s, re.tried, f.tried_to_allocate_bytes);
  if (RE2::PartialMatch(s, re.gpu, &text, &other)) {
    f.gpu_index = parse_index(text.empty() ? other : text);
  }
  find_size(s, re.total, f.total_capacity_bytes);
  find_size(s, re.free, f.free_bytes);
  find_size(s, re.allocated, f.allocated_by_pytorch_bytes);
  find_size(s, re.unallocated, f.reserved_unallocated_bytes);

  re2::StringPiece rest(s);
  re2::StringPiece pid, size;
  while (RE2::FindAndConsume(&rest, re.process, &pid, &size)) {
    const auto bytes = parse_size(size);
    if (!bytes) continue;
    if (pid.empty()) {
      f.this_process_in_use_bytes = bytes;
    } else {
      f.other_processes.push_back({std::stoll(std::string(pid.data(), pid.size())), *bytes});
    }
  }

  if (RE2::PartialMatch(s, re.old_gpu, &text)) f.gpu_index = parse_index(text);
  find_size(s, re.old_total, f.total_capacity_bytes);
  find_size(s, re.old_allocated, f.allocated_by_pytorch_bytes);
  find_size(s, re.old_free, f.free_bytes);
  find_size(s, re.old_reserved, f.reserved_total_bytes);

  find_size(s, re.async_allocated, f.allocated_by_pytorch_bytes);
  find_size(s, re.async_requested, f.tried_to_allocate_bytes);
  find_size(s, re.async_limit, f.total_capacity_bytes);
  find_size(s, re.async_free, f.free_bytes);
}

void extract_mps(std::string_view s, MemoryFigures& f) {
  find_size(s, regexes().mps_allocated, f.allocated_by_pytorch_bytes);
  find_size(s, regexes().mps_tried, f.tried_to_allocate_bytes);
}

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

MemoryFigures extract_request_figures(std::string_view message) {
  // Torch7's "you tried to allocate 0GB" is truncated to whole gigabytes: no figure.
  static const RE2 kTried(
      R"(you tried to allocate (\d+ bytes)|Unable to allocate (\d+(?:\.\d+)? (?:[KMGT]i)?B)\b)"
      R"(|failed to allocate \S+ \((\d+ bytes)\) from device)",
      figure_options());
  MemoryFigures figures;
  re2::StringPiece c10, numpy, stream_executor;
  if (RE2::PartialMatch(message, kTried, &c10, &numpy, &stream_executor)) {
    const re2::StringPiece size = !c10.empty() ? c10 : !numpy.empty() ? numpy : stream_executor;
    figures.tried_to_allocate_bytes = parse_size(std::string_view(size.data(), size.size()));
  }
  return figures;
}

bool looks_incomplete(std::string_view message) {
  const std::string squashed = squash_whitespace(message);
  return !RE2::PartialMatch(squashed, regexes().complete);
}

Result<Ok> oom_figures_ok() {
  std::string problems;
  for (const auto& [name, regex] : regexes().all()) {
    if (regex->ok()) continue;
    if (!problems.empty()) problems.append("; ");
    problems.append("oom_figures ").append(name).append(": ").append(regex->error());
  }
  if (!problems.empty()) return make_error(ErrorCode::kBadInput, problems);
  return Ok{};
}

}  // namespace oomtriage::parsers
