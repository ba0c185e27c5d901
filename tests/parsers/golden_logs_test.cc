// tests/parsers/golden_logs_test.cc
//
// Every tests/testdata/logs/NAME.log is analysed and compared with NAME.expect.json, which
// make_golden_logs.py writes from the scenario (where the crash was put), not from our output.
// Each log is also fed in odd chunk sizes: the result must not depend on how bytes arrive.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "parsers/log_analyzer.h"

#include "tests/support/files.h"

using oomtriage::testing::slurp;
namespace fs = std::filesystem;
using namespace oomtriage::parsers;

namespace {

LogAnalysis analyze_in_chunks(std::string_view bytes, size_t chunk) {
  LogAnalyzer analyzer;
  for (size_t i = 0; i < bytes.size(); i += chunk) analyzer.feed(bytes.substr(i, chunk));
  return analyzer.finish();
}

nlohmann::json summarize(const LogAnalysis& analysis) {
  nlohmann::json events = nlohmann::json::array();
  for (const OomEvent& e : analysis.events) {
    events.push_back({{"kind", to_string(e.kind)},
                      {"phase", to_string(e.phase)},
                      {"step", e.step ? nlohmann::json(*e.step) : nlohmann::json()},
                      {"recovered", e.recovered},
                      {"line", e.line},
                      {"tried", e.figures.tried_to_allocate_bytes
                                    ? nlohmann::json(*e.figures.tried_to_allocate_bytes)
                                    : nlohmann::json()}});
  }
  return {{"trainer", to_string(analysis.trainer)},
          {"outcome", to_string(analysis.outcome)},
          {"events", events}};
}

}  // namespace

TEST_CASE("each golden log analyses to its expectation, whatever the chunking") {
  const fs::path dir = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "testdata" / "logs";
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".log") continue;
    fs::path expect_path = entry.path();
    expect_path.replace_extension(".expect.json");
    CAPTURE(entry.path().filename().string());
    const auto expect = nlohmann::json::parse(slurp(expect_path));
    const std::string bytes = slurp(entry.path());
    const LogAnalysis analysis = analyze_log(bytes);

    CHECK(to_string(analysis.trainer) == expect["trainer"].get<std::string>());
    CHECK(to_string(analysis.outcome) == expect["outcome"].get<std::string>());
    if (expect.contains("job_name")) {
      CHECK(analysis.job_name == expect["job_name"].get<std::string>());
    }
    const auto& expected_events = expect["events"];
    REQUIRE(analysis.events.size() == expected_events.size());
    for (size_t i = 0; i < expected_events.size(); ++i) {
      CAPTURE(i);
      const auto& want = expected_events[i];
      const OomEvent& got = analysis.events[i];
      CHECK(to_string(got.kind) == want["kind"].get<std::string>());
      CHECK(to_string(got.phase) == want["phase"].get<std::string>());
      CHECK(got.recovered == want["recovered"].get<bool>());
      if (want["step"].is_null()) {
        CHECK_FALSE(got.step);
      } else {
        CHECK(got.step == want["step"].get<int64_t>());
      }
      for (const auto& [field, value] : want.items()) {
        if (field == "tried_to_allocate_bytes") {
          CHECK(got.figures.tried_to_allocate_bytes == value.get<uint64_t>());
        } else if (field == "free_bytes") {
          CHECK(got.figures.free_bytes == value.get<uint64_t>());
        } else if (field == "total_capacity_bytes") {
          CHECK(got.figures.total_capacity_bytes == value.get<uint64_t>());
        }
      }
    }
    const nlohmann::json whole = summarize(analysis);
    for (size_t chunk : {1u, 7u, 4096u}) {
      CAPTURE(chunk);
      CHECK(summarize(analyze_in_chunks(bytes, chunk)) == whole);
    }
    ++checked;
  }
  CHECK(checked >= 15);
}

TEST_CASE("splitting a log at every byte of the window around an incident changes nothing") {
  const fs::path dir = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "testdata" / "logs";
  for (const char* name : {"aitk_sampling_oom_step500.log", "aitk_bucket_oom_random_step_abort.log",
                           "hf_trainer_eval_oom_two_ranks.log"}) {
    CAPTURE(name);
    const std::string bytes = slurp(dir / name);
    const nlohmann::json whole = summarize(analyze_log(bytes));
    size_t anchor = bytes.find("out of memory");
    if (anchor == std::string::npos) anchor = bytes.find("OOM during");
    REQUIRE(anchor != std::string::npos);
    const size_t from = anchor > 400 ? anchor - 400 : 0;
    const size_t to = std::min(bytes.size(), anchor + 400);
    for (size_t cut = from; cut <= to; ++cut) {
      LogAnalyzer analyzer;
      analyzer.feed(std::string_view(bytes).substr(0, cut));
      analyzer.feed(std::string_view(bytes).substr(cut));
      const nlohmann::json split = summarize(analyzer.finish());
      if (split != whole) {
        CAPTURE(cut);
        CHECK(split == whole);
        break;
      }
    }
  }
}
