// tests/daemon/gpu_process_identity_test.cc
//
// The daemon's GPU monitor (daemon/service/gpu_monitor.h) and attribution
// (daemon/service/gpu_attribution.h) on a /proc of the test's own, where a pid can be handed to
// another process between two samples as the kernel does when pids wrap: the new process is
// looked at afresh, and the old job's gauge, stored peak and near-OOM warning never get its
// memory; a process still running keeps its job without its /proc being read again; and a
// command line gives a process to a job only by the job's own files (its log, its config, its
// output folder), never by another job's weights or images it reads. A pid is also handed out
// again for real, where the machine lets a test choose the next pid. NVML is the stand-in
// library (tests/support/fake_nvml.cc), opened in this process; its cards are a state file.
#include <doctest/doctest.h>

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/io_context.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "daemon/common/metrics.h"
#include "daemon/common/nvml_sampler.h"
#include "daemon/service/gpu_attribution.h"
#include "daemon/service/gpu_monitor.h"
#include "db/store.h"
#include "tests/support/e2e.h"
#include "tests/support/skip.h"
#include "tests/support/virtual_clock.h"

extern char** environ;

using namespace oomtriage;
using namespace oomtriage::daemon;
using namespace oomtriage::testing;
using namespace std::chrono_literals;

namespace {

constexpr uint64_t kGiB = 1ull << 30;

// A /proc of the test's own: a process's stat (its parent and start time), working folder and
// command line. Writing a pid again is the kernel handing it to another process.
struct FakeProc {
  fs::path root;

  void process(int pid, uint64_t started, const fs::path& cwd, const std::vector<std::string>& args,
               int parent = 1) const {
    const fs::path dir = root / std::to_string(pid);
    fs::remove_all(dir);
    fs::create_directories(dir);
    // Fields 3 to 21 as a sleeping python has them; the 22nd is its start, in ticks after boot.
    std::ofstream(dir / "stat") << pid << " (python3) S " << parent << " " << pid << " " << pid
                                << " 0 -1 4194304 100 0 0 0 10 5 0 0 20 0 1 0 " << started
                                << " 1000000 500 18446744073709551615\n";
    fs::create_directory_symlink(cwd, dir / "cwd");
    std::string cmdline;
    for (const std::string& arg : args) cmdline += arg + '\0';
    std::ofstream(dir / "cmdline", std::ios::binary) << cmdline;
  }
  // The same process with another working folder and command line (what a process does not do:
  // a test that sees it took the answer it kept).
  void rewrite(int pid, const fs::path& cwd, const std::vector<std::string>& args) const {
    const fs::path dir = root / std::to_string(pid);
    fs::remove(dir / "cwd");
    fs::create_directory_symlink(cwd, dir / "cwd");
    std::string cmdline;
    for (const std::string& arg : args) cmdline += arg + '\0';
    std::ofstream(dir / "cmdline", std::ios::binary | std::ios::trunc) << cmdline;
  }
};

// Two followed jobs, A and B, each with its folder, log and run in a store; a 24 GiB card the
// stand-in NVML shows; the monitor sampling it on a virtual clock, through the fake /proc.
struct Rig {
  TempDir dir;
  FakeProc proc{dir.path / "proc"};
  fs::path data = dir.path / "data";
  fs::path nobody = dir.path / "elsewhere";
  fs::path cards = dir.path / "cards";
  ScopedEnv nvml_state{"FAKE_NVML_STATE", cards.string()};
  std::unique_ptr<db::Store> store;
  Metrics metrics;
  boost::asio::io_context io;
  VirtualClock clock{io};
  std::vector<SampledRun> runs;
  std::vector<AlertContent> warnings;
  std::vector<std::string> said;
  std::unique_ptr<GpuMonitor> monitor;  // last: gone before what it uses

  // `proc_root`: the /proc the monitor reads, by default the fake one.
  explicit Rig(std::string proc_root = "") {
    if (proc_root.empty()) proc_root = proc.root.string();
    fs::create_directories(proc.root);
    fs::create_directories(nobody);
    auto opened = db::Store::open((dir.path / "oomtriage.db").string());
    REQUIRE(opened);
    store = std::move(*opened);
    for (const char* name : {"jobA", "jobB"}) {
      const fs::path home = data / name;
      fs::create_directories(home);
      std::ofstream(home / "log.txt") << "steps:   0%|          | 0/1000\n";
      const int64_t job = *store->upsert_job(name, home.string(), "kohya", data.string(), 0);
      SampledRun run;
      run.run_id = *store->start_run(job, (home / "log.txt").string(), std::nullopt, 0);
      run.folder = home.string();
      run.logs = {(home / "log.txt").string()};
      run.config = (home / "config.toml").string();
      run.step = 10;
      run.phase = parsers::Phase::kTrainStep;
      run.alert.job = name;
      runs.push_back(run);
    }
    cards_hold({});
    monitor = std::make_unique<GpuMonitor>(
        io, *store, metrics, [this] { return clock.unix_now(); }, [this] { return runs; },
        [this](AlertContent alert) { warnings.push_back(std::move(alert)); },
        [this](const std::string& line) { said.push_back(line); }, clock, proc_root);
    auto sampler = NvmlSampler::open(OOMTRIAGE_FAKE_NVML);
    REQUIRE(sampler);
    monitor->start(1000ms, 0.95, std::move(*sampler));
    REQUIRE(wait_until([&] {
      io.restart();
      io.poll();
      return !said.empty();
    }));
    REQUIRE(said.front().rfind("sampling the memory of 1 GPU(s)", 0) == 0);
  }
  ~Rig() { monitor.reset(); }

  int64_t run_of(const char* job) const {
    for (const SampledRun& run : runs)
      if (run.alert.job == job) return run.run_id;
    return 0;
  }
  fs::path folder(const char* job) const { return data / job; }

  // Card 0 (24 GiB) with these processes: pid, bytes.
  void cards_hold(const std::vector<std::pair<int, uint64_t>>& processes) const {
    uint64_t used = 0;
    for (const auto& [pid, bytes] : processes) used += bytes;
    std::ofstream out(cards.string() + ".new");
    out << "gpu 0 " << 24 * kGiB << " " << used << "\n";
    for (const auto& [pid, bytes] : processes) out << "process 0 " << pid << " " << bytes << "\n";
    out.close();
    fs::rename(cards.string() + ".new", cards);
  }

  // One sampling turn, and what it came to handled on the loop.
  void sample() {
    metrics.gpu_other_memory.clear();  // each sample sets it again, card by card
    const auto due = clock.next_due();
    REQUIRE(due);
    clock.advance(*due - clock.now());
    REQUIRE(wait_until([&] {
      io.restart();
      io.poll();
      return !metrics.gpu_other_memory.empty();
    }));
  }

  std::optional<uint64_t> gauge(const char* job) const {
    const auto it = metrics.job_gpu_memory.find({job, 0});
    if (it == metrics.job_gpu_memory.end()) return std::nullopt;
    return it->second;
  }
  uint64_t stored_peak(const char* job) {
    auto rows = store->gpu_memory_of_run(run_of(job));
    REQUIRE(rows);
    uint64_t peak = 0;
    for (const db::GpuMemoryRow& row : *rows) peak = std::max(peak, row.peak_bytes);
    return peak;
  }
  // The memory a near-OOM warning for the job's run was stored at, if one was.
  std::optional<uint64_t> stored_warning(const char* job) {
    auto rows = store->gpu_memory_of_run(run_of(job));
    REQUIRE(rows);
    std::optional<uint64_t> warned;
    for (const db::GpuMemoryRow& row : *rows)
      if (row.warned_bytes) warned = row.warned_bytes;
    return warned;
  }
  std::vector<std::string> warned_jobs() const {
    std::vector<std::string> jobs;
    for (const AlertContent& alert : warnings) jobs.push_back(alert.job);
    return jobs;
  }
};

// `sh -c 'cd CWD && exec sleep 60'`: a process working in `cwd`, as a trainer in its job's
// folder; once it runs `sleep` its working folder is settled.
struct Sleeper {
  pid_t pid = -1;
  explicit Sleeper(const fs::path& cwd) {
    std::string script = "cd '" + cwd.string() + "' && exec sleep 60";
    std::vector<std::string> argv = {"sh", "-c", script};
    std::vector<char*> pointers;
    for (auto& arg : argv) pointers.push_back(arg.data());
    pointers.push_back(nullptr);
    REQUIRE(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, pointers.data(), environ) == 0);
  }
  void wait_running() const {
    REQUIRE(wait_until([&] {
      std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
      std::string name;
      return static_cast<bool>(comm >> name) && name == "sleep";
    }));
  }
  void end() {
    if (pid <= 0) return;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    pid = -1;
  }
  ~Sleeper() { end(); }
  Sleeper(const Sleeper&) = delete;
  Sleeper& operator=(const Sleeper&) = delete;
};

// Clock ticks since boot (USER_HZ: /proc/uptime's hundredths), the unit of a start time.
uint64_t ticks_since_boot() {
  std::ifstream uptime("/proc/uptime");
  double seconds = 0;
  uptime >> seconds;
  return static_cast<uint64_t>(seconds * 100);
}

}  // namespace

TEST_SUITE("daemon::gpu_attribution") {
  TEST_CASE(
      "a pid handed to another process between two samples is that process's, not the "
      "old job's") {
    Rig rig;
    // Job A's trainer, pid 4242, works in A's folder and holds 4 GiB.
    rig.proc.process(4242, 1000, rig.folder("jobA"), {"python3", "train_network.py"});
    rig.cards_hold({{4242, 4 * kGiB}});
    rig.sample();
    REQUIRE(rig.gauge("jobA") == 4 * kGiB);

    SUBCASE("the new process is another followed job's") {
      // A's trainer exits; before the next sample, job B's trainer gets pid 4242 and nears the
      // card's limit.
      rig.proc.process(4242, 5000, rig.folder("jobB"), {"python3", "train_network.py"});
      rig.cards_hold({{4242, 23 * kGiB + kGiB / 2}});
      rig.sample();
      CHECK(rig.gauge("jobB") == 23 * kGiB + kGiB / 2);
      CHECK_FALSE(rig.gauge("jobA"));
      CHECK(rig.warned_jobs() == std::vector<std::string>{"jobB"});
      CHECK_FALSE(rig.stored_warning("jobA"));
      CHECK(rig.stored_peak("jobA") == 4 * kGiB);  // A left the card: stored at once
    }
    SUBCASE("the new process is nobody's") {
      rig.proc.process(4242, 5000, rig.nobody, {"python3", "serve.py"});
      rig.cards_hold({{4242, 23 * kGiB + kGiB / 2}});
      rig.sample();
      CHECK_FALSE(rig.gauge("jobA"));
      CHECK_FALSE(rig.gauge("jobB"));
      CHECK(rig.metrics.gpu_other_memory[0] == 23 * kGiB + kGiB / 2);
      CHECK(rig.warnings.empty());
      CHECK(rig.stored_peak("jobA") == 4 * kGiB);
    }
    // Nothing of the new process's is A's: no warning stored under A's job either.
    auto kept = rig.store->list_warnings(std::nullopt, 10);
    REQUIRE(kept);
    for (const db::WarningRow& row : *kept) CHECK(row.job != "jobA");
  }

  TEST_CASE("real processes: a pid the kernel hands to another job's trainer moves nothing") {
    // The kernel gives the next process the pid after ns_last_pid (what CRIU restores pids
    // with): writable by root in the machine's pid namespace, read-only in most containers.
    const char* kLastPid = "/proc/sys/kernel/ns_last_pid";
    if (::access(kLastPid, W_OK) != 0) {
      skip_test(std::string(kLastPid) + " is not writable here: a pid cannot be handed out again");
      return;
    }
    Rig rig("/proc");
    Sleeper first(rig.folder("jobA"));
    first.wait_running();
    const pid_t pid = first.pid;
    rig.cards_hold({{pid, 4 * kGiB}});
    rig.sample();
    REQUIRE(rig.gauge("jobA") == 4 * kGiB);

    // A's trainer exits, B's trainer gets its pid. Start times count clock ticks: let one pass.
    const auto first_started = GpuAttribution().start_time(pid);
    REQUIRE(first_started);
    REQUIRE(wait_until([&] { return ticks_since_boot() > *first_started + 1; }));
    first.end();
    std::optional<Sleeper> second;
    for (int attempt = 0; attempt < 50 && !(second && second->pid == pid); ++attempt) {
      second.reset();  // another process on the machine took the pid first
      std::ofstream(kLastPid) << pid - 1;
      second.emplace(rig.folder("jobB"));
    }
    if (second->pid != pid) {
      second.reset();
      skip_test("pid " + std::to_string(pid) + " went to other processes 50 times");
      return;
    }
    second->wait_running();
    rig.cards_hold({{pid, 23 * kGiB + kGiB / 2}});
    rig.sample();
    CHECK(rig.gauge("jobB") == 23 * kGiB + kGiB / 2);
    CHECK_FALSE(rig.gauge("jobA"));
    // This test's binary is the sleepers' parent, so the monitor takes them for processes under
    // `oomtriage run` (its own binary above them), which warns for them itself: the warning is
    // not sent, but what it was is stored, with B's run. Stopping writes every run's timeline.
    rig.monitor->stop();
    CHECK(rig.warnings.empty());
    CHECK(rig.stored_warning("jobB") == 23 * kGiB + kGiB / 2);
    CHECK_FALSE(rig.stored_warning("jobA"));
    CHECK(rig.stored_peak("jobA") == 4 * kGiB);
  }

  TEST_CASE("a process still running keeps its job without its /proc being read again") {
    Rig rig;
    rig.proc.process(4242, 1000, rig.folder("jobA"), {"python3", "train_network.py"});
    rig.cards_hold({{4242, 4 * kGiB}});
    rig.sample();
    REQUIRE(rig.gauge("jobA") == 4 * kGiB);
    // The same process (same start) now looks like B's: a re-read would move it; the kept
    // answer does not.
    rig.proc.rewrite(4242, rig.folder("jobB"), {"python3", "train_network.py"});
    rig.cards_hold({{4242, 5 * kGiB}});
    for (int i = 0; i < 3; ++i) rig.sample();
    CHECK(rig.gauge("jobA") == 5 * kGiB);
    CHECK_FALSE(rig.gauge("jobB"));
    // Once NVML no longer lists it, what was kept goes: the pid seen again is looked at again.
    rig.cards_hold({});
    rig.sample();
    rig.cards_hold({{4242, 5 * kGiB}});
    rig.sample();
    CHECK(rig.gauge("jobB") == 5 * kGiB);
    CHECK_FALSE(rig.gauge("jobA"));
  }
}

TEST_SUITE("daemon::gpu_attribution") {
  TEST_CASE("a command line gives a process to a job by the job's own files, not its inputs") {
    TempDir dir;
    const FakeProc proc{dir.path / "proc"};
    const fs::path data = dir.path / "data";
    const fs::path nobody = dir.path / "elsewhere";
    for (const char* job : {"jobA", "jobB", "jobB/sweep"}) fs::create_directories(data / job);
    fs::create_directories(nobody);
    const auto home = [&](const char* job) { return (data / job).string(); };
    // B is listed before the job kept in a sub-folder of it: the innermost still wins.
    const std::vector<JobFiles> jobs = {
        {"jobA", home("jobA"), {home("jobA") + "/log.txt"}, "", home("jobA") + "/config.toml"},
        {"jobB", home("jobB"), {home("jobB") + "/log.txt"}, "", home("jobB") + "/config.yaml"},
        {"sweep", home("jobB/sweep"), {home("jobB/sweep") + "/log.txt"}, "", ""}};
    const GpuAttribution attribution(proc.root.string());
    int pid = 100;
    // A trainer working in nobody's folder, writing no job's log, started with `args`.
    const auto job_of = [&](std::vector<std::string> args) {
      args.insert(args.begin(), {"python3", "train_network.py"});
      proc.process(++pid, 7, nobody, args);
      return attribution.job_of(pid, jobs);
    };

    // Inputs from B's folder: another job's weights to resume or fine-tune from, its images, its
    // saved model, its state.
    CHECK_FALSE(job_of({"--network_weights", home("jobB") + "/jobB_000500.safetensors"}));
    CHECK_FALSE(job_of({"--network_weights=" + home("jobB") + "/jobB_000500.safetensors"}));
    CHECK_FALSE(job_of({"--train_data_dir", home("jobB") + "/img"}));
    CHECK_FALSE(job_of({"--pretrained_model_name_or_path", home("jobB")}));
    CHECK_FALSE(job_of({"--resume", home("jobB") + "/jobB-state"}));
    CHECK_FALSE(job_of({"--sample_prompts", home("jobB") + "/prompts.txt"}));
    // B's own: its config (by option or as the script's argument), its log, its output folder.
    CHECK(job_of({"--config_file", home("jobB") + "/config.yaml"}) == "jobB");
    CHECK(job_of({home("jobB") + "/config.yaml"}) == "jobB");
    CHECK(job_of({"--log=" + home("jobB") + "/log.txt"}) == "jobB");
    CHECK(job_of({"--output_dir", home("jobB")}) == "jobB");
    CHECK(job_of({"--logging-dir=" + home("jobB") + "/logs"}) == "jobB");
    CHECK(job_of({"--save_path", home("jobB") + "/model"}) == "jobB");
    // Relative to its working folder, and spelled with `..` and doubled slashes.
    CHECK(job_of({"--output_dir", "../data/jobB"}) == "jobB");
    CHECK(job_of({"--config_file", home("jobB") + "//./config.yaml"}) == "jobB");
    // Both at once: the config decides, the weights say nothing.
    CHECK(job_of({"--network_weights", home("jobB") + "/jobB_000500.safetensors", "--config_file",
                  home("jobA") + "/config.toml"}) == "jobA");
    // A job kept inside another's folder is its own.
    CHECK(job_of({"--output_dir", home("jobB/sweep")}) == "sweep");
    proc.process(++pid, 7, data / "jobB/sweep", {"python3", "train.py"});
    CHECK(attribution.job_of(pid, jobs) == "sweep");

    // The option names: outputs, and inputs that only look alike.
    for (const char* output :
         {"--output_dir", "output_path", "--out_dir", "--outdir", "--logging_dir", "--log-dir",
          "--logdir", "--save_to", "--workspace_dir", "--output_model_destination"})
      CHECK_MESSAGE(names_an_output(output), output);
    for (const char* input : {"--network_weights", "--train_data_dir", "--resume",
                              "--resume_from_checkpoint", "--pretrained_model_name_or_path",
                              "--dataset_config", "--log_with", "--config_file", "", "-c"})
      CHECK_MESSAGE(!names_an_output(input), input);
  }

  TEST_CASE("a process's start time, which tells it from a later one with its pid") {
    TempDir dir;
    const FakeProc proc{dir.path / "proc"};
    proc.process(300, 123456789, dir.path, {"python3"});
    const GpuAttribution fake(proc.root.string());
    CHECK(fake.start_time(300) == 123456789u);
    CHECK_FALSE(fake.start_time(301));  // gone
    // A comm with spaces and parentheses does not shift the fields.
    std::ofstream(proc.root / "300" / "stat")
        << "300 (py (a) b) S 1 300 300 0 -1 4194304 100 0 0 0 10 5 0 0 20 0 1 0 42 1000 5\n";
    CHECK(fake.start_time(300) == 42u);
    // The real /proc: this process's start is the same each time it is asked.
    const GpuAttribution real;
    const auto mine = real.start_time(::getpid());
    REQUIRE(mine);
    CHECK(real.start_time(::getpid()) == mine);
  }
}
