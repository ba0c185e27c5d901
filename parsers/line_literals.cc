// parsers/line_literals.cc: the three prefilters' regexes in one RE2::Set.
#include "parsers/line_literals.h"

#include <re2/re2.h>
#include <re2/set.h>

#include <memory>
#include <vector>

#include "parsers/context_patterns.h"
#include "parsers/oom_patterns.h"
#include "parsers/step_counters.h"

namespace oomtriage::parsers {
namespace {

enum Literal { kOom, kContext, kCounter };

// Each regex with its own options: the counters' literals are case-insensitive, the others not.
std::string with_options(const RE2& regex) {
  return regex.options().case_sensitive() ? regex.pattern() : "(?i:" + regex.pattern() + ")";
}

const RE2::Set* literal_set() {
  static const std::unique_ptr<RE2::Set> kSet = [] {
    RE2::Options options;
    options.set_log_errors(false);
    auto set = std::make_unique<RE2::Set>(options, RE2::UNANCHORED);
    const bool added = set->Add(with_options(oom_literals()), nullptr) == kOom &&
                       set->Add(with_options(context_literals()), nullptr) == kContext &&
                       set->Add(with_options(counter_literals()), nullptr) == kCounter;
    if (!added || !set->Compile()) set.reset();
    return set;
  }();
  return kSet.get();
}

LineLiterals one_by_one(std::string_view text) {
  return {may_mention_oom(text), may_be_context(text), may_be_counter(text)};
}

}  // namespace

LineLiterals line_literals(std::string_view text) {
  const RE2::Set* set = literal_set();
  if (set == nullptr) return one_by_one(text);
  thread_local std::vector<int> hits;
  hits.clear();
  RE2::Set::ErrorInfo info{};
  if (!set->Match(text, &hits, &info)) {
    // Out of DFA memory on this record: ask each prefilter.
    return info.kind == RE2::Set::kNoError ? LineLiterals{} : one_by_one(text);
  }
  LineLiterals literals;
  for (const int hit : hits) {
    literals.oom |= hit == kOom;
    literals.context |= hit == kContext;
    literals.counter |= hit == kCounter;
  }
  return literals;
}

Result<Ok> line_literals_ok() {
  if (literal_set() != nullptr) return Ok{};
  return make_error(ErrorCode::kBadInput,
                    "line literals: the RE2::Set of the three prefilters did not compile");
}

}  // namespace oomtriage::parsers
