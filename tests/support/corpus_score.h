// tests/support/corpus_score.h
//
// Scores the analyzer on a folder of labelled real logs (NNN-name.log + NNN-name.json, the schema
// of docs/corpus.md) the way a user judges a verdict: OOM or not, kind, the allocator figures, the
// step where labelled, the phase where the label's evidence is the log itself (right, and wrong:
// a phase named that is not the label's), and a fatal OOM's outcome. The primary event is the first
// fatal one. A test prints the table, and compares the misses with a list of the known ones, each
// with its class, so that the list shrinks in the open: a miss not on the list fails, and so does
// a listed miss that is gone (take it off the list).
#pragma once

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "parsers/log_analyzer.h"

#include "tests/support/files.h"

namespace oomtriage::testing {

// A miss: the case (its file name without extension), the field, and what was found instead.
struct CorpusMiss {
  std::string case_name;
  std::string field;
  std::string detail;
};

// A miss the test expects, until a rule of its class lands: a case's number or name prefix, the
// field, and the class of logs it stands for.
struct KnownMiss {
  const char* case_prefix;
  const char* field;
  const char* log_class;
};

struct FieldScore {
  int right = 0;
  int total = 0;
};

struct CorpusScore {
  std::map<std::string, FieldScore> fields;
  std::vector<CorpusMiss> misses;
  int cases = 0;
  int not_in_log = 0;  // OOMs the excerpt does not show (log_shows_oom false), not found

  void add(const std::string& field, bool ok, const std::string& case_name,
           const std::string& detail) {
    FieldScore& score = fields[field];
    ++score.total;
    if (ok) {
      ++score.right;
    } else {
      misses.push_back({case_name, field, detail});
    }
  }

  std::string table() const {
    std::string out =
        fmt::format("{} cases ({} OOMs only the thread shows)\n{:<24} {:>7} {:>7} {:>8}\n", cases,
                    not_in_log, "field", "right", "total", "score");
    for (const auto& [field, score] : fields) {
      out += fmt::format("{:<24} {:>7} {:>7} {:>7.1f}%\n", field, score.right, score.total,
                         100.0 * score.right / std::max(score.total, 1));
    }
    for (const CorpusMiss& miss : misses) {
      out += fmt::format("    miss: {:<64} {:<26} {}\n", miss.case_name, miss.field, miss.detail);
    }
    return out;
  }
};

namespace corpus_detail {

inline const parsers::OomEvent* primary_event(const parsers::LogAnalysis& analysis) {
  for (const parsers::OomEvent& event : analysis.events) {
    if (!event.recovered) return &event;
  }
  return analysis.events.empty() ? nullptr : &analysis.events.front();
}

template <class T>
nlohmann::json as_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace corpus_detail

inline CorpusScore score_corpus(const std::filesystem::path& folder) {
  using namespace parsers;
  using corpus_detail::as_json;
  CorpusScore scores;
  std::vector<std::filesystem::path> logs;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.path().extension() == ".log") logs.push_back(entry.path());
  }
  std::sort(logs.begin(), logs.end());
  for (const std::filesystem::path& log : logs) {
    std::filesystem::path label_path = log;
    label_path.replace_extension(".json");
    if (!std::filesystem::exists(label_path)) continue;
    const auto label = nlohmann::json::parse(slurp(label_path), nullptr, false);
    REQUIRE_MESSAGE(!label.is_discarded(), label_path.string());
    ++scores.cases;
    const std::string name = log.stem().string();
    const LogAnalysis analysis = analyze_log(slurp(log));
    const OomEvent* event = corpus_detail::primary_event(analysis);
    const bool is_oom = label.value("oom", false);

    if (!is_oom) {
      scores.add(
          "no false positive", event == nullptr, name,
          event ? fmt::format("{}: {}", to_string(event->kind), event->message.substr(0, 80)) : "");
      continue;
    }
    // An OOM that only the thread's prose tells (the excerpt ends before the message) cannot
    // be read from the log: its label says so, and recall is not asked of it.
    if (!label.value("log_shows_oom", true) && event == nullptr) {
      ++scores.not_in_log;
      continue;
    }
    scores.add("oom recall", event != nullptr, name, "no event");
    if (event == nullptr) continue;
    // A fatal OOM must read as a dead job: never "running", never a warning.
    if (!event->recovered) {
      scores.add("outcome of a fatal OOM",
                 analysis.outcome == Outcome::kCrashedOom || analysis.outcome == Outcome::kStopped,
                 name, std::string(to_string(analysis.outcome)));
    }
    scores.add("kind", label["kind"] == to_string(event->kind), name,
               fmt::format("{} vs {}", label["kind"].dump(), to_string(event->kind)));
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
      const nlohmann::json want = label.value(field, nlohmann::json());
      scores.add("figures", want == value, name,
                 fmt::format("{} {} vs {}", field, want.dump(), value.dump()));
    }
    if (label.contains("step") && !label["step"].is_null()) {
      scores.add("step", label["step"] == as_json(event->step), name,
                 fmt::format("{} vs {}", label["step"].dump(), as_json(event->step).dump()));
    }
    if (label.value("phase_evidence", "").rfind("log", 0) == 0 && label["phase"] != "unknown") {
      const std::string found(to_string(event->phase));
      scores.add("phase (log evidence)", label["phase"] == found, name,
                 fmt::format("{} vs {}", label["phase"].dump(), found));
      // A wrong phase misleads the advice; an unknown one only withholds it.
      scores.add("phase not wrong", label["phase"] == found || found == "unknown", name,
                 fmt::format("{} vs {}", label["phase"].dump(), found));
    }
  }
  return scores;
}

// Checks the misses against the known ones: every miss must be listed, and every listed miss
// must still be one.
inline void check_known_misses(const CorpusScore& scores, const std::vector<KnownMiss>& known) {
  auto listed = [&](const CorpusMiss& miss) {
    return std::any_of(known.begin(), known.end(), [&](const KnownMiss& k) {
      return miss.case_name.rfind(k.case_prefix, 0) == 0 && miss.field == k.field;
    });
  };
  for (const CorpusMiss& miss : scores.misses) {
    CAPTURE(miss.detail);
    CHECK_MESSAGE(listed(miss), "a new miss: " << miss.case_name << " " << miss.field);
  }
  for (const KnownMiss& k : known) {
    const bool still = std::any_of(scores.misses.begin(), scores.misses.end(), [&](const auto& m) {
      return m.case_name.rfind(k.case_prefix, 0) == 0 && m.field == k.field;
    });
    CHECK_MESSAGE(still,
                  "no longer a miss, take it off the list: " << k.case_prefix << " " << k.field);
  }
}

}  // namespace oomtriage::testing
