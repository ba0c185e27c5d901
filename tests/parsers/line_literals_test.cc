// tests/parsers/line_literals_test.cc
//
// line_literals() must answer what the three prefilters answer one by one: for every sample and
// near miss of the OOM, context and counter tables, for every line (and every '\r' segment) of
// every golden and trainer log, and for lines made to tell the three apart (case, digits).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "parsers/context_patterns.h"
#include "parsers/line_literals.h"
#include "parsers/oom_patterns.h"
#include "parsers/step_counters.h"
#include "tests/support/files.h"

using namespace oomtriage;
namespace fs = std::filesystem;

namespace {

// The failing line, to name it when they differ.
std::string differs(std::string_view line) {
  const parsers::LineLiterals together = parsers::line_literals(line);
  if (together.oom == parsers::may_mention_oom(line) &&
      together.context == parsers::may_be_context(line) &&
      together.counter == parsers::may_be_counter(line)) {
    return "";
  }
  return std::string(line);
}

}  // namespace

TEST_SUITE("parsers::line literals") {
  TEST_CASE("one pass answers as the three prefilters do, line by line") {
    REQUIRE(parsers::line_literals_ok());
    std::vector<std::string> lines = {
        "",
        "STEP 5",              // counters only, and only case-insensitively
        "Saving at step 250",  // context and counter
        "CUDA out of memory. Tried to allocate 2.00 GiB",
        "Signal 9 (SIGKILL) received by PID 4242",  // OOM literal with a digit, context too
        "exit code 137",
        "return code = -9",
        "nothing to see here",
        "\xff\xfe invalid UTF-8 \xc3",
    };
    for (const auto& pattern : parsers::oom_patterns()) {
      for (std::string_view sample : pattern.samples) lines.emplace_back(sample);
    }
    for (std::string_view miss : parsers::oom_near_misses()) lines.emplace_back(miss);
    for (const auto& pattern : parsers::context_patterns()) {
      for (std::string_view sample : pattern.samples) lines.emplace_back(sample);
    }
    for (const auto& pattern : parsers::counter_patterns()) {
      for (std::string_view sample : pattern.samples) lines.emplace_back(sample);
    }
    for (std::string_view miss : parsers::counter_near_misses()) lines.emplace_back(miss);
    const fs::path testdata = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "testdata";
    size_t logs = 0;
    for (const fs::path& dir : {testdata / "logs", testdata / "trainer-logs"}) {
      for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().extension() != ".log") continue;
        const std::string text = testing::slurp(entry.path());
        size_t start = 0;
        for (size_t i = 0; i <= text.size(); ++i) {
          if (i == text.size() || text[i] == '\n' || text[i] == '\r') {
            lines.push_back(text.substr(start, i - start));
            start = i + 1;
          }
        }
        ++logs;
      }
    }
    CHECK(logs > 50);
    size_t oom = 0, context = 0, counter = 0;
    for (const std::string& line : lines) {
      CHECK_MESSAGE(differs(line).empty(), "differs on: " << line);
      const parsers::LineLiterals literals = parsers::line_literals(line);
      oom += literals.oom;
      context += literals.context;
      counter += literals.counter;
    }
    // Each kind is seen, so that the comparison above covers hits as well as misses.
    CHECK(oom > 100);
    CHECK(context > 100);
    CHECK(counter > 100);
  }
}
