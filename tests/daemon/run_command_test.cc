// tests/daemon/run_command_test.cc
//
// `oomtriage run` end to end with a fake AI Toolkit (tests/fake_trainers/ai_toolkit.py: the real
// tqdm, AI Toolkit's messages, saves and resume, a CUDA OOM when the config needs more than
// FAKE_VRAM_GIB). Skipped where Debian's python3-tqdm or python3-yaml is absent.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "tests/support/e2e.h"
#include "tests/support/heal_job.h"
#include "tests/support/http_test_server.h"
#include "tests/support/skip.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

const fs::path kFakeAiToolkit =
    fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "fake_trainers" / "ai_toolkit.py";

void require_python() {
  if (std::system("/usr/bin/python3 -c 'import tqdm, yaml' >/dev/null 2>&1") != 0) {
    OOMTRIAGE_SKIP("/usr/bin/python3 with tqdm and yaml is absent");
  }
}

void write_job(const fs::path& dir) {
  std::ofstream(dir / "job.yaml") << testing::heal_job_text(dir, "heal_lora");
}

struct Ran {
  int code = -1;
  std::string out;
  std::string err;
};

// Runs `oomtriage run ARGS -- python fake job.yaml` in `dir` with `env` added; waits for it,
// or signals it with `signal` once `signal_when` holds.
Ran run(const fs::path& dir, const std::vector<std::string>& args, const std::string& env,
        int signal = 0, const std::function<bool()>& signal_when = {}) {
  std::string command = "cd '" + dir.string() + "' && exec env " + env + " '" OOMTRIAGE_BINARY +
                        std::string("' --state-dir '") + (dir / "state").string() +
                        "' --color never run";
  for (const auto& a : args) command += " " + a;
  command += " -- /usr/bin/python3 '" + kFakeAiToolkit.string() + "' job.yaml";
  command += " >'" + (dir / "out.txt").string() + "' 2>'" + (dir / "err.txt").string() + "'";
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  if (signal != 0) {
    REQUIRE(wait_until(signal_when, 30s));
    ::kill(pid, signal);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  Ran ran;
  ran.code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  ran.out = slurp(dir / "out.txt");
  ran.err = slurp(dir / "err.txt");
  return ran;
}

}  // namespace

TEST_SUITE("daemon::run") {
  TEST_CASE("run --heal: a job that needs two fixes completes unattended, resumed from its saves") {
    require_python();
    TempDir dir;
    write_job(dir.path);
    const Ran ran =
        run(dir.path, {"--heal", "--backoff", "0", "--log", "train.log"}, "FAKE_VRAM_GIB=15");
    INFO(ran.err);
    CHECK(ran.code == 0);
    // The trainer's output passed through unchanged.
    CHECK(ran.out.find("# Running job: heal_lora") != std::string::npos);
    CHECK(ran.err.find("attempt 2/3") != std::string::npos);
    CHECK(ran.err.find("cheapen_previews") != std::string::npos);
    CHECK(ran.err.find("healed: the job completed at attempt 3/3") != std::string::npos);
    // Each restart resumed from the newest save (the fake says where it started).
    const std::string log = slurp(dir.path / "train.log");
    // (The second crash came at step 200, before its save: both restarts resume at 100.)
    const size_t first = log.find("Found step 100 in metadata");
    REQUIRE(first != std::string::npos);
    CHECK(log.find("Found step 100 in metadata", first + 1) != std::string::npos);
    CHECK(fs::exists(dir.path / "output" / "heal_lora" / "heal_lora_000000400.safetensors"));
    // The original config is untouched; each attempt's config is a copy beside it.
    CHECK(slurp(dir.path / "job.yaml").find("width: 1024") != std::string::npos);
    CHECK(slurp(dir.path / "job.oomtriage-2.yaml").find("width: 768") != std::string::npos);
    CHECK(fs::exists(dir.path / "job.oomtriage-3.yaml"));
    // Three runs of one job in the store, the last completed; the report tells the story.
    StoreView store{dir.path / "state" / "oomtriage.db"};
    const auto story = store.story("heal_lora");
    REQUIRE(story.has_value());
    REQUIRE(story->runs.size() == 3);
    CHECK(story->runs.back().outcome == "completed");
    CHECK(story->events.size() == 2);
    // Paths are stored absolute, though the command named them relative to its folder.
    for (const auto& run : story->runs) CHECK(run.log_path == (dir.path / "train.log").string());
    REQUIRE(story->snapshots.size() == 3);
    CHECK(story->snapshots[0].path == (dir.path / "job.yaml").string());
    CHECK(story->snapshots[2].path == (dir.path / "job.oomtriage-3.yaml").string());
    const auto fixes = nlohmann::json::parse(story->events.back().fixes_json);
    CHECK(fixes[0]["target"]["path"] == (dir.path / "job.oomtriage-2.yaml").string());
    const std::string report = (dir.path / "report.txt").string();
    REQUIRE(std::system(("'" OOMTRIAGE_BINARY "' --state-dir '" + (dir.path / "state").string() +
                         "' --color never report heal_lora >'" + report + "'")
                            .c_str()) == 0);
    const std::string text = slurp(report);
    CHECK(text.find("carried cheapen_previews from the previous crash") != std::string::npos);
    CHECK(text.find("worked: the run completed") != std::string::npos);
    CHECK(text.find("+          resolution: [512, 768]") != std::string::npos);
    CHECK(text.find("attempt 1/3, crashed_oom") != std::string::npos);
    CHECK(text.find("attempt 2/3: Make preview samples cheaper: sample.width 1024 -> 768") !=
          std::string::npos);
    CHECK(text.find("resumed at step 100, crashed_oom") != std::string::npos);
    CHECK(text.find("resumed at step 100, completed (healed)") != std::string::npos);
    // The fixes of the last crash are shown as what they are: for an incident healed since.
    CHECK(text.find("fixes for the last incident, best first (the job completed in a later run)") !=
          std::string::npos);
  }

  TEST_CASE(
      "run --heal: FLUX with checkpointing off and batch 4 completes in one restart, by a plan") {
    require_python();
    TempDir dir;
    // The job: no single fix fits a 24 GiB card (checkpointing alone leaves batch 4 at
    // 26 GiB, half the batch alone leaves every activation in VRAM), both together do. It dies
    // at step 2, the seed guide's GC-off signature.
    std::ofstream(dir.path / "job.yaml") << "job: extension\n"
                                            "config:\n"
                                            "  name: flux_b4\n"
                                            "  process:\n"
                                            "    - type: sd_trainer\n"
                                            "      training_folder: "
                                         << (dir.path / "output").string()
                                         << "\n"
                                            "      network:\n"
                                            "        type: lora\n"
                                            "        linear: 16\n"
                                            "      save:\n"
                                            "        save_every: 100\n"
                                            "      datasets:\n"
                                            "        - folder_path: /data/images\n"
                                            "          resolution: [512, 768, 1024]\n"
                                            "      train:\n"
                                            "        batch_size: 4\n"
                                            "        steps: 200\n"
                                            "        gradient_checkpointing: false\n"
                                            "        dtype: bf16\n"
                                            "      model:\n"
                                            "        name_or_path: black-forest-labs/FLUX.1-dev\n"
                                            "        is_flux: true\n"
                                            "        quantize: true\n"
                                            "      sample:\n"
                                            "        sample_every: 1000\n"
                                            "        width: 1024\n"
                                            "        height: 1024\n"
                                            "        sample_steps: 20\n";
    const Ran ran = run(dir.path, {"--heal", "--backoff", "0", "--log", "train.log"},
                        "FAKE_VRAM_GIB=24 FAKE_TRAIN_OOM_AT=2");
    INFO(ran.err);
    CHECK(ran.code == 0);
    CHECK(ran.err.find("attempt 2/3") != std::string::npos);
    CHECK(ran.err.find("healed: the job completed at attempt 2/3") != std::string::npos);
    // One restart, both levers in one copy of the config.
    const std::string second = slurp(dir.path / "job.oomtriage-2.yaml");
    CHECK(second.find("gradient_checkpointing: true") != std::string::npos);
    CHECK(second.find("batch_size: 2") != std::string::npos);
    CHECK_FALSE(fs::exists(dir.path / "job.oomtriage-3.yaml"));
    StoreView store{dir.path / "state" / "oomtriage.db"};
    const auto story = store.story("flux_b4");
    REQUIRE(story.has_value());
    REQUIRE(story->events.size() == 1);
    const auto fixes = nlohmann::json::parse(story->events.front().fixes_json);
    CHECK(fixes[0]["id"] == "combined_plan");
    CHECK(fixes[0]["parts"][0] == "enable_gradient_checkpointing");
  }

  TEST_CASE("run --heal stops: budget spent, a crash that is not an OOM, a resume at step 0") {
    require_python();
    {
      TempDir dir;
      write_job(dir.path);
      const Ran ran =
          run(dir.path, {"--heal", "--backoff", "0", "--max-attempts", "2"}, "FAKE_VRAM_GIB=15");
      CHECK(ran.code == 1);
      CHECK(ran.err.find("exhausted: 2 attempt(s) spent") != std::string::npos);
    }
    {
      TempDir dir;
      write_job(dir.path);
      const Ran ran =
          run(dir.path, {"--heal", "--backoff", "0"}, "FAKE_VRAM_GIB=40 FAKE_CRASH_OTHER=50");
      CHECK(ran.code == 1);
      CHECK(ran.err.find("not healed") != std::string::npos);
      CHECK(ran.err.find("attempt 2/3") == std::string::npos);
    }
    {
      TempDir dir;
      write_job(dir.path);
      const Ran ran =
          run(dir.path, {"--heal", "--backoff", "0"}, "FAKE_VRAM_GIB=15 FAKE_RESUME_BROKEN=1");
      INFO(ran.err);
      CHECK(ran.code != 0);
      CHECK(ran.err.find("attempt 2 did not resume") != std::string::npos);
      // Stopped before it trained past its first save again.
      CHECK(ran.err.find("attempt 3/3") == std::string::npos);
    }
  }

  TEST_CASE("run without --heal exits with the child's code and prints the fixes") {
    require_python();
    TempDir dir;
    write_job(dir.path);
    const Ran ran = run(dir.path, {}, "FAKE_VRAM_GIB=15");
    CHECK(ran.code == 1);
    CHECK(ran.err.find("cheapen_previews") != std::string::npos);
    CHECK(ran.err.find("attempt 2") == std::string::npos);
  }

  TEST_CASE("SIGTERM to run stops the child and no attempt follows") {
    require_python();
    TempDir dir;
    write_job(dir.path);
    const auto started = std::chrono::steady_clock::now();
    const Ran ran = run(
        dir.path, {"--heal", "--backoff", "0"}, "FAKE_VRAM_GIB=40 FAKE_STEP_SECONDS=0.05", SIGTERM,
        [&] { return slurp(dir.path / "out.txt").find("# Running job") != std::string::npos; });
    CHECK(ran.code != 0);
    CHECK(ran.err.find("stopped by a signal") != std::string::npos);
    // 400 steps at 50 ms would take 20 s: the child was stopped, not waited for.
    CHECK(std::chrono::steady_clock::now() - started < 15s);
    CHECK_FALSE(fs::exists(dir.path / "output" / "heal_lora" / "heal_lora_000000400.safetensors"));
  }
  TEST_CASE("run --heal --webhook sends each OOM and the healed verdict, once each") {
    require_python();
    TempDir dir;
    write_job(dir.path);
    HttpTestServer server([](const ReceivedRequest&, size_t) { return ScriptedResponse{}; });
    const Ran ran =
        run(dir.path, {"--heal", "--backoff", "0", "--webhook", server.url()}, "FAKE_VRAM_GIB=15");
    INFO(ran.err);
    REQUIRE(ran.code == 0);
    // run waits for the outbox before it exits: everything has arrived.
    std::vector<std::string> names;
    std::set<std::string> ids;
    for (const ReceivedRequest& request : server.requests()) {
      const auto body = nlohmann::json::parse(request.body);
      for (const auto& alert : body.at("alerts")) {
        names.push_back(alert.at("labels").at("alertname").get<std::string>());
      }
      ids.insert(request.headers.at("webhook-id"));
    }
    CHECK(std::count(names.begin(), names.end(), "TrainingOOM") == 2);
    CHECK(std::count(names.begin(), names.end(), "TrainingOOMHealed") == 1);
    CHECK(names.size() == 3);
    CHECK(ids.size() == 3);  // distinct idempotency keys: nothing sent twice
  }
}

TEST_SUITE("daemon::run pre-flight") {
  // FLUX.1-dev at 1024 px, batch 4, no gradient checkpointing: predicted not to fit 24 GiB.
  TEST_CASE("run --gpu warns before the launch and alerts once per config - it never blocks") {
    TempDir dir;
    std::string yaml =
        slurp(fs::path(OOMTRIAGE_SOURCE_DIR) / "examples/training_folder/my_lora/config.yaml");
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"batch_size: 1", "batch_size: 4"},
             {"gradient_checkpointing: true", "gradient_checkpointing: false"},
             {"resolution: [512, 768, 1024]", "resolution: [1024]"}}) {
      yaml.replace(yaml.find(from), from.size(), to);
    }
    std::ofstream(dir.path / "big.yaml") << yaml;
    HttpTestServer server([](const ReceivedRequest&, size_t) { return ScriptedResponse{}; });
    const auto run_big = [&](const std::string& gpu) {
      const std::string command = "cd '" + dir.path.string() + "' && '" OOMTRIAGE_BINARY +
                                  std::string("' --state-dir '") + (dir.path / "state").string() +
                                  "' run --gpu " + gpu + " --config big.yaml --job big --webhook " +
                                  server.url() + " -- /bin/true 2>'" +
                                  (dir.path / "err.txt").string() + "'";
      const int status = std::system(command.c_str());
      return std::make_pair(status, slurp(dir.path / "err.txt"));
    };
    const auto predicted = [&] {
      size_t n = 0;
      for (const ReceivedRequest& request : server.requests()) {
        const auto body = nlohmann::json::parse(request.body);
        for (const auto& alert : body.at("alerts")) {
          n += alert.at("labels").at("alertname") == "TrainingOOMPredicted";
        }
      }
      return n;
    };
    int status = 0;
    std::string err;
    std::tie(status, err) = run_big("24GiB");
    INFO(err);
    CHECK(status == 0);  // the child ran: a warning, not a refusal
    CHECK(err.find("oomtriage run: warning: predicted OOM in train_step") != std::string::npos);
    CHECK(predicted() == 1);
    // The same config again: the line again, the alert not.
    std::tie(status, err) = run_big("24GiB");
    CHECK(status == 0);
    CHECK(err.find("warning: predicted OOM") != std::string::npos);
    CHECK(predicted() == 1);
    // A card it fits nowhere near: nothing to say.
    std::tie(status, err) = run_big("2048GiB");
    CHECK(err.find("predicted OOM") == std::string::npos);
    CHECK(predicted() == 1);
    // A bad size is refused before anything runs.
    std::tie(status, err) = run_big("lots");
    CHECK(status != 0);
    CHECK(err.find("not a memory size") != std::string::npos);
  }

  // Read by content as `check` reads a config: not guessed from the extension and passed over.
  TEST_CASE("run --gpu judges a kohya TOML, a SimpleTuner config.json and a OneTrainer JSON too") {
    TempDir dir;
    const fs::path configs = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests/testdata/configs";
    // All train FLUX.1-dev (SimpleTuner's in int8): its weights alone are over 8 GiB.
    for (const std::string file :
         {"kohya_flux_lora.toml", "simpletuner_config.json", "onetrainer_config.json"}) {
      CAPTURE(file);
      const std::string command = "'" OOMTRIAGE_BINARY + std::string("' --state-dir '") +
                                  (dir.path / "state").string() + "' run --gpu 8GiB --config '" +
                                  (configs / file).string() + "' --job " + file +
                                  " -- /bin/true 2>'" + (dir.path / "err.txt").string() + "'";
      CHECK(std::system(command.c_str()) == 0);
      const std::string err = slurp(dir.path / "err.txt");
      INFO(err);
      CHECK(err.find("oomtriage run: warning: predicted OOM in") != std::string::npos);
    }
  }

  // A command line is read as `check -- COMMAND` reads it: the config its trainer's flag names,
  // not the first file with a config's extension (here accelerate's own YAML).
  TEST_CASE("run --gpu reads the config a command line names, and says when it cannot read one") {
    TempDir dir;
    const fs::path configs = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests/testdata/configs";
    for (const std::string file : {"kohya_flux_lora.toml", "kohya_dataset.toml"}) {
      fs::copy_file(configs / file, dir.path / file);
    }
    std::ofstream(dir.path / "accelerate.yaml") << "compute_environment: LOCAL_MACHINE\n"
                                                   "num_processes: 1\n"
                                                   "mixed_precision: bf16\n";
    std::ofstream(dir.path / "broken.yaml") << "config: [\n";
    const auto run_with = [&](const std::string& args) {
      const std::string command = "cd '" + dir.path.string() + "' && '" OOMTRIAGE_BINARY +
                                  std::string("' --state-dir '") + (dir.path / "state").string() +
                                  "' run --gpu 8GiB " + args + " 2>'" +
                                  (dir.path / "err.txt").string() + "'";
      const int status = std::system(command.c_str());
      return std::make_pair(status, slurp(dir.path / "err.txt"));
    };
    int status = 0;
    std::string err;
    std::tie(status, err) = run_with(
        "--job kohya -- /bin/true launch --config_file accelerate.yaml "
        "flux_train_network.py --config_file kohya_flux_lora.toml");
    INFO(err);
    CHECK(status == 0);
    CHECK(err.find("oomtriage run: warning: predicted OOM in") != std::string::npos);
    CHECK(err.find("no pre-flight") == std::string::npos);

    // A config that does not parse: one line naming it, and the job still runs.
    std::tie(status, err) = run_with("--config broken.yaml --job broken -- /bin/true");
    CHECK(status == 0);
    const std::string line = "oomtriage run: no pre-flight check: ";
    const size_t said = err.find(line);
    REQUIRE(said != std::string::npos);
    CHECK(err.find("broken.yaml", said) != std::string::npos);
    CHECK(err.find(line, said + line.size()) == std::string::npos);  // once
    CHECK(err.find("predicted OOM") == std::string::npos);

    // A command that names no config and passes no arguments to read: said, not skipped.
    std::tie(status, err) = run_with("--job bare -- /bin/true");
    CHECK(status == 0);
    CHECK(err.find("oomtriage run: no pre-flight check: ") != std::string::npos);
  }
}
