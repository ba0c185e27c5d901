// tests/parsers/real_logs_test.cc
//
// Scans the labelled real crash logs in ../shared/corpus/real-logs (public issue threads) and
// compares each with its label: OOM or not, kind, the allocator figures, the step where labelled,
// and the phase where the label's evidence comes from the log itself; the primary event is the
// first fatal one, and a fatal one must leave the log's outcome crashed. Prints a score table and
// fails below 100% on any field. Skips cleanly when the corpus is absent.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "parsers/log_analyzer.h"

#include "tests/support/files.h"
#include "tests/support/skip.h"

using oomtriage::testing::slurp;
namespace fs = std::filesystem;
using namespace oomtriage::parsers;

namespace {

// The event the label describes, as a user judges a verdict (../shared/tools/score-corpus.py):
// the first fatal one; a log whose OOMs were all caught is described by its first.
const OomEvent* primary_event(const LogAnalysis& analysis) {
  for (const OomEvent& event : analysis.events) {
    if (!event.recovered) return &event;
  }
  return analysis.events.empty() ? nullptr : &analysis.events.front();
}

template <class T>
nlohmann::json as_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

struct Score {
  int right = 0;
  int total = 0;
  std::vector<std::string> misses;
  void add(bool ok, const std::string& what) {
    ++total;
    if (ok) {
      ++right;
    } else {
      misses.push_back(what);
    }
  }
};

}  // namespace

TEST_CASE("real crash logs from issue threads scan to their labels") {
  const fs::path corpus = fs::path(OOMTRIAGE_SOURCE_DIR) / ".." / "shared" / "corpus" / "real-logs";
  if (!fs::is_directory(corpus)) {
    OOMTRIAGE_SKIP(corpus.string() + " is absent");
  }
  std::map<std::string, Score> scores;
  for (const auto& entry : fs::directory_iterator(corpus)) {
    if (entry.path().extension() != ".log") continue;
    fs::path label_path = entry.path();
    label_path.replace_extension(".json");
    if (!fs::exists(label_path)) continue;
    const auto label = nlohmann::json::parse(slurp(label_path), nullptr, false);
    REQUIRE_FALSE(label.is_discarded());
    const std::string name = entry.path().filename().string();
    const LogAnalysis analysis = analyze_log(slurp(entry.path()));
    const OomEvent* event = primary_event(analysis);
    const bool is_oom = label.value("oom", false);

    if (is_oom) {
      scores["oom recall"].add(event != nullptr, name);
    } else {
      scores["no false positive"].add(event == nullptr, name);
    }
    if (!is_oom || event == nullptr) continue;
    // A fatal OOM must read as a dead job: never "running", never a warning.
    if (!event->recovered) {
      scores["outcome of a fatal OOM"].add(
          analysis.outcome == Outcome::kCrashedOom || analysis.outcome == Outcome::kStopped,
          fmt::format("{}: outcome {}", name, to_string(analysis.outcome)));
    }
    scores["kind"].add(
        label["kind"] == to_string(event->kind),
        fmt::format("{}: {} vs {}", name, label["kind"].dump(), to_string(event->kind)));
    const auto& f = event->figures;
    const std::pair<const char*, nlohmann::json> figures[] = {
        {"tried_to_allocate_bytes", as_json(f.tried_to_allocate_bytes)},
        {"total_capacity_bytes", as_json(f.total_capacity_bytes)},
        {"free_bytes", as_json(f.free_bytes)},
        {"allocated_by_pytorch_bytes", as_json(f.allocated_by_pytorch_bytes)},
        {"reserved_unallocated_bytes", as_json(f.reserved_unallocated_bytes)},
        {"gpu_index", as_json(f.gpu_index)},
    };
    for (const auto& [field, value] : figures) {
      scores["figures"].add(label.value(field, nlohmann::json()) == value,
                            fmt::format("{}: {} {} vs {}", name, field,
                                        label.value(field, nlohmann::json()).dump(), value.dump()));
    }
    if (!label["step"].is_null()) {
      scores["step"].add(
          label["step"] == as_json(event->step),
          fmt::format("{}: {} vs {}", name, label["step"].dump(), as_json(event->step).dump()));
    }
    if (label.value("phase_evidence", "").rfind("log", 0) == 0) {
      scores["phase (log evidence)"].add(
          label["phase"] == to_string(event->phase),
          fmt::format("{}: {} vs {}", name, label["phase"].dump(), to_string(event->phase)));
    }
  }
  REQUIRE_FALSE(scores.empty());
  std::string table = fmt::format("{:<24} {:>7} {:>7} {:>8}\n", "field", "right", "total", "score");
  for (const auto& [field, score] : scores) {
    table += fmt::format("{:<24} {:>7} {:>7} {:>7.1f}%\n", field, score.right, score.total,
                         100.0 * score.right / std::max(score.total, 1));
    for (const auto& miss : score.misses) table += "    miss: " + miss + "\n";
  }
  MESSAGE("\n" << table);
  for (const auto& [field, score] : scores) {
    CAPTURE(field);
    CHECK(score.right == score.total);
  }
}
