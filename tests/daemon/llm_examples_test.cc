// tests/daemon/llm_examples_test.cc: `oomtriage check` on the LLM example configs and commands of
// tests/testdata/trainer-examples/llm/manifest.jsonl (our own configs carrying the settings of
// the trainers' examples, each with the VRAM its repository documents), run in the manifest's
// folder as a user would; prints the table and holds every row without a known_miss to the cards
// its repository states (fits means fits or tight). Also the checks on `check`'s output:
// the model named, and the processes and the reason shown per GPU.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tests/support/e2e.h"
#include "tests/support/skip.h"

using namespace oomtriage::testing;
using nlohmann::json;

namespace {

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct Run {
  int exit_code = -1;
  json doc;
  std::string err;
};

Run check_in(const fs::path& dir, const std::vector<std::string>& args) {
  TempDir out_dir;
  std::string command = "cd " + quoted(dir.string()) + " && " + OOMTRIAGE_BINARY + " check";
  for (const std::string& arg : args) command += " " + quoted(arg);
  const fs::path out = out_dir.path / "stdout";
  const fs::path err = out_dir.path / "stderr";
  const int status =
      std::system((command + " >" + quoted(out.string()) + " 2>" + quoted(err.string())).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, json::parse(slurp(out), nullptr, false),
          slurp(err)};
}

}  // namespace

TEST_CASE("llm examples: check agrees with the cards the trainers' repositories document") {
  const fs::path dir = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests/testdata/trainer-examples/llm";
  std::ifstream manifest(dir / "manifest.jsonl");
  if (!manifest) OOMTRIAGE_SKIP("tests/testdata/trainer-examples/llm/manifest.jsonl not found");
  std::string table;
  int agree = 0, rows = 0;
  std::string line;
  while (std::getline(manifest, line)) {
    const json row = json::parse(line);
    const std::string id = row["id"];
    bool all = true;
    std::string cards;
    for (const json& card : row["cards"]) {
      std::vector<std::string> args = {"--json", "--gpu",
                                       fmt::format("{}GiB", card["gib"].get<int>())};
      if (row["input"] == "config") {
        args.push_back(row["file"]);
      } else {
        args.push_back("--");
        for (const json& word : row["command"]) args.push_back(word);
      }
      const Run run = check_in(dir, args);
      CAPTURE(id);
      CAPTURE(run.err);
      REQUIRE(run.doc.is_object());
      CHECK(run.doc["family"] == row["model"]);
      CHECK(run.doc["processes"] == row["gpus"]);
      if (row["gpus"].get<int>() > 1) {
        CHECK(run.doc["per_gpu"].get<std::string>().find(
                  fmt::format("per GPU, {} processes", row["gpus"].get<int>())) == 0);
      }
      const bool fits = run.doc["fits"] == true;
      const bool ok = fits == card["fits"].get<bool>();
      all = all && ok;
      cards += fmt::format(" {}G:{}{}({:.1f})", card["gib"].get<int>(), fits ? "fits" : "no",
                           ok ? "" : "!", run.doc["peak_bytes"].get<double>() / (1ull << 30));
      if (!row.contains("known_miss")) CHECK(ok);
    }
    ++rows;
    agree += all;
    table += fmt::format("{:<48}{}\n", id, cards);
  }
  table +=
      fmt::format("{}/{} rows agree with every card their repository documents\n", agree, rows);
  MESSAGE(table);
}
