// parsers/oom_patterns.h
//
// The table of out-of-memory messages: one row per message shape, each with sample lines that
// tests/parsers/oom_patterns_test.cc checks against its own row (fail2ban's rule: no pattern
// without samples), plus near misses that must match no row. The analyzer runs a cheap literal
// prefilter first (may_mention_oom) and the table only on the records that pass it.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "parsers/event.h"

namespace oomtriage::parsers {

struct OomPattern {
  std::string_view name;
  OomKind kind;
  std::string_view regex;  // RE2 syntax; a group named "dev" (CUDA|HIP|XPU|...) refines the kind
  bool recovered = false;  // the trainer caught it and went on
  Phase phase = Phase::kUnknown;  // a phase the message itself names
  bool allocator_message = false;  // carries figures and may be hard-wrapped over several lines
  std::optional<int> gpu_index;    // the device when the message implies it without a number
  std::vector<std::string_view> samples;
};

struct OomMatch {
  const OomPattern* pattern = nullptr;
  OomKind kind = OomKind::kCuda;
  size_t begin = 0;  // where the matched text starts in the line
};

const std::vector<OomPattern>& oom_patterns();

// Lines that mention memory, OOM or kills but are not OOM reports. Each must match no row.
const std::vector<std::string_view>& oom_near_misses();

// Cheap literal check: false means no row can match `text`.
bool may_mention_oom(std::string_view text);

// Matches a cleaned line against the table; the first matching row wins.
std::optional<OomMatch> match_oom(std::string_view line);

// The exception class printed before the message ("torch.OutOfMemoryError"), if any.
std::optional<std::string_view> exception_class(std::string_view line);

}  // namespace oomtriage::parsers
