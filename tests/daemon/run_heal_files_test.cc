// tests/daemon/run_heal_files_test.cc
//
// `oomtriage run --heal` and the user's files (issue 49, attack 6), end to end with the fake AI
// Toolkit (tests/fake_trainers/ai_toolkit.py): a run started from a copy an earlier run made, a
// copy an earlier run left, a name taken by a link, and a user who edits the config while the run
// goes on (the fake trainer plays the user: it edits the file just before it dies of its OOM, so
// the edit lands at a known point and no sleep decides the outcome). Skipped where Debian's
// python3-tqdm or python3-yaml is absent.
#include <doctest/doctest.h>

#include <map>

#include "daemon/common/digest.h"
#include "tests/support/e2e.h"
#include "tests/support/heal_job.h"
#include "tests/support/skip.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

const fs::path kFakeAiToolkit =
    fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "fake_trainers" / "ai_toolkit.py";

std::string job_text(const fs::path& dir) { return testing::heal_job_text(dir, "heal_files"); }

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

struct Ran {
  int code = -1;
  std::string err;
  std::string log;  // the trainer's output, every attempt
};

// `oomtriage run --heal --backoff 0 --log train.log -- python fake CONFIG` in `dir` with `env`.
// Its own output goes to a folder beside `dir`, so that `dir` holds only what the run writes.
Ran run_heal(const fs::path& dir, const std::string& config, const std::string& env) {
  const fs::path aside = dir.parent_path() / (dir.filename().string() + "-aside");
  fs::create_directories(aside);
  const std::string command =
      "cd '" + dir.string() + "' && exec env FAKE_VRAM_GIB=15 " + env + " '" OOMTRIAGE_BINARY +
      "' --state-dir '" + (aside / "state").string() +
      "' --color never run --heal --backoff 0 --log '" + (aside / "train.log").string() +
      "' -- /usr/bin/python3 '" + kFakeAiToolkit.string() + "' " + config + " >'" +
      (aside / "out.txt").string() + "' 2>'" + (aside / "err.txt").string() + "'";
  Ran ran;
  const int status = std::system(command.c_str());
  ran.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  ran.err = slurp(aside / "err.txt");
  ran.log = slurp(aside / "train.log");
  fs::remove_all(aside);
  return ran;
}

// Every entry under `dir` (a link by its target, not followed) -> the SHA-256 of its bytes.
std::map<std::string, std::string> digests(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    const std::string name = fs::relative(entry.path(), dir).string();
    if (entry.is_symlink()) {
      out[name] = "link to " + fs::read_symlink(entry.path()).string();
    } else if (entry.is_regular_file()) {
      out[name] = daemon::sha256_hex(slurp(entry.path()));
    }
  }
  return out;
}

// Each file that was there before is there after, byte for byte.
void check_unchanged(const std::map<std::string, std::string>& before,
                     const std::map<std::string, std::string>& after) {
  for (const auto& entry : before) {
    const std::string& name = entry.first;
    INFO(name);
    const auto found = after.find(name);
    REQUIRE(found != after.end());
    CHECK(found->second == entry.second);
  }
}

// The trainer's output for its `n`th start (1-based): what that attempt received.
std::string attempt_output(const std::string& log, int n) {
  size_t begin = std::string::npos;
  for (int i = 0; i < n; ++i) {
    begin = log.find("Running 1 job", begin == std::string::npos ? 0 : begin + 1);
    if (begin == std::string::npos) return "";
  }
  return log.substr(begin, log.find("Running 1 job", begin + 1) - begin);
}

int starts(const std::string& log) {
  int count = 0;
  for (size_t at = log.find("Running 1 job"); at != std::string::npos;
       at = log.find("Running 1 job", at + 1)) {
    ++count;
  }
  return count;
}

void require_python() {
  if (std::system("/usr/bin/python3 -c 'import tqdm, yaml' >/dev/null 2>&1") != 0) {
    OOMTRIAGE_SKIP("/usr/bin/python3 with tqdm and yaml is absent");
  }
}

}  // namespace

TEST_SUITE("daemon::run heal files") {
  TEST_CASE(
      "run --heal started from its own copy leaves it byte-identical, its copies take free names") {
    require_python();
    TempDir dir;
    // A user goes on from the copy an earlier run made.
    write_file(dir.path / "job.yaml", job_text(dir.path));
    write_file(dir.path / "job.oomtriage-2.yaml", job_text(dir.path));
    const auto before = digests(dir.path);
    const Ran ran = run_heal(dir.path, "job.oomtriage-2.yaml", "");
    INFO(ran.err);
    CHECK(ran.code == 0);
    CHECK(ran.err.find("healed: the job completed at attempt 3/3") != std::string::npos);
    check_unchanged(before, digests(dir.path));
    // Attempt 2's copy could not be job.oomtriage-2.yaml (the file the run started with): it is
    // the next free name, and attempt 3's the one after.
    CHECK(slurp(dir.path / "job.oomtriage-3.yaml").find("width: 768") != std::string::npos);
    CHECK(slurp(dir.path / "job.oomtriage-4.yaml").find("resolution: [512, 768]") !=
          std::string::npos);
    CHECK(ran.err.find("command: /usr/bin/python3 " + kFakeAiToolkit.string() + " " +
                       (dir.path / "job.oomtriage-3.yaml").string()) != std::string::npos);
    CHECK(attempt_output(ran.log, 2).find("\"width\": 768") != std::string::npos);
  }

  TEST_CASE("run --heal leaves a copy an earlier run left, and a link at a copy's name, alone") {
    require_python();
    TempDir dir;
    write_file(dir.path / "job.yaml", job_text(dir.path));
    // An earlier run's copy, which the user may have edited since.
    write_file(dir.path / "job.oomtriage-2.yaml",
               "# kept from Monday's run\n" + job_text(dir.path));
    // A link where attempt 3's copy would go: writing "the copy" would write through it.
    write_file(dir.path / "notes.txt", "the user's notes\n");
    fs::create_symlink("notes.txt", dir.path / "job.oomtriage-3.yaml");
    fs::create_directories(dir.path / "data");
    write_file(dir.path / "data" / "caption.txt", "a photo\n");
    const auto before = digests(dir.path);
    const Ran ran = run_heal(dir.path, "job.yaml", "");
    INFO(ran.err);
    CHECK(ran.code == 0);
    // Every file the folder held before the run is byte-identical after it (and each link
    // still points where it did).
    check_unchanged(before, digests(dir.path));
    CHECK(slurp(dir.path / "notes.txt") == "the user's notes\n");
    CHECK(slurp(dir.path / "job.oomtriage-4.yaml").find("width: 768") != std::string::npos);
    CHECK(slurp(dir.path / "job.oomtriage-5.yaml").find("resolution: [512, 768]") !=
          std::string::npos);
  }

  TEST_CASE("run --heal runs the user's edit of the config, with the run's fixes on top") {
    require_python();
    SUBCASE("edited while attempt 2 ran: attempt 3 runs the edit with both fixes") {
      TempDir dir;
      write_file(dir.path / "job.yaml", job_text(dir.path));
      // The user lowers the rank while attempt 2 runs (from job.oomtriage-2.yaml).
      const Ran ran =
          run_heal(dir.path, "job.yaml",
                   "FAKE_EDIT='job.yaml|linear: 16|linear: 8' FAKE_EDIT_RESUMED_ONLY=1");
      INFO(ran.err);
      CHECK(ran.code == 0);
      // The user's file holds the user's edit, untouched by the run.
      CHECK(slurp(dir.path / "job.yaml") == [&] {
        std::string edited = job_text(dir.path);
        edited.replace(edited.find("linear: 16"), 10, "linear: 8");
        return edited;
      }());
      CHECK(ran.err.find("job.yaml changed since attempt 2 began: attempt 3 uses your edit with "
                         "cheapen_previews, drop_top_bucket applied") != std::string::npos);
      const std::string third = attempt_output(ran.log, 3);
      CHECK(third.find("\"linear\": 8") != std::string::npos);        // the user's edit
      CHECK(third.find("\"width\": 768") != std::string::npos);       // cheapen_previews
      CHECK(third.find("1024x1024: 10 files") == std::string::npos);  // drop_top_bucket
      CHECK(third.find("768x768: 10 files") != std::string::npos);
      CHECK(attempt_output(ran.log, 2).find("\"linear\": 16") != std::string::npos);
    }
    SUBCASE("a key both the user and a fix change keeps the user's value") {
      TempDir dir;
      write_file(dir.path / "job.yaml", job_text(dir.path));
      // While attempt 2 runs the user sets the preview width, which cheapen_previews had set to
      // 768: the user's 640 stays; the fixes' other keys (the height, the buckets) are applied.
      const Ran ran = run_heal(dir.path, "job.yaml",
                               "FAKE_EDIT='job.yaml|        width: 1024|        width: 640' "
                               "FAKE_EDIT_RESUMED_ONLY=1");
      INFO(ran.err);
      CHECK(ran.code == 0);
      CHECK(ran.err.find("your sample.width kept") != std::string::npos);
      const std::string third = attempt_output(ran.log, 3);
      CHECK(third.find("\"width\": 640") != std::string::npos);
      CHECK(third.find("\"height\": 768") != std::string::npos);
      CHECK(third.find("1024x1024: 10 files") == std::string::npos);
    }
    SUBCASE("edited while attempt 1 ran: attempt 2 runs the edit with the fix, and says so") {
      TempDir dir;
      write_file(dir.path / "job.yaml", job_text(dir.path));
      const Ran ran = run_heal(dir.path, "job.yaml", "FAKE_EDIT='job.yaml|linear: 16|linear: 8'");
      INFO(ran.err);
      CHECK(ran.code == 0);
      CHECK(ran.err.find("job.yaml changed during attempt 1: attempt 2 uses your edit with "
                         "cheapen_previews applied") != std::string::npos);
      const std::string second = attempt_output(ran.log, 2);
      CHECK(second.find("\"linear\": 8") != std::string::npos);
      CHECK(second.find("\"width\": 768") != std::string::npos);
    }
    SUBCASE("an edit that no longer parses stops the run with file:line, before the next attempt") {
      TempDir dir;
      write_file(dir.path / "job.yaml", job_text(dir.path));
      const Ran ran = run_heal(dir.path, "job.yaml",
                               "FAKE_EDIT='job.yaml|        linear: 16|        linear: [16' "
                               "FAKE_EDIT_RESUMED_ONLY=1");
      INFO(ran.err);
      CHECK(ran.code != 0);
      CHECK(ran.err.find("job.yaml changed since attempt 2 began and no longer parses") !=
            std::string::npos);
      CHECK(ran.err.find("job.yaml:") != std::string::npos);
      CHECK(ran.err.find("attempt 3 is not started") != std::string::npos);
      CHECK(starts(ran.log) == 2);
      // The broken file is the user's: left as they saved it.
      CHECK(slurp(dir.path / "job.yaml").find("linear: [16") != std::string::npos);
    }
  }
}
