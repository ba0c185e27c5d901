// tests/daemon/scan_command_test.cc: the real `oomtriage scan` binary, end to end: the JSON
// contract, config discovery beside the log, and exit codes on bad input.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <cstdio>
#include <chrono>
#include <thread>
#include <signal.h>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "parsers/event.h"
#include "tests/support/e2e.h"
#include "tests/support/files.h"

using oomtriage::testing::slurp;
using oomtriage::testing::wait_until;
namespace fs = std::filesystem;

namespace {

struct Run {
  int exit_code = -1;
  std::string out;
  std::string err;
};

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/oomtriage-test-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
}

// One state dir for the whole test binary: `fix --write` records what it applied there, never
// in the user's own store.
const fs::path& test_state_dir() {
  static const TempDir kState;
  return kState.path;
}

Run run(const std::string& args) {
  TempDir dir;
  const fs::path err = dir.path / "stderr";
  const std::string command = std::string(OOMTRIAGE_BINARY) + " --state-dir " +
                              test_state_dir().string() + " " + args + " 2>" + err.string();
  Run result;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.out.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.err = slurp(err);
  return result;
}

const fs::path kGolden = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "testdata" / "logs";

}  // namespace

TEST_SUITE("daemon::scan") {
  TEST_CASE("scan --json prints the contract's shape for several logs") {
    const Run r = run("scan --json " + (kGolden / "aitk_sampling_oom_step500.log").string() + " " +
                      (kGolden / "aitk_completed.log").string());
    REQUIRE(r.exit_code == 0);
    const auto doc = nlohmann::json::parse(r.out);
    CHECK(doc["oomtriage"] == 1);
    REQUIRE(doc["logs"].size() == 2);
    const auto& log = doc["logs"][0];
    CHECK(log["trainer"] == "ai-toolkit");
    CHECK(log["outcome"] == "crashed_oom");
    CHECK(log["job"]["name"] == "my_lora");
    CHECK(log["job"]["config_path"].is_null());
    CHECK(log["fixes"].is_array());
    REQUIRE(log["events"].size() == 1);
    const auto& event = log["events"][0];
    for (const char* key : {"kind",
                            "recovered",
                            "phase",
                            "step",
                            "total_steps",
                            "gpu_index",
                            "tried_to_allocate_bytes",
                            "total_capacity_bytes",
                            "free_bytes",
                            "allocated_by_pytorch_bytes",
                            "reserved_unallocated_bytes",
                            "reserved_total_bytes",
                            "this_process_in_use_bytes",
                            "other_processes",
                            "line",
                            "offset",
                            "exception",
                            "message",
                            "phase_evidence",
                            "step_evidence"}) {
      CAPTURE(key);
      CHECK(event.contains(key));
    }
    CHECK(event["kind"] == "cuda");
    CHECK(event["phase"] == "sampling");
    CHECK(event["step"] == 500);
    CHECK(event["total_steps"] == 3000);
    CHECK(event["tried_to_allocate_bytes"] == 1610612736);
    CHECK(event["reserved_total_bytes"].is_null());
    CHECK(event["exception"] == "torch.OutOfMemoryError");
    // Why sampling and why 500: the lines that showed them.
    CHECK(event["phase_evidence"]["source"] == "frame");
    CHECK(event["phase_evidence"]["text"].get<std::string>().find("generate_images") !=
          std::string::npos);
    CHECK(event["phase_evidence"]["line"].get<int64_t>() >
          event["step_evidence"]["line"].get<int64_t>());
    CHECK(event["step_evidence"]["source"] == "bar");
    CHECK(event["step_evidence"]["text"].get<std::string>().find("500/3000") != std::string::npos);
    CHECK(doc["logs"][1]["outcome"] == "completed");
    CHECK(doc["logs"][1]["events"].empty());
  }
  TEST_CASE("the job config beside the log names the job and is hashed") {
    TempDir dir;
    const fs::path job = dir.path / "output" / "flux_job";
    fs::create_directories(job);
    fs::copy_file(kGolden / "aitk_gc_off_oom_step2.log", job / "log.txt");
    write(job / "config.yaml",
          "job: extension\nconfig:\n  name: flux_job_from_config  # the job's name\n  process:\n"
          "    - type: sd_trainer\n      train:\n        gradient_checkpointing: false\n");
    const Run r = run("scan --json " + (job / "log.txt").string());
    REQUIRE(r.exit_code == 0);
    const auto doc = nlohmann::json::parse(r.out);
    const auto& j = doc["logs"][0]["job"];
    CHECK(j["name"] == "flux_job_from_config");
    CHECK(j["config_path"] == (job / "config.yaml").string());
    CHECK(j["config_sha256"].get<std::string>().size() == 64);
    const auto& fixes = doc["logs"][0]["fixes"];
    REQUIRE_FALSE(fixes.empty());
    CHECK(fixes[0]["id"] == "enable_gradient_checkpointing");
    CHECK(fixes[0]["rank"] == 1);
    CHECK(fixes[0]["changes"][0]["path"] == "config.process[0].train.gradient_checkpointing");
    CHECK(fixes[0]["changes"][0]["from"] == false);
    CHECK(fixes[0]["changes"][0]["to"] == true);
  }
  TEST_CASE("a config without config.process is reported with its file and line") {
    TempDir dir;
    fs::copy_file(kGolden / "aitk_gc_off_oom_step2.log", dir.path / "log.txt");
    write(dir.path / "config.yaml", "job: extension\nconfig:\n  name: x\n  process: []\n");
    const Run r = run("scan --json " + (dir.path / "log.txt").string());
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("config.yaml:2: config.process is missing or empty") != std::string::npos);
    CHECK(nlohmann::json::parse(r.out)["logs"][0]["fixes"][0]["why"].get<std::string>().find(
              "did not parse") != std::string::npos);
  }
  TEST_CASE("a broken config is named with its line, and the scan goes on without it") {
    TempDir dir;
    fs::copy_file(kGolden / "aitk_gc_off_oom_step2.log", dir.path / "log.txt");
    write(dir.path / "config.yaml", "config:\n  name: [unclosed\n  process: x\n");
    const Run r = run("scan " + (dir.path / "log.txt").string());
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("config.yaml:") != std::string::npos);
    CHECK(r.out.find("crashed_oom") != std::string::npos);
  }
  TEST_CASE("text output tells the story without colour when piped") {
    const Run r = run("scan " + (kGolden / "aitk_bucket_oom_random_step_abort.log").string());
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("\x1b[") == std::string::npos);
    CHECK(r.out.find("OOM 4: cuda in train_step, step 1340/3000") != std::string::npos);
    CHECK(r.out.find("(recovered)") != std::string::npos);
  }
  TEST_CASE("bad input: a missing file, a directory, an empty file, binary garbage") {
    TempDir dir;
    Run r = run("scan " + (dir.path / "nope.log").string());
    CHECK(r.exit_code == 2);
    CHECK(r.err.find("nope.log") != std::string::npos);

    r = run("scan " + dir.path.string());  // a folder with no logs in it
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("no logs in this folder") != std::string::npos);

    write(dir.path / "empty.log", "");
    r = run("scan --json " + (dir.path / "empty.log").string());
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("empty file") != std::string::npos);
    CHECK(nlohmann::json::parse(r.out)["logs"][0]["outcome"] == "unknown");

    std::string garbage;
    for (int i = 0; i < 100000; ++i) garbage.push_back(static_cast<char>((i * 7919) % 256));
    write(dir.path / "garbage.bin", garbage);
    r = run("scan --json " + (dir.path / "garbage.bin").string());
    CHECK(r.exit_code == 0);
    CHECK(r.err.find("does not look like a text log") != std::string::npos);
    CHECK_FALSE(nlohmann::json::parse(r.out, nullptr, false).is_discarded());

    // A good log after a bad one is still scanned; the worst exit code wins.
    r = run("scan --json " + (dir.path / "nope.log").string() + " " +
            (kGolden / "aitk_host_sigkill.log").string());
    CHECK(r.exit_code == 2);
    CHECK(nlohmann::json::parse(r.out)["logs"].size() == 1);
  }
  TEST_CASE("usage errors exit 1 with a message") {
    CHECK(run("scan").exit_code == 1);
    CHECK(run("frobnicate").exit_code == 1);
    CHECK(run("scan --trainer nonsense x.log").exit_code == 1);
    const Run v = run("version");
    CHECK(v.exit_code == 0);
    CHECK(v.out.rfind("oomtriage ", 0) == 0);
  }
  TEST_CASE("CLI habits: a mistyped command or trainer gets a did-you-mean, kohya is sd-scripts") {
    Run r = run("scna x.log");
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("unknown command 'scna'; did you mean 'scan'?") != std::string::npos);
    r = run("--color never reprot my_lora");
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("did you mean 'report'?") != std::string::npos);
    r = run("scan --trainer kohyaa x.log");
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("did you mean kohya") != std::string::npos);
    r = run("scan --json --trainer kohya " + (kGolden / "kohya_sample_oom_step500.log").string());
    CHECK(r.exit_code == 0);
    CHECK(nlohmann::json::parse(r.out)["logs"][0]["trainer"] == "sd-scripts");
    CHECK(oomtriage::parsers::trainer_from_string("Kohya_SS") ==
          oomtriage::parsers::Trainer::kSdScripts);
    CHECK(oomtriage::parsers::trainer_from_string("AI_Toolkit") ==
          oomtriage::parsers::Trainer::kAiToolkit);
    CHECK(oomtriage::parsers::trainer_from_string("hf") ==
          oomtriage::parsers::Trainer::kTransformers);
    CHECK_FALSE(oomtriage::parsers::trainer_from_string("kohyaa"));
  }
  TEST_CASE("CLI habits: scan - reads standard input, --fail-on-oom gates a script, path:line") {
    const fs::path oom = kGolden / "aitk_sampling_oom_step500.log";
    const fs::path completed = kGolden / "aitk_completed.log";
    // Piped in, as `kubectl logs ... | oomtriage scan -` would.
    Run piped = run("scan --json - < " + oom.string());
    REQUIRE(piped.exit_code == 0);
    const Run direct = run("scan --json " + oom.string());
    auto a = nlohmann::json::parse(piped.out)["logs"][0];
    auto b = nlohmann::json::parse(direct.out)["logs"][0];
    CHECK(a["path"] == "-");
    CHECK(a["events"] == b["events"]);
    CHECK(a["outcome"] == b["outcome"]);
    piped = run("scan --json - < /dev/null");  // nothing: an empty input, said so
    CHECK(piped.exit_code == 0);
    // A real pipe (no file behind standard input).
    FILE* pipe = ::popen(("cat " + oom.string() + " | " + OOMTRIAGE_BINARY + " --state-dir " +
                          test_state_dir().string() + " scan --json -")
                             .c_str(),
                         "r");
    REQUIRE(pipe != nullptr);
    std::string through_pipe;
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;)
      through_pipe.append(buffer, n);
    CHECK(::pclose(pipe) == 0);
    CHECK(nlohmann::json::parse(through_pipe)["logs"][0]["events"] == b["events"]);

    CHECK(run("scan --fail-on-oom " + oom.string()).exit_code == 3);
    CHECK(run("scan --fail-on-oom " + completed.string()).exit_code == 0);
    CHECK(run("scan " + oom.string()).exit_code == 0);  // without it, an OOM is not a failure
    // Only recovered OOMs: the job went on, nothing fatal.
    CHECK(run("scan --fail-on-oom " + (kGolden / "aitk_recovered_then_completed.log").string())
              .exit_code == 0);
    // A missing file is still an environment failure, not "an OOM".
    CHECK(run("scan --fail-on-oom /nope.log " + oom.string()).exit_code == 2);

    // A rotated log compressed by logrotate reads as the log; a damaged one as far as it goes.
    TempDir dir;
    const fs::path gz = dir.path / "log.txt.1.gz";
    REQUIRE(std::system(("gzip -c " + oom.string() + " > " + gz.string()).c_str()) == 0);
    Run zipped = run("scan --json " + gz.string());
    REQUIRE(zipped.exit_code == 0);
    CHECK(nlohmann::json::parse(zipped.out)["logs"][0]["events"] == b["events"]);
    CHECK(zipped.err.find("does not look like a text log") == std::string::npos);
    const std::string whole = slurp(gz);
    write(dir.path / "cut.gz", whole.substr(0, whole.size() * 2 / 3));
    zipped = run("scan --json " + (dir.path / "cut.gz").string());
    CHECK(zipped.exit_code == 0);
    CHECK(zipped.err.find("damaged gzip data") != std::string::npos);
    CHECK(nlohmann::json::parse(zipped.out)["logs"][0]["trainer"] == "ai-toolkit");

    const Run text = run("scan --color never " + oom.string() + " " + completed.string());
    CHECK(text.out.find(oom.string() + ":67") != std::string::npos);
    CHECK(text.out.find("step from bar at " + oom.string() + ":") != std::string::npos);
    CHECK(text.out.find("2 logs: 1 crashed_oom, 1 completed; 1 OOM incident") != std::string::npos);
  }
  TEST_CASE("CLI habits: scan DIR walks it for logs, like rg - --glob chooses") {
    TempDir dir;
    const fs::path oom = kGolden / "aitk_sampling_oom_step500.log";
    fs::create_directories(dir.path / "a");
    fs::create_directories(dir.path / "b" / "captions");
    fs::create_directories(dir.path / ".git");
    fs::create_directories(dir.path / "c");
    fs::copy_file(oom, dir.path / "a" / "log.txt");
    fs::copy_file(kGolden / "aitk_completed.log", dir.path / "b" / "train.log");
    write(dir.path / "b" / "captions" / "img1.txt", "a photo of sks dog\n");
    write(dir.path / ".git" / "x.log", "not a training log\n");
    REQUIRE(
        std::system(("gzip -c " + oom.string() + " > " + (dir.path / "c" / "log.txt.1.gz").string())
                        .c_str()) == 0);
    Run r = run("scan --json " + dir.path.string());
    REQUIRE(r.exit_code == 0);
    auto logs = nlohmann::json::parse(r.out)["logs"];
    REQUIRE(logs.size() == 3);
    CHECK(logs[0]["path"] == (dir.path / "a" / "log.txt").string());
    CHECK(logs[1]["path"] == (dir.path / "b" / "train.log").string());
    CHECK(logs[2]["path"] == (dir.path / "c" / "log.txt.1.gz").string());
    CHECK(logs[2]["outcome"] == "crashed_oom");
    r = run("scan --json --glob '*.txt' " + dir.path.string());
    logs = nlohmann::json::parse(r.out)["logs"];
    REQUIRE(logs.size() == 2);
    CHECK(logs[1]["path"] == (dir.path / "b" / "captions" / "img1.txt").string());
    CHECK(run("scan --fail-on-oom " + dir.path.string()).exit_code == 3);
  }
  TEST_CASE("CLI habits: scan --follow prints each incident as it happens") {
    TempDir dir;
    const fs::path log = dir.path / "log.txt";
    write(log, "Running 1 job\n");
    const fs::path out = dir.path / "out";
    const std::string command = std::string(OOMTRIAGE_BINARY) + " scan --json --follow " +
                                log.string() + " > " + out.string() + " 2>&1 & echo $!";
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    char pid_text[32] = {};
    REQUIRE(std::fgets(pid_text, sizeof pid_text, pipe) != nullptr);
    ::pclose(pipe);
    const pid_t pid = std::atoi(pid_text);
    const std::string golden = slurp(kGolden / "aitk_sampling_oom_step500.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(slurp(out).empty());  // nothing happened yet
    {
      std::ofstream append(log, std::ios::binary | std::ios::app);
      append << golden;
    }
    const bool seen = wait_until([&] { return slurp(out).find('\n') != std::string::npos; });
    ::kill(pid, SIGTERM);
    wait_until([&] { return ::kill(pid, 0) != 0; }, std::chrono::seconds(5));
    REQUIRE(seen);
    const std::string printed = slurp(out);
    const auto line = nlohmann::json::parse(printed.substr(0, printed.find('\n')));
    CHECK(line["events"].size() == 1);
    CHECK(line["events"][0]["phase"] == "sampling");
    CHECK(line["events"][0]["step"] == 500);
    // Ranked on the same path as scan's: the same fixes for the same incident.
    const auto scanned = nlohmann::json::parse(run("scan --json " + log.string()).out)["logs"][0];
    REQUIRE(!line["fixes"].empty());
    CHECK(line["fixes"] == scanned["fixes"]);
  }
  TEST_CASE("CLI habits: scan --follow reads a truncated log and a rotated one from their start") {
    TempDir dir;
    const fs::path log = dir.path / "log.txt";
    write(log, "Running 1 job\n" + slurp(kGolden / "aitk_sampling_oom_step500.log"));
    const fs::path out = dir.path / "out";
    const fs::path err = dir.path / "err";
    const std::string command = std::string(OOMTRIAGE_BINARY) + " scan --json --follow " +
                                log.string() + " > " + out.string() + " 2> " + err.string() +
                                " & echo $!";
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    char pid_text[32] = {};
    REQUIRE(std::fgets(pid_text, sizeof pid_text, pipe) != nullptr);
    ::pclose(pipe);
    const pid_t pid = std::atoi(pid_text);
    // The incidents printed so far, one JSON object a line; waited for with a bounded poll.
    const auto printed = [&] {
      std::vector<nlohmann::json> lines;
      std::istringstream in(slurp(out));
      for (std::string line; std::getline(in, line);) {
        lines.push_back(nlohmann::json::parse(line, nullptr, false));
      }
      return lines;
    };
    const auto wait_for = [&](size_t count) {
      return oomtriage::testing::wait_until([&] { return printed().size() >= count; },
                                            std::chrono::seconds(20));
    };
    const bool first = wait_for(1);
    // copytruncate, and the writer goes on with a shorter log.
    if (first) write(log, slurp(kGolden / "diffusers_train_step_oom.log"));
    const bool truncated = first && wait_for(2);
    // Rotated: renamed away, and a new file under the name.
    if (truncated) {
      fs::rename(log, dir.path / "log.txt.1");
      write(log, slurp(kGolden / "aitk_gc_off_oom_step2.log"));
    }
    const bool rotated = truncated && wait_for(3);
    ::kill(pid, SIGTERM);
    oomtriage::testing::wait_until([&] { return ::kill(pid, 0) != 0; });
    INFO("stderr: " << slurp(err));
    REQUIRE(first);
    REQUIRE(truncated);
    REQUIRE(rotated);
    const auto lines = printed();
    REQUIRE(lines.size() == 3);
    CHECK(lines[0]["events"][0]["step"] == 500);
    CHECK(lines[1]["events"][0]["phase"] == "train_step");
    CHECK(lines[1]["events"][0]["step"] == 37);
    CHECK(lines[2]["events"][0]["step"] == 2);
    const std::string said = slurp(err);
    CHECK(said.find("was truncated") != std::string::npos);
    CHECK(said.find("was rotated away") != std::string::npos);
  }
  TEST_CASE("fix prints a unified diff of the top fix and --write writes the patched config") {
    TempDir dir;
    const fs::path job = dir.path / "my_lora";
    fs::create_directories(job);
    fs::copy_file(kGolden / "aitk_sampling_oom_step500.log", job / "log.txt");
    const std::string yaml =
        "job: extension\nconfig:\n  name: my_lora\n  process:\n    - type: sd_trainer\n"
        "      train:\n        batch_size: 1  # keep\n        gradient_checkpointing: true\n"
        "        dtype: bf16\n      sample:\n        sample_every: 250\n        width: 1024\n"
        "        height: 1024\n        sample_steps: 30\n";
    write(job / "config.yaml", yaml);
    Run r = run("fix " + (job / "log.txt").string());
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("--- a/" + (job / "config.yaml").string()) == 0);
    CHECK(r.out.find("-        width: 1024\n") != std::string::npos);
    CHECK(r.out.find("+        width: 768\n") != std::string::npos);
    CHECK(r.err.find("cheapen_previews") != std::string::npos);

    const fs::path out = dir.path / "patched.yaml";
    r = run("fix " + (job / "log.txt").string() + " --fix disable_sampling --write " +
            out.string());
    REQUIRE(r.exit_code == 0);
    const std::string patched = slurp(out);
    CHECK(patched.find("        disable_sampling: true\n") != std::string::npos);
    CHECK(patched.find("batch_size: 1  # keep") != std::string::npos);
    CHECK(slurp(job / "config.yaml") == yaml);  // the original is untouched without --write on it

    r = run("fix " + (job / "log.txt").string() + " --rank 2");
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("+        disable_sampling: true") != std::string::npos);
  }
  TEST_CASE("fix --write applies a plan as one diff, and writes nothing when nothing fits") {
    TempDir dir;
    const fs::path job = dir.path / "flux_b4";
    fs::create_directories(job);
    // FLUX with checkpointing off and batch 4 dies at step 2 on a 23.55 GiB card: no single fix
    // fits it, checkpointing with half the batch does.
    const std::string oom =
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of {} of which 812.00 MiB is free. Including non-PyTorch memory, this "
        "process has {} memory in use. Of the allocated memory {} is allocated by "
        "PyTorch, and 301.45 MiB is reserved by PyTorch but unallocated.\n";
    const auto log = [&](const std::string& card, const std::string& in_use,
                         const std::string& allocated) {
      std::string text = oom;
      for (const std::string* value : {&card, &in_use, &allocated}) {
        text.replace(text.find("{}"), 2, *value);
      }
      return "Running 1 job\n# Running job: flux_b4\n"
             "flux_b4:   0%|          | 2/3000 [00:10<4:00:00,  5.00s/it, lr: 1.0e-04 loss: "
             "3.2e-01]\nTraceback (most recent call last):\n"
             "  File \"/app/ai-toolkit/run.py\", line 90, in <module>\n" +
             text;
    };
    write(job / "log.txt", log("23.55 GiB", "22.74 GiB", "21.87 GiB"));
    std::string yaml =
        slurp(fs::path(OOMTRIAGE_SOURCE_DIR) / "examples/training_folder/my_lora/config.yaml");
    yaml.replace(yaml.find("batch_size: 1"), 13, "batch_size: 4");
    yaml.replace(yaml.find("gradient_checkpointing: true"), 28, "gradient_checkpointing: false");
    write(job / "config.yaml", yaml);
    const fs::path out = dir.path / "patched.yaml";
    Run r = run("fix " + (job / "log.txt").string() + " --write " + out.string());
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    CHECK(r.err.find("combined_plan") != std::string::npos);
    // One diff carries both levers.
    CHECK(r.out.find("+        gradient_checkpointing: true") != std::string::npos);
    CHECK(r.out.find("+        batch_size: 2") != std::string::npos);
    const std::string patched = slurp(out);
    CHECK(patched.find("gradient_checkpointing: true") != std::string::npos);
    CHECK(patched.find("batch_size: 2") != std::string::npos);

    // The same job on an 8 GiB card: no fix or plan fits, so nothing is written.
    write(job / "log.txt", log("7.55 GiB", "7.40 GiB", "6.90 GiB"));
    const fs::path none = dir.path / "none.yaml";
    r = run("fix " + (job / "log.txt").string() + " --write " + none.string());
    CHECK(r.exit_code != 0);
    CHECK(r.err.find("nothing written") != std::string::npos);
    CHECK_FALSE(fs::exists(none));
  }
  TEST_CASE("fix again on the same old log after --write: nothing already applied is proposed") {
    TempDir dir;
    const fs::path job = dir.path / "again";
    fs::create_directories(job);
    fs::copy_file(kGolden / "aitk_sampling_oom_step500.log", job / "log.txt");
    write(job / "config.yaml",
          "job: extension\nconfig:\n  name: again\n  process:\n    - type: sd_trainer\n"
          "      train:\n        gradient_checkpointing: true\n        dtype: bf16\n"
          "      sample:\n        sample_every: 250\n        width: 1024\n        height: 1024\n"
          "        sample_steps: 30\n");
    Run r = run("fix " + (job / "log.txt").string() + " --write " + (job / "config.yaml").string());
    REQUIRE(r.exit_code == 0);
    CHECK(slurp(job / "config.yaml").find("width: 768") != std::string::npos);
    // The same old log again: the config already carries the fix; nothing is tightened further.
    r = run("fix " + (job / "log.txt").string() + " --write " + (job / "config.yaml").string());
    CHECK(r.exit_code == 0);
    CHECK(r.out.empty());
    CHECK(r.err.find("already carries cheapen_previews") != std::string::npos);
    CHECK(slurp(job / "config.yaml").find("width: 768") != std::string::npos);
    r = run("fix " + (job / "log.txt").string() + " --fix cheapen_previews");
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("already applied") != std::string::npos);
    // Another lever can still be chosen on purpose.
    r = run("fix " + (job / "log.txt").string() + " --fix disable_sampling");
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("+        disable_sampling: true") != std::string::npos);
  }
  TEST_CASE("fix refuses what it cannot do, with a clear message") {
    TempDir dir;
    fs::copy_file(kGolden / "aitk_sampling_oom_step500.log", dir.path / "log.txt");
    Run r = run("fix " + (dir.path / "log.txt").string());
    CHECK(r.exit_code == 1);
    // The log prints its config (AI Toolkit's JSON at the top): there is no file to patch.
    CHECK(r.err.find("only printed in the log") != std::string::npos);
    CHECK(r.err.find("--config FILE") != std::string::npos);

    write(dir.path / "config.yaml",
          "config:\n  name: x\n  process:\n    - train:\n        batch_size: 1\n");
    r = run("fix " + (dir.path / "log.txt").string() + " --fix frobnicate");
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("not a known fix id") != std::string::npos);
    r = run("fix " + (dir.path / "log.txt").string() + " --fix lower_batch_size");
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("not proposed") != std::string::npos);
    r = run("fix " + (dir.path / "log.txt").string() + " --rank 99");
    CHECK(r.exit_code == 1);
    r = run("fix " + (dir.path / "log.txt").string() + " --fix x --rank 1");
    CHECK(r.exit_code == 1);

    // A log whose top fix is not a config change.
    write(
        dir.path / "busy.log",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
        "capacity of 23.55 GiB of which 10.00 MiB is free. Process 11 has 12.00 GiB memory in use. "
        "Including non-PyTorch memory, this process has 11.00 GiB memory in use.\n");
    r = run("fix " + (dir.path / "busy.log").string() + " --config " +
            (dir.path / "config.yaml").string());
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("free_gpu") != std::string::npos);
    CHECK(r.err.find("not a config change") != std::string::npos);
  }
  TEST_CASE("fix edits a UI-written .job_config.json and keeps its key order") {
    TempDir dir;
    fs::copy_file(kGolden / "aitk_gc_off_oom_step2.log", dir.path / "log.txt");
    write(dir.path / ".job_config.json",
          "{\n  \"job\": \"extension\",\n  \"config\": {\n    \"name\": \"flux_gc_off\",\n"
          "    \"process\": [\n      {\n        \"type\": \"diffusion_trainer\",\n"
          "        \"train\": {\n          \"gradient_checkpointing\": false,\n"
          "          \"dtype\": \"bf16\"\n        }\n      }\n    ]\n  }\n}\n");
    const Run r = run("fix " + (dir.path / "log.txt").string());
    REQUIRE(r.exit_code == 0);
    CHECK(r.out.find("-          \"gradient_checkpointing\": false,\n+          "
                     "\"gradient_checkpointing\": true,\n") != std::string::npos);
  }
}
