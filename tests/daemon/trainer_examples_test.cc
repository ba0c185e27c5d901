// tests/daemon/trainer_examples_test.cc
//
// `oomtriage check` held to what the trainers' own repositories say their examples need: every
// row of every tests/testdata/trainer-examples/*/manifest.jsonl is a config or command of our own
// in the trainer's format carrying an example's memory-deciding options, with the cards its
// repository documents ("24 GB: fits", "12 GB: use --blocks_to_swap 16"). The real binary reads
// each one without --trainer, on every card; the test prints the table and the summary, and
// asserts that every row parses, names the manifest's model, and agrees with every card unless
// the row says why it still does not (`known_miss`); a row with "gpus": N is judged per GPU and
// says so. Unknown fields of a row are ignored.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>

#include "tests/support/check_run.h"
#include "tests/support/e2e.h"
#include "tests/support/skip.h"

using namespace oomtriage::testing;
using nlohmann::json;

namespace {

// `oomtriage check ARGS` with `dir` as the working folder (a command's relative paths are its
// own), its output caught in `scratch`.
CheckRun check_in(const fs::path& dir, const std::vector<std::string>& args,
                  const TempDir& scratch) {
  return run_check_in(dir, args, scratch.path);
}

struct Row {
  std::string trainer;
  json spec;  // the manifest's line
  fs::path dir;
};

std::vector<Row> manifest_rows(const fs::path& root) {
  std::vector<Row> rows;
  std::vector<fs::path> folders;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.is_directory() && fs::is_regular_file(entry.path() / "manifest.jsonl")) {
      folders.push_back(entry.path());
    }
  }
  std::sort(folders.begin(), folders.end());
  for (const fs::path& folder : folders) {
    std::ifstream in(folder / "manifest.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      rows.push_back({folder.filename().string(), json::parse(line, nullptr, false), folder});
    }
  }
  return rows;
}

std::string verdict_word(const json& fits) {
  if (fits.is_boolean()) return fits.get<bool>() ? "fits" : "no";
  return "unknown";
}

}  // namespace

TEST_SUITE("trainer examples") {
  TEST_CASE("check agrees with the VRAM the trainers' repositories document for their examples") {
    const fs::path root =
        fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "testdata" / "trainer-examples";
    const std::vector<Row> rows = manifest_rows(root);
    if (rows.empty()) OOMTRIAGE_SKIP("no tests/testdata/trainer-examples/*/manifest.jsonl");

    TempDir scratch;
    struct Count {
      int rows = 0, parsed = 0, model_known = 0, agree = 0;
    };
    std::map<std::string, Count> by_trainer;
    Count all;
    std::string table = fmt::format("{:<44} {:<18} {:>8}  {}\n", "id", "model read", "peak GiB",
                                    "cards (stated/verdict)");
    for (const Row& row : rows) {
      const json& m = row.spec;
      INFO("manifest row: " << m.dump());
      REQUIRE(m.is_object());
      const std::string id = m.value("id", std::string("?"));
      const std::string expected_model = m.value("model", std::string());
      const bool known_miss = m.contains("known_miss");
      Count& mine = by_trainer[row.trainer];
      ++mine.rows;
      ++all.rows;

      bool parsed = true, every_card = true;
      std::string model = "-", cards;
      double peak = 0;
      for (const json& card : m.value("cards", json::array())) {
        const double gib = card.value("gib", 0.0);
        std::vector<std::string> args = {"--json", "--gpu", fmt::format("{:g}GiB", gib)};
        if (m.value("input", std::string()) == "command") {
          args.push_back("--");
          for (const json& word : m["command"]) args.push_back(word.get<std::string>());
        } else {
          args.push_back(m.value("file", std::string()));
        }
        const CheckRun run = check_in(row.dir, args, scratch);
        const json doc = run.doc();
        if (!doc.is_object() || !doc.contains("family")) {
          parsed = false;
          every_card = false;
          cards += fmt::format(" {:g}:error({})", gib, run.err.substr(0, 60));
          continue;
        }
        model = doc.value("family", std::string("?"));
        peak = doc.value("peak_bytes", 0.0) / double(1ull << 30);
        // A job on several GPUs is judged per GPU, and says so.
        if (const int gpus = m.value("gpus", 1); gpus > 1) {
          CHECK_MESSAGE(doc.value("processes", 0) == gpus,
                        id << ": judged on " << doc.value("processes", 0) << " GPUs, not " << gpus);
          CHECK_MESSAGE(doc.value("per_gpu", std::string())
                                .rfind(fmt::format("per GPU, {} processes", gpus), 0) == 0,
                        id << ": does not say it is judged per GPU");
        }
        const bool stated = card.value("fits", false);
        const json fits = doc.contains("fits") ? doc["fits"] : json();
        const bool agrees = fits.is_boolean() && fits.get<bool>() == stated;
        every_card = every_card && agrees;
        cards += fmt::format(" {:g}:{}/{}{}", gib, stated ? "fits" : "no", verdict_word(fits),
                             agrees ? "" : "!");
      }
      const bool model_ok = model == expected_model;
      mine.parsed += parsed;
      all.parsed += parsed;
      mine.model_known += model_ok;
      all.model_known += model_ok;
      mine.agree += every_card;
      all.agree += every_card;
      table += fmt::format("{:<44} {:<18} {:>8.2f} {}{}\n", id, model, peak, cards,
                           known_miss ? "  (known miss)" : "");

      CHECK_MESSAGE(parsed, id << ": did not parse without --trainer");
      CHECK_MESSAGE(model_ok,
                    id << ": model read " << model << ", manifest says " << expected_model);
      if (!known_miss) {
        CHECK_MESSAGE(every_card, id << ": disagrees with a card its repository documents");
      }
    }
    std::string summary;
    for (const auto& [trainer, c] : by_trainer) {
      summary += fmt::format("  {:<14} {:>3} rows: parsed {:>3}, model known {:>3}, agree {:>3}\n",
                             trainer, c.rows, c.parsed, c.model_known, c.agree);
    }
    summary += fmt::format("  {:<14} {:>3} rows: parsed {:>3}, model known {:>3}, agree {:>3}\n",
                           "all", all.rows, all.parsed, all.model_known, all.agree);
    MESSAGE("trainer examples (card stated/verdict, ! = disagrees):\n" << table << "\n" << summary);
  }
}
