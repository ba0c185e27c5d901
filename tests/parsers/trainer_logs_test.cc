// tests/parsers/trainer_logs_test.cc
//
// Logs rendered by the real tqdm library from simulated jobs of nine trainers
// (tests/testdata/make_trainer_logs.py: each job ends in an unhandled exception, so the
// interpreter's own close() redraws the open bars after the traceback), compared with the
// expectation written from each scenario. Then the same logs again with the rules written for the
// log's own trainer switched off (leave one trainer out): the generic evidence must still find
// the phase and the step. musubi-tuner, diffusion-pipe and Lightning have no rules of their own,
// so they are held out by construction.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>

#include "parsers/log_analyzer.h"
#include "tests/support/files.h"

using oomtriage::testing::slurp;
namespace fs = std::filesystem;
using namespace oomtriage::parsers;

namespace {

Trainer trainer_of_family(const std::string& family) {
  static const std::map<std::string, Trainer> kFamilies = {
      {"kohya", Trainer::kSdScripts},         {"diffusers", Trainer::kDiffusers},
      {"simpletuner", Trainer::kSimpleTuner}, {"onetrainer", Trainer::kOneTrainer},
      {"hf-trainer", Trainer::kTransformers}, {"comfyui", Trainer::kComfyUi},
      {"ai-toolkit", Trainer::kAiToolkit}};
  const auto it = kFamilies.find(family);
  return it == kFamilies.end() ? Trainer::kUnknown : it->second;
}

std::string step_text(const nlohmann::json& step) { return step.is_null() ? "null" : step.dump(); }

struct Tally {
  int right = 0;
  int total = 0;
  std::vector<std::string> misses;
  void add(bool ok, std::string what) {
    ++total;
    if (ok) {
      ++right;
    } else {
      misses.push_back(std::move(what));
    }
  }
};

// Compares one analysis with the expectation: outcome, and per event kind/phase/step/recovered.
void compare(const std::string& name, const nlohmann::json& expect, const LogAnalysis& a,
             std::map<std::string, Tally>& tallies, bool phase_and_step_only) {
  const auto& events = expect["events"];
  if (!phase_and_step_only) {
    tallies["outcome"].add(expect["outcome"] == to_string(a.outcome),
                           fmt::format("{}: outcome {} != {}", name, to_string(a.outcome),
                                       expect["outcome"].get<std::string>()));
    tallies["events"].add(events.size() == a.events.size(),
                          fmt::format("{}: {} events != {}", name, a.events.size(), events.size()));
  }
  for (size_t i = 0; i < std::min(events.size(), a.events.size()); ++i) {
    const auto& want = events[i];
    const OomEvent& got = a.events[i];
    const nlohmann::json got_step = got.step ? nlohmann::json(*got.step) : nlohmann::json();
    tallies["phase"].add(want["phase"] == to_string(got.phase),
                         fmt::format("{} #{}: phase {} != {}", name, i, to_string(got.phase),
                                     want["phase"].get<std::string>()));
    tallies["step"].add(want["step"] == got_step,
                        fmt::format("{} #{}: step {} != {}", name, i, step_text(got_step),
                                    step_text(want["step"])));
    if (phase_and_step_only) continue;
    tallies["kind"].add(want["kind"] == to_string(got.kind),
                        fmt::format("{} #{}: kind {}", name, i, to_string(got.kind)));
    tallies["recovered"].add(want["recovered"] == got.recovered,
                             fmt::format("{} #{}: recovered {}", name, i, got.recovered));
  }
}

void report(const char* title, const std::map<std::string, Tally>& tallies) {
  std::string table = fmt::format("{}\n{:<12} {:>6} {:>6}\n", title, "field", "right", "total");
  for (const auto& [field, tally] : tallies) {
    table += fmt::format("{:<12} {:>6} {:>6}\n", field, tally.right, tally.total);
    for (const auto& miss : tally.misses) table += "    miss: " + miss + "\n";
  }
  MESSAGE(table);
  for (const auto& entry : tallies) {
    const std::string& field = entry.first;
    CAPTURE(field);
    CHECK(entry.second.right == entry.second.total);
  }
}

template <class F>
void for_each_trainer_log(F&& f) {
  const fs::path dir = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "testdata" / "trainer-logs";
  int seen = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".log") continue;
    fs::path expect_path = entry.path();
    expect_path.replace_extension(".expect.json");
    const auto expect = nlohmann::json::parse(slurp(expect_path));
    f(entry.path().filename().string(), expect, slurp(entry.path()));
    ++seen;
  }
  REQUIRE(seen >= 30);
}

}  // namespace

TEST_CASE("logs rendered by real tqdm for nine trainers analyse to their scenarios") {
  std::map<std::string, Tally> tallies;
  for_each_trainer_log(
      [&](const std::string& name, const nlohmann::json& expect, const std::string& bytes) {
        compare(name, expect, analyze_log(bytes), tallies, false);
        // Chunking changes nothing.
        LogAnalyzer analyzer;
        for (size_t i = 0; i < bytes.size(); i += 61)
          analyzer.feed(std::string_view(bytes).substr(i, 61));
        compare(name + " (61-byte chunks)", expect, analyzer.finish(), tallies, false);
      });
  report("trainer logs, all rules", tallies);
}

TEST_CASE(
    "leave one trainer out: the generic evidence finds the held-out trainer's phase and step") {
  std::map<std::string, Tally> tallies;
  for_each_trainer_log(
      [&](const std::string& name, const nlohmann::json& expect, const std::string& bytes) {
        AnalyzerOptions options;
        options.without_rules_of = trainer_of_family(expect.value("family", ""));
        compare(name, expect, analyze_log(bytes, options), tallies, true);
      });
  report("trainer logs, the log's own trainer's rules off", tallies);
}
