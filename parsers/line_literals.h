// parsers/line_literals.h
//
// Which of the analyzer's tables a text record may concern, by their literal prefilters: the OOM
// table (may_mention_oom), the context markers (may_be_context) and the step counters
// (may_be_counter). Each prefilter is a DFA pass over the record, and most records pass none; one
// RE2::Set of the three answers all of them in one pass, the same answers.
#pragma once

#include <string>
#include <string_view>
#include "parsers/result.h"

namespace oomtriage::parsers {

struct LineLiterals {
  bool oom = false;      // may_mention_oom
  bool context = false;  // may_be_context
  bool counter = false;  // may_be_counter
};

LineLiterals line_literals(std::string_view text);

// Whether the set compiled (line_literals() falls back to the three prefilters if not).
Result<Ok> line_literals_ok();

}  // namespace oomtriage::parsers
