// tests/daemon/heal_copies_test.cc
//
// The copies of `run --heal` one call at a time (daemon/cli/heal_copies.h), with no trainer: a
// name taken by anyone is skipped, a copy keeps its original's permission bits, a copy of a copy
// is traced back to the user's file, and the user's edit made between the copy and the next
// attempt (the back-off, exactly) gives a new copy with the fixes on top and the line that says
// so; a broken edit is a problem that names the file and its line.
#include "daemon/cli/heal_copies.h"

#include <doctest/doctest.h>
#include <sys/stat.h>

#include "tests/support/e2e.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

triage::ConfigChange width(const fs::path& file, int from, int to) {
  triage::ConfigChange change;
  change.path = "config.process[0].sample.width";
  change.from = from;
  change.to = to;
  change.kind = parsers::TargetKind::kYaml;
  change.file = file.string();
  return change;
}

triage::ConfigChange batch(const fs::path& file, int from, int to) {
  triage::ConfigChange change = width(file, from, to);
  change.path = "config.process[0].train.batch_size";
  return change;
}

std::string job(int batch_size, int sample_width, const std::string& comment = "") {
  return comment +
         "config:\n  process:\n    - train:\n        batch_size: " + std::to_string(batch_size) +
         "\n      sample:\n        width: " + std::to_string(sample_width) + "\n";
}

parsers::NativeFile read(const fs::path& path) {
  return {parsers::TargetKind::kYaml, path.string(), slurp(path)};
}

}  // namespace

TEST_SUITE("daemon::heal copies") {
  TEST_CASE("a copy takes the first free name, never a file that is there, never a link") {
    TempDir dir;
    const fs::path original = dir.path / "job.yaml";
    std::ofstream(original) << job(4, 1024);
    ::chmod(original.c_str(), 0600);
    std::ofstream(dir.path / "job.oomtriage-2.yaml") << "an earlier run's\n";
    fs::create_symlink("/nonexistent/target", dir.path / "job.oomtriage-3.yaml");
    daemon::HealCopies copies;
    const auto made = copies.write(read(original), job(4, 768), "cheapen_previews",
                                   {width(original, 1024, 768)}, 2);
    REQUIRE(made);
    CHECK(*made == (dir.path / "job.oomtriage-4.yaml").string());
    CHECK(slurp(*made) == job(4, 768));
    CHECK(slurp(dir.path / "job.oomtriage-2.yaml") == "an earlier run's\n");
    CHECK(fs::is_symlink(dir.path / "job.oomtriage-3.yaml"));
    CHECK_FALSE(fs::exists("/nonexistent/target"));
    struct stat st {};
    REQUIRE(::stat(made->c_str(), &st) == 0);
    CHECK((st.st_mode & 077) == 0);  // as private as the original
    // A copy of the copy is named for the first stem, at the next free number.
    const auto next =
        copies.write(read(*made), job(2, 768), "lower_batch_size", {batch(*made, 4, 2)}, 3);
    REQUIRE(next);
    CHECK(*next == (dir.path / "job.oomtriage-5.yaml").string());
    // Nothing edited: nothing followed.
    const auto followed = copies.follow_edits(3);
    REQUIRE(followed);
    CHECK(followed->empty());
  }

  TEST_CASE("an edit during the back-off: a new copy from the edit with every fix on top") {
    TempDir dir;
    const fs::path original = dir.path / "job.yaml";
    std::ofstream(original) << job(4, 1024);
    daemon::HealCopies copies;
    const auto second = copies.write(read(original), job(4, 768), "cheapen_previews",
                                     {width(original, 1024, 768)}, 2);
    REQUIRE(second);
    // The back-off: the user adds a comment.
    std::ofstream(original) << job(4, 1024, "# tuned by hand\n");
    const auto followed = copies.follow_edits(2);
    REQUIRE(followed);
    REQUIRE(followed->size() == 1);
    const auto& edit = followed->front();
    CHECK(edit.problem.empty());
    CHECK(edit.stale_copy == *second);
    CHECK(edit.copy == (dir.path / "job.oomtriage-3.yaml").string());
    CHECK(slurp(edit.copy) == job(4, 768, "# tuned by hand\n"));
    CHECK(slurp(*second) == job(4, 768));  // the stale copy is left as it was
    const std::string line = daemon::followed_line(edit, 2);
    CHECK(line.find("job.yaml changed during the back-off: attempt 2 uses your edit with "
                    "cheapen_previews applied") != std::string::npos);
    // Attempt 2 crashes again: its copy (the followed one) is patched, and the user edits the
    // batch size meanwhile: the user's 1 stays, the width fix is still applied.
    const auto third = copies.write(read(edit.copy), job(2, 768, "# tuned by hand\n"),
                                    "lower_batch_size", {batch(edit.copy, 4, 2)}, 3);
    REQUIRE(third);
    std::ofstream(original) << job(1, 1024, "# tuned by hand\n");
    const auto again = copies.follow_edits(3);
    REQUIRE(again);
    REQUIRE(again->size() == 1);
    CHECK(slurp(again->front().copy) == job(1, 768, "# tuned by hand\n"));
    CHECK(daemon::followed_line(again->front(), 3)
              .find("(your train.batch_size kept; left out: train.batch_size 4 -> 2 of "
                    "lower_batch_size)") != std::string::npos);
  }

  TEST_CASE(
      "a broken edit is a problem naming the file and its line, a deleted file keeps its copy") {
    TempDir dir;
    const fs::path original = dir.path / "job.yaml";
    std::ofstream(original) << job(4, 1024);
    daemon::HealCopies copies;
    REQUIRE(copies.write(read(original), job(4, 768), "cheapen_previews",
                         {width(original, 1024, 768)}, 2));
    std::ofstream(original) << "config:\n  process: [\n";
    const auto followed = copies.follow_edits(2);
    REQUIRE(followed);
    REQUIRE(followed->size() == 1);
    CHECK(followed->front().problem.find("job.yaml:") != std::string::npos);
    CHECK(daemon::followed_line(followed->front(), 2).find("no longer parses") !=
          std::string::npos);
    CHECK_FALSE(fs::exists(dir.path / "job.oomtriage-3.yaml"));
    fs::remove(original);
    const auto gone = copies.follow_edits(2);
    REQUIRE(gone);
    CHECK(gone->empty());
  }
}
