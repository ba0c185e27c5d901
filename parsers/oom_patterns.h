// parsers/oom_patterns.h
//
// The table of out-of-memory messages: one row per message shape, each with sample lines that
// tests/parsers/oom_patterns_test.cc checks against its own row (fail2ban's rule: no pattern
// without samples), plus near misses that must match no row. The analyzer runs a cheap literal
// prefilter first (may_mention_oom) and the table only on the records that pass it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/event.h"
#include "parsers/result.h"

namespace re2 {
class RE2;
}

namespace oomtriage::parsers {

struct OomPattern {
  std::string_view name;
  OomKind kind;
  std::string_view regex;  // RE2 syntax; a group named "dev" (CUDA|HIP|XPU|...) refines the kind
  // RE2 has no look-around and no "A and B in any order". When set, the line must also match
  // `also` (a phase word anywhere in it, say) and must not match `veto` (advice such as "try
  // reducing the batch size", a line of Python source quoting the message, ...).
  std::string_view also = {};
  std::string_view veto = {};
  bool recovered = false;          // the trainer caught it and went on
  Phase phase = Phase::kUnknown;   // a phase the message itself names
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

// A trainer's back-off that names no OOM, said right after one: "Skipping batch" (fairseq before
// 0.10), "retrying with batch size 4". It makes that OOM a recovered one, in training.
bool is_bare_backoff(std::string_view text);

// A PyTorch memory summary's OOM count ("|  CUDA OOMs: 1  |  cudaMalloc retries: 1  |"), and
// the row that stands for it when the summary is all a log shows of an OOM: the allocator
// counted one that the program caught, since it went on to print the summary (a summary beside
// a message is not a second OOM).
std::optional<int64_t> memory_summary_ooms(std::string_view text);
const OomPattern& memory_summary_pattern();
// Its regex, an alternation of literals.
const re2::RE2& oom_literals();

// Matches a cleaned line against the table; the first matching row wins. One RE2::Set pass finds
// the rows that can match, so a line that matches none costs a single DFA pass.
std::optional<OomMatch> match_oom(std::string_view line);

// The exception class printed before the message ("torch.OutOfMemoryError"), if any.
std::optional<std::string_view> exception_class(std::string_view line);

// True when the set of all rows' regexes, the prefilter and the exception-class pattern compiled.
// Otherwise false, and `error` (if not null) names each bad pattern with RE2's reason. Meant for a
// start-up check: a pattern that fails to compile matches nothing. Each row's own regex, `also`
// and `veto` compile when the set first names the row; oom_table_ok(oom_patterns()) checks them.
Result<Ok> oom_patterns_ok();

// Compiles every regex, `also` and `veto` of `table` afresh and reports the same way as
// oom_patterns_ok; for tables under test and for checking a row before it is added.
Result<Ok> oom_table_ok(const std::vector<OomPattern>& table);

}  // namespace oomtriage::parsers
