// tests/parsers/real_torch_test.cc: real PyTorch (Debian's python3-torch) running a plain
// training loop with a tqdm bar (tests/real_trainers/plain_loop.py), out of host memory three
// ways: c10's allocator in the backward pass, the same in a preview, and the kernel's kill under
// a memory cgroup. No rule of any trainer names the loop's bar: its loss postfix makes it the
// training bar, so every crash gives its step (the last one the bar showed). Skips when torch is
// not installed, and the kill when no memory cgroup can be made.
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "parsers/log_analyzer.h"

#include "tests/support/e2e.h"
#include "tests/support/files.h"
#include "tests/support/skip.h"

namespace fs = std::filesystem;
using namespace oomtriage::parsers;
using namespace oomtriage::testing;

namespace {

const fs::path kLoop = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "real_trainers" / "plain_loop.py";

bool have_torch() {
  return std::system("/usr/bin/python3 -c 'import torch, tqdm' >/dev/null 2>&1") == 0;
}

// Runs `command` in a shell with stdout and stderr into `log`, as `train.sh > log 2>&1` does.
std::string run_into_log(const std::string& command, const fs::path& log) {
  const std::string line = fmt::format("{} > '{}' 2>&1", command, log.string());
  [[maybe_unused]] const int status = std::system(line.c_str());
  return slurp(log);
}

const OomEvent& the_event(const LogAnalysis& analysis) {
  REQUIRE(analysis.events.size() == 1);
  return analysis.events.front();
}

// A memory cgroup with `limit` bytes, v1 or v2, removed when done; empty when none can be made.
struct MemoryCgroup {
  fs::path dir;
  fs::path procs;
  explicit MemoryCgroup(uint64_t limit) {
    const std::string name = fmt::format("oomtriage-test-{}", ::getpid());
    const fs::path v1 = fs::path("/sys/fs/cgroup/memory") / name;
    const fs::path v2 = fs::path("/sys/fs/cgroup") / name;
    std::error_code ec;
    if (fs::is_directory("/sys/fs/cgroup/memory") && fs::create_directory(v1, ec) &&
        write_value(v1 / "memory.limit_in_bytes", limit)) {
      dir = v1;
    } else if (fs::exists("/sys/fs/cgroup/cgroup.controllers") && fs::create_directory(v2, ec) &&
               write_value(v2 / "memory.max", limit)) {
      dir = v2;
    }
    if (!dir.empty()) procs = dir / "cgroup.procs";
  }
  ~MemoryCgroup() {
    if (!dir.empty()) ::rmdir(dir.c_str());
  }
  static bool write_value(const fs::path& file, uint64_t value) {
    std::ofstream out(file);
    out << value;
    out.flush();
    return static_cast<bool>(out);
  }
};

}  // namespace

TEST_SUITE("parsers::real_torch") {
  TEST_CASE("real PyTorch out of host memory in a plain loop's backward pass and preview") {
    if (!have_torch()) {
      OOMTRIAGE_SKIP("python3-torch is not installed (scripts/setup.sh installs it)");
    }
    TempDir dir;
    const LogAnalysis backward = analyze_log(
        run_into_log("/usr/bin/python3 " + kLoop.string() + " backward", dir.path / "b.log"));
    const OomEvent& in_backward = the_event(backward);
    CHECK(in_backward.kind == OomKind::kHostMemoryError);
    CHECK(in_backward.phase == Phase::kTrainStep);
    CHECK(in_backward.step == 20);
    CHECK(in_backward.total_steps == 40);
    CHECK(in_backward.figures.tried_to_allocate_bytes.has_value());
    CHECK(backward.outcome == Outcome::kCrashedOom);

    const LogAnalysis preview = analyze_log(
        run_into_log("/usr/bin/python3 " + kLoop.string() + " preview", dir.path / "p.log"));
    const OomEvent& in_preview = the_event(preview);
    CHECK(in_preview.kind == OomKind::kHostMemoryError);
    CHECK(in_preview.phase == Phase::kSampling);
    CHECK(in_preview.step == 20);
  }

  TEST_CASE("real PyTorch killed by the kernel under a memory cgroup, from a shell script") {
    if (!have_torch()) {
      OOMTRIAGE_SKIP("python3-torch is not installed (scripts/setup.sh installs it)");
    }
    MemoryCgroup cgroup(uint64_t{700} << 20);
    if (cgroup.dir.empty()) OOMTRIAGE_SKIP("no memory cgroup can be made here (needs root)");
    TempDir dir;
    const fs::path script = dir.path / "train.sh";
    std::ofstream(script) << "#!/bin/bash\necho \"starting\"\n/usr/bin/python3 " << kLoop.string()
                          << " kill\n";
    // The shell joins the cgroup, then runs the script: its "line 3: PID Killed" is the log's.
    const std::string log = run_into_log(fmt::format("bash -c 'echo $$ > {} && exec bash {}'",
                                                     cgroup.procs.string(), script.string()),
                                         dir.path / "k.log");
    const LogAnalysis killed = analyze_log(log);
    INFO(log.substr(log.size() > 400 ? log.size() - 400 : 0));
    const OomEvent& event = the_event(killed);
    CHECK(event.kind == OomKind::kHostKilled);
    CHECK(event.phase == Phase::kTrainStep);
    // tqdm redraws at most every 0.1 s: the step is the last count the bar showed before the
    // kill, which may lag the loop's 20.
    const size_t count_end = log.rfind("/40 [");
    REQUIRE(count_end != std::string::npos);
    const size_t count_start = log.rfind(' ', count_end) + 1;
    const int64_t shown = std::stoll(log.substr(count_start, count_end - count_start));
    CHECK(shown > 0);
    CHECK(shown <= 20);
    CHECK(event.step == shown);
  }
}
