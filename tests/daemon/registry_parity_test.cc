// tests/daemon/registry_parity_test.cc
//
// One job registry for every command: each golden and trainer log, in a job folder (some with
// their trainer's own config beside them), goes through `scan --json` and through the daemon
// (`watch`), and the daemon's stored fixes for the incident scan answers must be scan's, byte for
// byte as JSON. The jobs with native configs also check that the top fix is written in the
// trainer's own file and syntax.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>

#include "tests/support/e2e.h"

using namespace oomtriage::testing;
using nlohmann::json;

namespace {

const fs::path kTrainerLogs =
    fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "testdata" / "trainer-logs";
const fs::path kConfigs = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "testdata" / "configs";

std::string scan_json(const fs::path& log) {
  return run_shell(std::string(OOMTRIAGE_BINARY) + " scan --json " + log.string() + " 2>/dev/null")
      .second;
}

// The incident scan's fixes answer: the last one not recovered, else the last.
const json* incident_to_fix(const json& events) {
  for (auto it = events.rbegin(); it != events.rend(); ++it) {
    if (!(*it)["recovered"].get<bool>()) return &*it;
  }
  return events.empty() ? nullptr : &events.back();
}

struct Job {
  fs::path log;        // the source log
  std::string prefix;  // lines printed before it (a launch script's echo, a Namespace)
  std::vector<std::pair<fs::path, std::string>> configs;  // source -> name beside the log
  std::string top_target_kind;                            // "" when not checked
};

}  // namespace

TEST_SUITE("daemon::registry") {
  TEST_CASE("scan and the daemon give the same fixes for every golden and trainer log") {
    std::map<std::string, Job> jobs;
    for (const fs::path& dir : {kGolden, kTrainerLogs}) {
      for (const auto& entry : fs::directory_iterator(dir)) {
        if (entry.path().extension() != ".log") continue;
        jobs[entry.path().stem().string()] = {entry.path(), "", {}, ""};
      }
    }
    // Simulated jobs of each trainer with its own config beside the log.
    jobs["with_kohya_toml"] = {kTrainerLogs / "kohya_flux_sample_oom_step120.log",
                               "",
                               {{kConfigs / "kohya_flux_lora.toml", "config.toml"},
                                {kConfigs / "kohya_dataset.toml", "kohya_dataset.toml"}},
                               "toml"};
    jobs["with_onetrainer_json"] = {kTrainerLogs / "onetrainer_flux_oom_epoch0_step23.log",
                                    "",
                                    {{kConfigs / "onetrainer_config.json", "config.json"}},
                                    "json"};
    jobs["with_hf_training_args"] = {kTrainerLogs / "hf_eval_oom_step200.log",
                                     "",
                                     {{kConfigs / "hf_training_args.json", "training_args.json"}},
                                     "json"};
    jobs["with_simpletuner_json"] = {kGolden / "simpletuner_validation_oom.log",
                                     "",
                                     {{kConfigs / "simpletuner_config.json", "config.json"}},
                                     "json"};
    // Known only by what the log prints: a launch script's echo, a diffusers Namespace.
    jobs["with_kohya_command_line"] = {
        kTrainerLogs / "kohya_sdxl_optimizer_oom_step0_buffered.log",
        "+ accelerate launch --num_cpu_threads_per_process 1 sdxl_train_network.py "
        "--pretrained_model_name_or_path /models/sdxl.safetensors --train_batch_size 4 "
        "--resolution 1024,1024 --mixed_precision bf16 --output_name sdxl_lora\n",
        {},
        "args"};
    jobs["with_diffusers_namespace"] = {
        kTrainerLogs / "diffusers_dreambooth_lora_backward_oom_step64.log",
        "Namespace(pretrained_model_name_or_path='stabilityai/stable-diffusion-xl-base-1.0', "
        "resolution=1024, train_batch_size=2, gradient_accumulation_steps=1, "
        "gradient_checkpointing=False, mixed_precision='bf16', use_8bit_adam=False, "
        "validation_prompt=None)\n",
        {},
        "args"};

    TempDir dir;
    const fs::path out = dir.path / "output";
    fs::create_directories(out);
    DaemonProcess daemon(dir.path / "state", {"watch", out.string()}, dir.path / "err");
    for (const auto& [name, job] : jobs) {
      fs::create_directories(out / name);
      for (const auto& [source, beside] : job.configs) fs::copy_file(source, out / name / beside);
      std::ofstream(out / name / "log.txt", std::ios::binary) << job.prefix << slurp(job.log);
    }

    StoreView view{dir.path / "state" / "oomtriage.db"};
    int compared = 0;
    for (const auto& named : jobs) {
      const std::string& name = named.first;
      const auto& job = named.second;
      CAPTURE(name);
      const json scanned = json::parse(scan_json(out / name / "log.txt"))["logs"][0];
      const json& events = scanned["events"];
      if (events.empty()) continue;
      REQUIRE(wait_until([&] { return view.events(name) >= events.size(); }, 30s));
      const json* incident = incident_to_fix(events);
      REQUIRE(incident != nullptr);
      const auto story = view.story(name);
      REQUIRE(story);
      const oomtriage::db::StoredEvent* stored = nullptr;
      for (const auto& row : story->events) {
        if (json::parse(row.event_json)["offset"] == (*incident)["offset"]) stored = &row;
      }
      REQUIRE(stored != nullptr);
      const json daemon_fixes = json::parse(stored->fixes_json);
      CHECK(daemon_fixes.dump(1) == scanned["fixes"].dump(1));
      ++compared;
      if (!job.top_target_kind.empty()) {
        REQUIRE(!scanned["fixes"].empty());
        // The first fix that changes something is written in the trainer's own file.
        bool found = false;
        for (const json& fix : scanned["fixes"]) {
          const std::string kind = fix["target"]["kind"];
          if (kind != job.top_target_kind) continue;
          CHECK(fix["target"]["path"].get<std::string>().rfind((out / name).string(), 0) == 0);
          if (kind == "args")
            CHECK(fix["changes"][0]["path"].get<std::string>().rfind("--", 0) == 0);
          found = true;
          break;
        }
        CHECK(found);
      }
    }
    CHECK(compared > 40);
  }
}
