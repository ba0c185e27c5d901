// tests/parsers/settle_test.cc: when the daemon may close an incident. A log fed a line at a time
// (as a slow pipe delivers it) asks for the short settle time once its crash is whole, and for
// the traceback wait while the traceback that decides the phase is still to come; settling at
// the times asked gives the verdict scan gives on the whole file.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "parsers/log_analyzer.h"
#include "tests/support/files.h"
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

// Every event a follower reports when it settles after each line where `settles` says the pause
// was long enough, then reaches the end: first reports and amendments, in order.
template <class Settles>
std::vector<OomEvent> reported_line_by_line(const std::string& log, Settles settles) {
  LogAnalyzer analyzer;
  std::vector<OomEvent> reported;
  for (const std::string& line : lines_of(log)) {
    analyzer.feed(line);
    if (analyzer.has_open_incident() && settles(analyzer)) {
      analyzer.settle();
      for (OomEvent& event : analyzer.take_events()) reported.push_back(std::move(event));
    }
  }
  for (OomEvent& event : analyzer.finish().events) reported.push_back(std::move(event));
  return reported;
}

// The daemon's behaviour when every pause between lines is longer than the settle time but
// shorter than the traceback wait: it settles wherever the analyzer asks for the short time.
// Nothing is amended: the first report was the whole incident.
OomEvent settled_line_by_line(const std::string& log) {
  const std::vector<OomEvent> reported = reported_line_by_line(
      log, [](const LogAnalyzer& a) { return a.quiet_before_settle(kSettle) == kSettle; });
  REQUIRE(reported.size() == 1);
  return reported.front();
}

// Pauses longer than the traceback wait after every line (a pipe that stalls): the follower
// reports early and amends; its last revision is scan's verdict.
std::vector<OomEvent> settled_after_every_line(const std::string& log) {
  return reported_line_by_line(log, [](const LogAnalyzer&) { return true; });
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

  TEST_CASE("a settled incident whose later lines change nothing is not reported again") {
    LogAnalyzer analyzer;
    analyzer.feed(bar("my_lora", 500, 3000) + "\n" + std::string(kOom) + "\n");
    analyzer.settle();
    CHECK(analyzer.take_events().size() == 1);
    analyzer.feed("Job process terminated with exit code 1.\n");
    analyzer.settle();
    CHECK(analyzer.take_events().empty());
    CHECK(analyzer.finish().events.empty());
  }

  TEST_CASE("a traceback that stalls past the wait amends the reported event to scan's verdict") {
    // Reported first without the traceback (the phase unknown); the sampling frames
    // that arrive later amend it. Every revision keeps the event's offset; the last one is scan's.
    const std::string log = bar("my_lora", 500, 3000) + "\nError running job: " + kOom +
                            "\n========================================\nResult:\n - 1 failure\n" +
                            kSamplingTraceback + "\nJob process terminated with exit code 1.\n";
    const std::vector<OomEvent> reported = settled_after_every_line(log);
    REQUIRE(reported.size() >= 2);
    CHECK(reported.front().revision == 0);
    CHECK(reported.front().phase == Phase::kUnknown);
    for (size_t i = 1; i < reported.size(); ++i) {
      CHECK(reported[i].revision == static_cast<int>(i));
      CHECK(reported[i].offset == reported.front().offset);
      CHECK(reported[i].line == reported.front().line);
    }
    OomEvent last = reported.back();
    CHECK(last.phase == Phase::kSampling);
    last.revision = 0;
    CHECK(last == only_event(analyze_log(log)));
  }

  TEST_CASE("a restart while an incident is open reads it again and amends the same event") {
    // The daemon settles after every line and may restart after any of them: what it stored
    // (each event by its offset, the newest revision kept) ends as scan's verdict, one event.
    const std::string log = bar("my_lora", 500, 3000) + "\nError running job: " + kOom +
                            "\n========================================\nResult:\n - 1 failure\n" +
                            kSamplingTraceback + "\nJob process terminated with exit code 1.\n";
    const OomEvent whole = only_event(analyze_log(log));
    const std::vector<std::string> lines = lines_of(log);
    for (size_t restart = 1; restart < lines.size(); ++restart) {
      CAPTURE(restart);
      std::vector<OomEvent> stored;
      auto store = [&](std::vector<OomEvent> events) {
        for (OomEvent& event : events) {
          auto same = std::find_if(stored.begin(), stored.end(),
                                   [&](const OomEvent& e) { return e.offset == event.offset; });
          if (same == stored.end()) {
            stored.push_back(std::move(event));
          } else if (event.revision > same->revision) {
            *same = std::move(event);  // the store keeps the newest revision (db/store_progress.cc)
          }
        }
      };
      LogAnalyzer first;
      size_t fed = 0;
      for (size_t i = 0; i < restart; ++i) {
        first.feed(lines[i]);
        fed += lines[i].size();
        if (first.has_open_incident()) first.settle();
        store(first.take_events());
      }
      const uint64_t offset = first.resume_offset();
      REQUIRE(offset <= fed);
      LogAnalyzer second({}, first.checkpoint(), offset, first.resume_line());
      second.feed(std::string_view(log).substr(offset));
      store(second.finish().events);
      REQUIRE(stored.size() == 1);
      OomEvent last = stored.front();
      last.revision = 0;
      CHECK(last == whole);
    }
  }

  TEST_CASE("settling after every line ends on scan's verdict for every shape of crash") {
    const std::vector<std::string> logs = {
        bar("my_lora", 500, 3000) + "\n" + kSamplingTraceback,
        "2026-01-01 10:00:00 ERROR trainer: " + std::string(kOom) + "\n" + kSamplingTraceback,
        bar("my_lora", 500, 3000) + "\nKilled\n",
        bar("my_lora", 500, 3000) + "\n" + kOom + "\n[rank1]: " + kOom + "\n",
        // Two incidents: each ends on its own verdict.
        bar("my_lora", 500, 3000) + "\n" + kSamplingTraceback + bar("my_lora", 501, 3000) + "\n" +
            bar("my_lora", 502, 3000) + "\n" + bar("my_lora", 503, 3000) + "\n" +
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB.\n"};
    for (const std::string& log : logs) {
      CAPTURE(log);
      const LogAnalysis scanned = analyze_log(log);
      std::vector<OomEvent> last_of_each;
      for (OomEvent event : settled_after_every_line(log)) {
        const int revision = event.revision;
        event.revision = 0;
        if (revision == 0) {
          last_of_each.push_back(event);
        } else {
          REQUIRE_FALSE(last_of_each.empty());
          CHECK(last_of_each.back().offset == event.offset);
          last_of_each.back() = event;
        }
      }
      CHECK(last_of_each == scanned.events);
    }
  }

  TEST_CASE("at any write pace the last revision of each incident is scan's event") {
    // Every bundled log and trainer log, fed in random pieces (cut anywhere, mid-line included)
    // with a settle after a random share of them: the pauses of a pipe that stalls anywhere.
    const std::filesystem::path data =
        std::filesystem::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "testdata";
    std::vector<std::filesystem::path> logs;
    for (const char* folder : {"logs", "trainer-logs"}) {
      for (const auto& entry : std::filesystem::recursive_directory_iterator(data / folder)) {
        if (entry.path().extension() == ".log") logs.push_back(entry.path());
      }
    }
    REQUIRE(logs.size() >= 10);
    std::mt19937 random(30);
    for (const auto& path : logs) {
      const std::string log = oomtriage::testing::slurp(path);
      const std::vector<OomEvent> scanned = analyze_log(log).events;
      for (int round = 0; round < 3; ++round) {
        CAPTURE(path.string());
        CAPTURE(round);
        LogAnalyzer analyzer;
        std::vector<OomEvent> reported;
        const auto take = [&] {
          for (OomEvent& event : analyzer.take_events()) reported.push_back(std::move(event));
        };
        for (size_t at = 0; at < log.size();) {
          const size_t piece = std::uniform_int_distribution<size_t>(1, 400)(random);
          analyzer.feed(std::string_view(log).substr(at, piece));
          at += piece;
          take();
          if (std::uniform_int_distribution<int>(0, 3)(random) == 0) {
            analyzer.settle();
            take();
          }
        }
        for (OomEvent& event : analyzer.finish().events) reported.push_back(std::move(event));
        // Folded by offset: an amendment replaces its incident's earlier revision.
        std::vector<OomEvent> last_of_each;
        for (OomEvent event : reported) {
          const int revision = event.revision;
          event.revision = 0;
          if (revision > 0 && !last_of_each.empty() && last_of_each.back().offset == event.offset) {
            last_of_each.back() = event;
          } else {
            CHECK(revision == 0);
            last_of_each.push_back(event);
          }
        }
        CHECK(last_of_each == scanned);
      }
    }
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
