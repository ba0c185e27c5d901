// tests/triage/heal_rebase_test.cc
//
// The run's config changes made again on a file the user edited (triage/heal_rebase.h): keys the
// user left alone take the fixes, keys the user changed keep the user's value, a broken edit is
// an error with its line; YAML and TOML alike.
#include <doctest/doctest.h>

#include "triage/heal_rebase.h"

using namespace oomtriage;
using parsers::TargetKind;

namespace {

triage::AppliedChange change(const std::string& fix, const std::string& path, nlohmann::json from,
                             nlohmann::json to, TargetKind kind = TargetKind::kYaml,
                             const std::string& table = "") {
  triage::AppliedChange applied;
  applied.fix_id = fix;
  applied.change.path = path;
  applied.change.from = std::move(from);
  applied.change.to = std::move(to);
  applied.change.kind = kind;
  applied.change.file = "job";
  applied.change.table = table;
  return applied;
}

const char* kBase =
    "train:\n"
    "  batch_size: 4\n"
    "  lr: 1e-4   # the user's comment\n"
    "sample:\n"
    "  width: 1024\n";

}  // namespace

TEST_SUITE("triage::heal rebase") {
  TEST_CASE("an edit elsewhere keeps every fix, the user's text stays around them") {
    const std::string edited =
        "train:\n"
        "  batch_size: 4\n"
        "  lr: 5e-5   # lowered by hand\n"
        "sample:\n"
        "  width: 1024\n";
    const auto rebased =
        triage::rebase_changes(TargetKind::kYaml, kBase, edited,
                               {change("lower_batch_size", "train.batch_size", 4, 2),
                                change("lower_batch_size", "train.batch_size", 2, 1),
                                change("cheapen_previews", "sample.width", 1024, 768)},
                               "job.yaml");
    REQUIRE(rebased);
    CHECK(rebased->text ==
          "train:\n"
          "  batch_size: 1\n"
          "  lr: 5e-5   # lowered by hand\n"
          "sample:\n"
          "  width: 768\n");
    CHECK(rebased->applied.size() == 3);
    CHECK(rebased->yielded.empty());
  }

  TEST_CASE("a key the user changed keeps the user's value, the fix's other keys are applied") {
    const std::string edited =
        "train:\n"
        "  batch_size: 1\n"
        "  lr: 1e-4   # the user's comment\n"
        "sample:\n"
        "  width: 1024\n";
    const auto rebased =
        triage::rebase_changes(TargetKind::kYaml, kBase, edited,
                               {change("lower_batch_size", "train.batch_size", 4, 2),
                                change("cheapen_previews", "sample.width", 1024, 768)},
                               "job.yaml");
    REQUIRE(rebased);
    CHECK(rebased->text.find("batch_size: 1\n") != std::string::npos);
    CHECK(rebased->text.find("width: 768\n") != std::string::npos);
    REQUIRE(rebased->yielded.size() == 1);
    CHECK(rebased->yielded[0].fix_id == "lower_batch_size");
    REQUIRE(rebased->applied.size() == 1);
    CHECK(rebased->applied[0].fix_id == "cheapen_previews");
  }

  TEST_CASE("a key the user removed is the user's too") {
    const auto rebased =
        triage::rebase_changes(TargetKind::kYaml, kBase, "train:\n  batch_size: 4\n",
                               {change("cheapen_previews", "sample.width", 1024, 768)}, "job.yaml");
    REQUIRE(rebased);
    CHECK(rebased->text == "train:\n  batch_size: 4\n");
    CHECK(rebased->yielded.size() == 1);
  }

  TEST_CASE("an edit that does not parse is an error naming the file and the line") {
    const auto rebased = triage::rebase_changes(
        TargetKind::kYaml, kBase, "train:\n  batch_size: [4\nsample:\n  width: 1024\n",
        {change("cheapen_previews", "sample.width", 1024, 768)}, "job.yaml");
    REQUIRE_FALSE(rebased);
    CHECK(rebased.error().message.rfind("job.yaml:", 0) == 0);
    const auto empty =
        triage::rebase_changes(TargetKind::kYaml, kBase, "",
                               {change("cheapen_previews", "sample.width", 1024, 768)}, "job.yaml");
    CHECK_FALSE(empty);
  }

  TEST_CASE("TOML: a key in its table") {
    const char* base = "[train]\nbatch_size = 4\n\n[sample]\nwidth = 1024\n";
    const char* edited = "# tuned\n[train]\nbatch_size = 4\n\n[sample]\nwidth = 1024\n";
    const auto rebased = triage::rebase_changes(
        TargetKind::kToml, base, edited,
        {change("lower_batch_size", "batch_size", 4, 2, TargetKind::kToml, "train")}, "job.toml");
    REQUIRE(rebased);
    CHECK(rebased->text == "# tuned\n[train]\nbatch_size = 2\n\n[sample]\nwidth = 1024\n");
    const auto broken = triage::rebase_changes(
        TargetKind::kToml, base, "[train\nbatch_size = 4\n",
        {change("lower_batch_size", "batch_size", 4, 2, TargetKind::kToml, "train")}, "job.toml");
    REQUIRE_FALSE(broken);
    CHECK(broken.error().message.rfind("job.toml:", 0) == 0);
  }
}
