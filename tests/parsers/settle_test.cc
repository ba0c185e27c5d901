// tests/parsers/settle_test.cc: when the daemon may close an incident. A log fed a line at a time
// (as a slow pipe delivers it) asks for the short settle time once its crash is whole, and for
// the traceback wait while the traceback that decides the phase is still to come; settling at
// the times asked gives the verdict scan gives on the whole file.
#include <doctest/doctest.h>

#include <sstream>
#include <string>
#include <vector>

#include "parsers/log_analyzer.h"
#include "tests/support/log_samples.h"

using namespace oomtriage::parsers;
using namespace oomtriage::test;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kSettle{25};

std::vector<std::string> lines_of(const std::string& log) {
  std::vector<std::string> lines;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) lines.push_back(line + "\n");
  return lines;
}

// What each line leaves the analyzer asking for, fed one at a time.
std::vector<milliseconds> waits_line_by_line(const std::string& log) {
  LogAnalyzer analyzer;
  std::vector<milliseconds> waits;
  for (const std::string& line : lines_of(log)) {
    analyzer.feed(line);
    waits.push_back(analyzer.quiet_before_settle(kSettle));
  }
  return waits;
}

// The daemon's behaviour when every pause between lines is longer than the settle time but
// shorter than the traceback wait: it settles wherever the analyzer asks for the short time.
OomEvent settled_line_by_line(const std::string& log) {
  LogAnalyzer analyzer;
  for (const std::string& line : lines_of(log)) {
    analyzer.feed(line);
    if (analyzer.has_open_incident() && analyzer.quiet_before_settle(kSettle) == kSettle) {
      analyzer.settle();
    }
  }
  return only_event(analyzer.finish());
}

const std::string kSamplingTraceback =
    "Traceback (most recent call last):\n"
    "  File \"/app/ai-toolkit/run.py\", line 96, in main\n"
    "    job.run()\n"
    "  File \"/app/ai-toolkit/jobs/process/BaseSDTrainProcess.py\", line 378, in sample\n"
    "    self.sd.generate_images(gen_img_config_list)\n"
    "  File \"/app/ai-toolkit/toolkit/models/base_model.py\", line 512, in generate_images\n"
    "    img = pipeline(**extra)\n" +
    std::string(kOom) + "\n";

}  // namespace

TEST_SUITE("parsers::settle") {
  TEST_CASE("a message printed before its traceback waits for the traceback's last line") {
    const std::string log = bar("my_lora", 500, 3000) + "\nError running job: " + kOom +
                            "\n========================================\nResult:\n - 1 failure\n" +
                            kSamplingTraceback + "\nJob process terminated with exit code 1.\n";
    const std::vector<milliseconds> waits = waits_line_by_line(log);
    const std::vector<std::string> lines = lines_of(log);
    REQUIRE(lines.size() == 15);
    // From "Error running job:" (line 1) through the traceback's frames (lines 5 to 11).
    for (size_t i = 1; i <= 11; ++i) {
      CAPTURE(lines[i]);
      CHECK(waits[i] == LogAnalyzer::kTracebackWait);
    }
    CHECK(lines[12].starts_with("torch.OutOfMemoryError"));
    CHECK(waits[12] == kSettle);
    CHECK(waits.back() == kSettle);  // whole: the traceback ended in its exception line
    // Settled at the times asked, the phase is the traceback's, as scan has it.
    const OomEvent scanned = only_event(analyze_log(log));
    const OomEvent followed = settled_line_by_line(log);
    CHECK(scanned.phase == Phase::kSampling);
    CHECK(followed.phase == scanned.phase);
    CHECK(followed.step == scanned.step);
  }

  TEST_CASE("a traceback that ends in the OOM is whole at its last line") {
    const std::vector<milliseconds> waits =
        waits_line_by_line(bar("my_lora", 500, 3000) + "\n" + kSamplingTraceback);
    CHECK(waits.back() == kSettle);
  }

  TEST_CASE("a traceback begun after the OOM line is waited for until its exception line") {
    // A logger's error line, then the traceback it logged (logger.exception()).
    const std::string log =
        "2026-01-01 10:00:00 ERROR trainer: " + std::string(kOom) + "\n" + kSamplingTraceback;
    const std::vector<milliseconds> waits = waits_line_by_line(log);
    CHECK(waits[0] == LogAnalyzer::kTracebackWait);  // the traceback is still to come
    CHECK(waits[1] == LogAnalyzer::kTracebackWait);  // begun, not ended
    CHECK(waits[3] == LogAnalyzer::kTracebackWait);
    CHECK(waits.back() == kSettle);
    CHECK(settled_line_by_line(log).phase == only_event(analyze_log(log)).phase);
  }

  TEST_CASE("what prints no traceback is settled at once") {
    for (const std::string& last :
         {std::string("Killed"), std::string("# OOM during training step, skipping batch 1/3 #"),
          std::string(kOom)}) {
      CAPTURE(last);
      const std::vector<milliseconds> waits =
          waits_line_by_line(bar("my_lora", 500, 3000) + "\n" + last + "\n");
      CHECK(waits.back() == kSettle);
    }
  }
}
