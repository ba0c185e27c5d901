// tests/parsers/digit_shape_test.cc: which regexes may be looked up by a line's digit shape, and
// that the step-counter and context tables answer the same with their shape memos as without.
#include "parsers/digit_shape.h"

#include <doctest/doctest.h>

#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "parsers/context_patterns.h"
#include "parsers/step_counters.h"

using namespace oomtriage::parsers;

namespace {

// `line` with each digit drawn at random: the same digit shape.
std::string with_other_digits(const std::string& line, std::mt19937& random) {
  std::string other = line;
  for (char& c : other) {
    if (c >= '0' && c <= '9') c = static_cast<char>('0' + random() % 10);
  }
  return other;
}

// match_counter on a thread of its own: its memo starts empty, so the answer is computed.
std::optional<StepCounter> fresh(const std::string& line) {
  std::optional<StepCounter> answer;
  std::thread([&] { answer = match_counter(line); }).join();
  return answer;
}

bool same(const std::optional<StepCounter>& a, const std::optional<StepCounter>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a) return true;
  return a->kind == b->kind && a->n == b->n && a->total == b->total && a->epoch == b->epoch &&
         a->epoch_has_total == b->epoch_has_total;
}

// match_context on a thread of its own, as (row name, n, job, flag) in order.
using ContextAnswer =
    std::vector<std::tuple<std::string, std::optional<int64_t>, std::string, std::string>>;
ContextAnswer context_answer(const std::string& line) {
  std::vector<ContextMatch> matches;
  match_context(line, matches);
  ContextAnswer answer;
  for (const ContextMatch& m : matches) {
    answer.emplace_back(std::string(m.pattern->name), m.n, std::string(m.job), std::string(m.flag));
  }
  return answer;
}
ContextAnswer fresh_context(const std::string& line) {
  ContextAnswer answer;
  std::thread([&] { answer = context_answer(line); }).join();
  return answer;
}

}  // namespace

TEST_SUITE("parsers::digit_shape") {
  TEST_CASE("regexes that test digits only as a class may be looked up by shape") {
    CHECK(tests_digits_alike(R"(\bsav\w*\b.*_(?P<n>\d{9})\.safetensors\b)"));
    CHECK(tests_digits_alike(R"(^(?P<n>\d+)/(?P<total>\d+)\s+\[[=>.]+\]\s+-\s)"));
    CHECK(tests_digits_alike(R"(\w{2,3} \{x\} [a-z])"));
    CHECK_FALSE(tests_digits_alike(R"(^- (?P<n>[1-9]\d*) completed jobs?$)"));
    CHECK_FALSE(tests_digits_alike(R"(model|transformer \d|T5|CLIP)"));
    CHECK_FALSE(tests_digits_alike(R"((a)\1)"));
    CHECK_FALSE(tests_digits_alike(R"(\x35)"));
    CHECK_FALSE(tests_digits_alike(R"(\{1\})"));  // a literal "{1}"
  }

  TEST_CASE("the counter table answers a line of a known shape as it answers a new line") {
    // Every sample and near miss of the table, then the same line with other digits: the
    // second is answered from the memo the first filled, and must equal a fresh answer.
    std::vector<std::string> lines;
    for (const CounterPattern& pattern : counter_patterns()) {
      for (std::string_view sample : pattern.samples) lines.emplace_back(sample);
    }
    for (std::string_view miss : counter_near_misses()) lines.emplace_back(miss);
    lines.emplace_back("Saving at step 250");
    lines.emplace_back("Removing old save: output/my_lora/my_lora_000000250.safetensors");
    REQUIRE(lines.size() > 20);
    std::mt19937 random(11);
    for (const std::string& line : lines) {
      for (int variant = 0; variant < 8; ++variant) {
        const std::string other = with_other_digits(line, random);
        (void)match_counter(line);  // the shape is now known on this thread
        INFO(line << " -> " << other);
        CHECK(same(match_counter(other), fresh(other)));
      }
    }
  }

  TEST_CASE("the context table answers a line of a known shape as it answers a new line") {
    // Its rows where digits matter ("- 1 completed job", "UMT5EncoderModel", "exit code [1-9]")
    // are matched on every line; the others by shape. A line with other digits must get the
    // fresh answer, the rows in the table's order.
    std::vector<std::string> lines;
    for (const ContextPattern& pattern : context_patterns()) {
      for (std::string_view sample : pattern.samples) lines.emplace_back(sample);
    }
    lines.emplace_back("- 0 completed jobs");
    lines.emplace_back("Job process terminated with exit code 0");
    lines.emplace_back("Loading UMT5EncoderModel");
    lines.emplace_back("Loading UMT7EncoderModel");
    REQUIRE(lines.size() > 50);
    std::mt19937 random(7);
    size_t matched = 0;
    for (const std::string& line : lines) {
      for (int variant = 0; variant < 8; ++variant) {
        const std::string other = with_other_digits(line, random);
        (void)context_answer(line);  // the shape is now known on this thread
        INFO(line << " -> " << other);
        const ContextAnswer answer = context_answer(other);
        CHECK(answer == fresh_context(other));
        matched += !answer.empty();
      }
    }
    CHECK(matched > 100);
  }
}
