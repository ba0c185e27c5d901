// tests/daemon/slurm_source_test.cc
//
// Slurm jobs as a job source: squeue's output (fields padded to their widths, as --Format
// prints them) read into jobs and paths; a command run with a time limit; and the daemon with a
// fake squeue on PATH that prints that format: the running jobs' output files are followed and
// their OOMs stored under the files' names, a job that starts later is found at the next poll,
// and a squeue that fails is logged once while the rest goes on.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "daemon/common/daemon_config.h"
#include "daemon/service/slurm_queue.h"
#include "tests/support/e2e.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

// One line as `squeue --Format=JobID:40,ArrayJobID:40,ArrayTaskID:40,STDOUT:4096` prints it.
std::string squeue_line(const std::string& job, const std::string& array_job,
                        const std::string& task, const std::string& path) {
  return fmt::format("{:<40}{:<40}{:<40}{:<4096}\n", job, array_job, task, path);
}

}  // namespace

TEST_SUITE("daemon::slurm") {
  TEST_CASE("squeue's padded --Format output reads as jobs and their output files") {
    const std::string output =
        squeue_line("1234", "1234", "N/A", "/home/ana/runs/slurm-1234.out") +
        squeue_line("1240_7", "1240", "7", "/scratch/ana/slurm-1240_7.out") +
        squeue_line("1250", "1250", "N/A", "/data/my runs/flux lora.out") +
        squeue_line("1260", "1260", "N/A", "") +      // no file: nothing to follow
        "JOBID ARRAY_JOB_ID ARRAY_TASK_ID STDOUT\n";  // a header, were --noheader forgotten
    const auto jobs = daemon::parse_squeue(output);
    REQUIRE(jobs.size() == 3);
    CHECK(jobs[0].job_id == "1234");
    CHECK(jobs[0].array_task_id.empty());
    CHECK(jobs[0].stdout_path == "/home/ana/runs/slurm-1234.out");
    CHECK(jobs[1].job_id == "1240_7");
    CHECK(jobs[1].array_job_id == "1240");
    CHECK(jobs[1].array_task_id == "7");
    CHECK(jobs[2].stdout_path == "/data/my runs/flux lora.out");

    const auto command = daemon::squeue_command("gpu07");
    CHECK(std::find(command.begin(), command.end(), "--expand-patterns") != command.end());
    CHECK(std::find(command.begin(), command.end(), "--nodelist=gpu07") != command.end());
  }

  TEST_CASE("sacct's parsable line: the final state's first word, nothing while not final") {
    const std::string out = "4241|FAILED|1:0\n4242|OUT_OF_MEMORY|0:125\n";
    auto end = daemon::parse_sacct(out, "4242");
    REQUIRE(end);
    CHECK(end->state == "OUT_OF_MEMORY");
    CHECK(end->exit_code == "0:125");
    CHECK(daemon::parse_sacct(out, "4241")->state == "FAILED");
    CHECK(daemon::parse_sacct("4243|CANCELLED by 1000|0:15\r\n", "4243")->state == "CANCELLED");
    CHECK(daemon::parse_sacct("1240_7|TIMEOUT|0:0\n", "1240_7")->state == "TIMEOUT");
    CHECK_FALSE(daemon::parse_sacct("4244|RUNNING|0:0\n", "4244"));     // not over yet
    CHECK_FALSE(daemon::parse_sacct("4244|COMPLETING|0:0\n", "4244"));  // nor this
    CHECK_FALSE(daemon::parse_sacct("", "4244"));
    CHECK_FALSE(daemon::parse_sacct("42441|FAILED|1:0\n", "4244"));  // another job
    CHECK_FALSE(daemon::parse_sacct("garbage without bars\n", "4244"));
    const auto command = daemon::sacct_command("4242");
    CHECK(command == std::vector<std::string>{"sacct", "-j", "4242", "-X", "-n", "-P", "-o",
                                              "JobID,State,ExitCode"});
  }

  TEST_CASE("sacct tells a cgroup kill the log does not show from a CUDA OOM the log does") {
    TempDir dir;
    const fs::path bin = dir.path / "bin";
    const fs::path queue = dir.path / "queue.txt";
    const fs::path runs = dir.path / "runs";
    fs::create_directories(bin);
    fs::create_directories(runs);
    // Each poll and each question to sacct leaves a line (.polls, .asked), so the test waits for
    // the daemon's polls rather than for a time.
    std::ofstream(bin / "squeue") << "#!/bin/sh\necho >> \"$OOMTRIAGE_TEST_QUEUE.polls\"\n"
                                     "cat \"$OOMTRIAGE_TEST_QUEUE\"\n";
    // sacct answers from files the test writes: <job>.sacct, in sacct's parsable format.
    std::ofstream(bin / "sacct")
        << "#!/bin/sh\n"
           "[ \"$1 $3 $4 $5 $6 $7\" = \"-j -X -n -P -o JobID,State,ExitCode\" ] "
           "|| { echo \"unexpected: $*\" >&2; exit 2; }\n"
           "echo \"$2\" >> \"$OOMTRIAGE_TEST_QUEUE.asked\"\n"
           "cat \"$OOMTRIAGE_TEST_QUEUE.$2.sacct\" 2>/dev/null\n";
    fs::permissions(bin / "squeue", fs::perms::owner_all);
    fs::permissions(bin / "sacct", fs::perms::owner_all);
    const fs::path killed = runs / "slurm-7777.out";
    const fs::path cuda = runs / "slurm-7778.out";
    std::ofstream(killed) << "";
    std::ofstream(cuda) << "";
    std::ofstream(queue) << squeue_line("7777", "7777", "N/A", killed.string())
                         << squeue_line("7778", "7778", "N/A", cuda.string());
    const fs::path config = dir.path / "oomtriage.yaml";
    std::ofstream(config) << "watch:\n  - source: slurm\n    poll_seconds: 1\n";
    ScopedEnv path("PATH", bin.string() + ":" + std::getenv("PATH"));
    ScopedEnv queue_file("OOMTRIAGE_TEST_QUEUE", queue.string());
    DaemonProcess daemon(dir.path / "state", {"daemon", "--config", config.string()},
                         dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    const auto lines = [&](const std::string& suffix, const std::string& line) {
      std::istringstream text(slurp(queue.string() + suffix));
      size_t n = 0;
      for (std::string l; std::getline(text, l);) n += l == line;
      return n;
    };
    // Waits for `n` more polls of squeue: time on the daemon's poll clock, not a sleep.
    const auto polled = [&](size_t n) {
      const size_t from = lines(".polls", "");
      return wait_until([&] { return lines(".polls", "") >= from + n; });
    };
    REQUIRE(wait_until([&] { return view.story("slurm-7777") && view.story("slurm-7778"); }));

    // 7777 is killed by its cgroup while sampling at step 500: the log just stops. 7778 dies of
    // a CUDA OOM that its log shows.
    const std::string golden = slurp(kGolden / "aitk_sampling_oom_step500.log");
    write_slowly(killed, golden.substr(0, golden.find("Error running job:")));
    write_slowly(cuda, golden);
    REQUIRE(wait_until([&] { return view.events("slurm-7778") == 1; }));
    REQUIRE(polled(2));  // 7777's log was read, and has been quiet since
    CHECK(view.events("slurm-7777") == 0);
    CHECK(view.story("slurm-7777")->runs.at(0).outcome == "running");

    // Both leave the queue; sacct has its word only at the next poll for 7777 (still COMPLETING).
    std::ofstream(queue.string() + ".7777.sacct") << "7777|COMPLETING|0:0\n";
    std::ofstream(queue.string() + ".7778.sacct") << "7778|FAILED|1:0\n";
    std::ofstream(queue, std::ios::trunc) << "";
    // Asked twice: the first COMPLETING was heard before the second question.
    REQUIRE(wait_until([&] { return lines(".asked", "7777") >= 2; }));
    CHECK(view.events("slurm-7777") == 0);
    std::ofstream(queue.string() + ".7777.sacct", std::ios::trunc) << "7777|OUT_OF_MEMORY|0:125\n";
    REQUIRE(wait_until([&] { return view.events("slurm-7777") == 1; }));
    const auto story = *view.story("slurm-7777");
    const auto event = nlohmann::json::parse(story.events[0].event_json);
    CHECK(event["kind"] == "host_killed");
    CHECK(event["phase"] == "sampling");
    CHECK(event["step"] == 500);
    CHECK(event["recovered"] == false);
    CHECK(event["message"].get<std::string>().find("OUT_OF_MEMORY") != std::string::npos);
    CHECK(story.runs.at(0).outcome == "crashed_oom");
    // FAILED adds nothing to the CUDA OOM the log told.
    REQUIRE(polled(2));
    CHECK(view.events("slurm-7778") == 1);
    CHECK(nlohmann::json::parse(view.story("slurm-7778")->events[0].event_json)["kind"] == "cuda");
    CHECK(daemon.alive());
  }

  TEST_CASE("slurm rule mistakes are refused with the line") {
    TempDir dir;
    const fs::path config = dir.path / "oomtriage.yaml";
    for (const auto& [text, reason] : std::vector<std::pair<std::string, std::string>>{
             {"watch:\n  - source: slurm\n    logs: /x/*.out\n", "not `logs:`"},
             {"watch:\n  - source: slurm\n    poll_seconds: 0\n", "poll_seconds must be 1..3600"},
         }) {
      std::ofstream(config, std::ios::trunc) << text;
      const auto loaded = daemon::load_daemon_config(config.string());
      REQUIRE_FALSE(loaded);
      CHECK(loaded.error().message.find(reason) != std::string::npos);
      CHECK(loaded.error().message.find(":3") != std::string::npos);
    }
  }

  TEST_CASE("a command that hangs is killed at its time limit - one that fails is an error") {
    const auto start = std::chrono::steady_clock::now();
    auto hung = daemon::run_command({"sleep", "20"}, std::chrono::milliseconds(200));
    CHECK_FALSE(hung);
    CHECK(hung.error().message.find("did not answer within 200 ms") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
    auto failed = daemon::run_command({"false"}, std::chrono::seconds(5));
    REQUIRE_FALSE(failed);
    CHECK(failed.error().message.find("false failed (exit status 1)") != std::string::npos);
    CHECK_FALSE(daemon::run_command({"no-such-command-oomtriage"}, std::chrono::seconds(5)));
    auto said = daemon::run_command({"printf", "a\\nb"}, std::chrono::seconds(5));
    REQUIRE(said);
    CHECK(*said == "a\nb");
  }

  TEST_CASE("the daemon follows the output files squeue names, and finds a job that starts later") {
    TempDir dir;
    const fs::path bin = dir.path / "bin";
    const fs::path queue = dir.path / "queue.txt";
    fs::create_directories(bin);
    // A fake squeue: the real command line is required, the queue is a file the test writes.
    std::ofstream(bin / "squeue") << "#!/bin/sh\n"
                                     "case \"$*\" in *--expand-patterns*--Format=*STDOUT*) ;; "
                                     "*) echo \"unexpected: $*\" >&2; exit 2;; esac\n"
                                     "echo >> \"$OOMTRIAGE_TEST_QUEUE.polls\"\n"
                                     "[ -f \"$OOMTRIAGE_TEST_QUEUE.fail\" ] && exit 1\n"
                                     "cat \"$OOMTRIAGE_TEST_QUEUE\"\n";
    fs::permissions(bin / "squeue", fs::perms::owner_all);
    const fs::path runs = dir.path / "runs";
    fs::create_directories(runs);
    std::ofstream(queue) << squeue_line("1234", "1234", "N/A", (runs / "slurm-1234.out").string());
    std::ofstream(runs / "slurm-1234.out") << "";  // Slurm creates it when the job starts
    const fs::path config = dir.path / "oomtriage.yaml";
    std::ofstream(config) << "watch:\n  - source: slurm\n    poll_seconds: 1\n";

    ScopedEnv path("PATH", bin.string() + ":" + std::getenv("PATH"));
    ScopedEnv queue_file("OOMTRIAGE_TEST_QUEUE", queue.string());
    DaemonProcess daemon(dir.path / "state", {"daemon", "--config", config.string()},
                         dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    REQUIRE(wait_until([&] { return view.story("slurm-1234").has_value(); }));
    write_slowly(runs / "slurm-1234.out", slurp(kGolden / "aitk_sampling_oom_step500.log"));
    REQUIRE(wait_until([&] { return view.events("slurm-1234") == 1; }));
    const auto event = nlohmann::json::parse(view.story("slurm-1234")->events[0].event_json);
    CHECK(event["phase"] == "sampling");
    CHECK(event["step"] == 500);

    // squeue fails for a while: said once, and the daemon goes on.
    std::ofstream(queue.string() + ".fail") << "";
    REQUIRE(wait_until([&] {
      return daemon.stderr_text().find("slurm: squeue failed (exit status 1)") != std::string::npos;
    }));
    const auto polls = [&] {
      const std::string text = slurp(queue.string() + ".polls");
      return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
    };
    const size_t failing_since = polls();
    REQUIRE(wait_until([&] { return polls() >= failing_since + 2; }));  // two more polls
    const std::string err = daemon.stderr_text();
    CHECK(err.find("slurm: squeue failed") == err.rfind("slurm: squeue failed"));
    fs::remove(queue.string() + ".fail");

    // An array element starts: found at the next poll, read from its first byte.
    write_slowly(runs / "slurm-1240_7.out", slurp(kGolden / "aitk_gc_off_oom_step2.log"));
    std::ofstream(queue, std::ios::app)
        << squeue_line("1240_7", "1240", "7", (runs / "slurm-1240_7.out").string());
    REQUIRE(wait_until([&] { return view.events("slurm-1240_7") == 1; }));
    CHECK(view.events("slurm-1234") == 1);
    CHECK(daemon.alive());
  }
}
