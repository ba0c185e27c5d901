// tests/daemon/preflight_alerts_test.cc
//
// "Warn before the first step": the real daemon against a webhook receiver on loopback. A job
// folder appears with an AI Toolkit config predicted not to fit `gpu_memory:` (FLUX.1-dev at
// 1024 px, batch 4, no gradient checkpointing, on 24 GiB; the example's 512 px, batch 1 with
// checkpointing fits there; on 12 GiB no FLUX.1-dev load fits): exactly one TrainingOOMPredicted
// warning, not repeated by a restarted daemon; a config that fits, `preflight: off` and an
// unknown card size: none. An OOM the same job then prints is the barrier: its alert comes after
// the job was registered (and judged).
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "daemon/alerts/alert_payload.h"
#include "daemon/alerts/predicted_alert.h"
#include "tests/support/e2e.h"
#include "tests/support/alert_bodies.h"
#include "tests/support/http_test_server.h"
#include "triage/preflight.h"

using namespace oomtriage;
using namespace oomtriage::testing;
using nlohmann::json;

namespace {

const fs::path kSource(OOMTRIAGE_SOURCE_DIR);
constexpr uint64_t kGiB = 1024ull * 1024 * 1024;
const ScriptedResponse kOk{};

// The example FLUX.1-dev LoRA, made heavier or lighter.
std::string flux_config(int batch, bool checkpointing, const std::string& resolution) {
  std::string yaml = slurp(kSource / "examples/training_folder/my_lora/config.yaml");
  const auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = yaml.find(from);
    if (at != std::string::npos) yaml.replace(at, from.size(), to);
  };
  replace("batch_size: 1", "batch_size: " + std::to_string(batch));
  replace("gradient_checkpointing: true",
          std::string("gradient_checkpointing: ") + (checkpointing ? "true" : "false"));
  replace("resolution: [512, 768, 1024]", "resolution: " + resolution);
  return yaml;
}
std::string too_big() { return flux_config(4, false, "[1024]"); }
std::string fits() { return flux_config(1, true, "[512]"); }

triage::Preflight judged(const std::string& yaml, uint64_t card) {
  auto config = parsers::parse_job_config(yaml, parsers::ConfigFormat::kYaml, "config.yaml");
  REQUIRE(config);
  return triage::preflight_config(*config, triage::usable_bytes(card));
}

struct PreflightRig {
  TempDir dir;
  fs::path out = dir.path / "output";
  fs::path config = dir.path / "oomtriage.yaml";
  PreflightRig(const std::string& settings, const std::string& url) {
    fs::create_directories(out);
    std::ofstream(config) << "watch:\n  - logs: " << (out / "*" / "log.txt").string() << "\n"
                          << settings
                          << "alerts:\n  - name: hook\n    type: webhook\n    url: " << url
                          << "\n    retry_initial_ms: 200\n";
  }
  // A job folder with its config, then its log (the daemon sees the log and reads the config).
  void job(const std::string& name, const std::string& yaml) {
    fs::create_directories(out / name);
    std::ofstream(out / name / "config.yaml") << yaml;
    write_slowly(out / name / "log.txt", "Running 1 job\n", 4096);
  }
  void oom(const std::string& name) {
    std::ofstream(out / name / "log.txt", std::ios::app)
        << "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB.\n";
  }
};

}  // namespace

TEST_SUITE("daemon::preflight") {
  TEST_CASE("the test configs are judged as the scenarios need") {
    CHECK(judged(too_big(), 12 * kGiB).verdict.fit == triage::Fit::kWillNotFit);
    const triage::Preflight big = judged(too_big(), 24 * kGiB);
    CHECK(big.verdict.fit == triage::Fit::kWillNotFit);
    CHECK(big.verdict.first_failing == parsers::Phase::kTrainStep);
    CHECK(judged(fits(), 24 * kGiB).verdict.fit != triage::Fit::kWillNotFit);
  }

  TEST_CASE("the alert says the phase, when, the peak against the usable memory, the top change") {
    auto config = parsers::parse_job_config(too_big(), parsers::ConfigFormat::kYaml, "config.yaml");
    REQUIRE(config);
    const triage::Preflight p = judged(too_big(), 24 * kGiB);
    const daemon::AlertContent alert = daemon::predicted_oom_alert(
        {41, "big", "ai-toolkit", "/out/big/log.txt", 24 * kGiB, "2026-12-03T10:00:00Z"}, *config,
        p);
    CHECK(alert.title() == "OOM predicted in " + alert.phase + ": big");
    const json webhook = daemon::alertmanager_webhook_payload(alert, "hook");
    const json& labels = webhook["alerts"][0]["labels"];
    CHECK(labels["alertname"] == "TrainingOOMPredicted");
    CHECK(labels["severity"] == "warning");
    CHECK(labels["training_job"] == "big");
    CHECK(labels["family"] == "flux1-dev");
    CHECK(labels["phase"] == std::string(parsers::to_string(p.verdict.first_failing)));
    const json& annotations = webhook["alerts"][0]["annotations"];
    CHECK(annotations["predicted_peak"].get<std::string>().find("GiB") != std::string::npos);
    CHECK(annotations["usable_memory"].get<std::string>().find("of a 24.00 GiB card") !=
          std::string::npos);
    CHECK_FALSE(annotations["top_change"].get<std::string>().empty());
    CHECK(annotations["log"] == "/out/big/log.txt");
    CHECK(daemon::alertmanager_api_payload(alert)[0]["labels"]["alertname"] ==
          "TrainingOOMPredicted");
    CHECK(daemon::slack_payload(alert).dump().find("OOM predicted in") != std::string::npos);
    CHECK(daemon::discord_payload(alert)["embeds"][0]["color"] == 0xE67E22);
    MESSAGE("TrainingOOMPredicted: " << webhook["alerts"][0].dump(2));
    MESSAGE("journal: " << daemon::predicted_oom_line(alert));

    // When it first happens: the first preview, or the largest bucket's first step.
    CHECK(daemon::first_failure_when(*config, parsers::Phase::kSampling) ==
          "step 0 (the baseline preview before training)");
    config->skip_first_sample = true;
    CHECK(daemon::first_failure_when(*config, parsers::Phase::kSampling) ==
          "step 250 (the first preview)");
    auto buckets = parsers::parse_job_config(flux_config(1, true, "[512, 1024, 1536]"),
                                             parsers::ConfigFormat::kYaml, "config.yaml");
    REQUIRE(buckets);
    CHECK(daemon::first_failure_when(*buckets, parsers::Phase::kTrainStep) ==
          "the first step at the 1536 px bucket");
  }

  TEST_CASE("a job that will not fit gets one warning, one that fits none, a restart no repeat") {
    HttpTestServer server([](const ReceivedRequest&, size_t) { return kOk; });
    PreflightRig rig("gpu_memory: 24GiB\nalert_group_seconds: 1\n", server.url());
    {
      DaemonProcess daemon(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                           rig.dir.path / "err");
      rig.job("small", fits());
      rig.job("big", too_big());
      const bool arrived =
          wait_until([&] { return alerts_named(server, "TrainingOOMPredicted").size() == 1; });
      INFO("the daemon's stderr: " << daemon.stderr_text() << "; requests: " << server.count());
      REQUIRE(arrived);
      // Barrier: the small job's OOM alert comes after its registration.
      rig.oom("small");
      REQUIRE(wait_until([&] { return alerts_named(server, "TrainingOOM").size() == 1; }));
      const auto predicted = alerts_named(server, "TrainingOOMPredicted");
      REQUIRE(predicted.size() == 1);
      CHECK(predicted[0]["labels"]["training_job"] == "big");
      CHECK(predicted[0]["labels"]["severity"] == "warning");
      CHECK(predicted[0]["labels"]["family"] == "flux1-dev");
      CHECK(daemon.stderr_text().find("big: warning: predicted OOM in") != std::string::npos);
      // The warning stays with the job: `alerts` lists it and `jobs` marks it.
      const fs::path state = rig.dir.path / "state";
      auto [rc, listed] = oomtriage_says("--state-dir " + state.string() + " alerts --json");
      REQUIRE(rc == 0);
      const json warnings = json::parse(listed)["warnings"];
      REQUIRE(warnings.size() == 1);
      CHECK(warnings[0]["job"] == "big");
      CHECK(warnings[0]["kind"] == "predicted_oom");
      CHECK(warnings[0]["resolved_at"].is_null());
      auto [jobs_rc, jobs] = oomtriage_says("--state-dir " + state.string() + " jobs --json");
      REQUIRE(jobs_rc == 0);
      // Parsed into a variable: a range-for over json::parse(...)["jobs"] reads a destroyed
      // temporary (caught by ASan, which aborted the test).
      const json listed_jobs = json::parse(jobs)["jobs"];
      for (const json& job : listed_jobs) CHECK(job["predicted_oom"] == (job["name"] == "big"));
    }
    // A restarted daemon reads the same config again: no second warning.
    DaemonProcess again(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                        rig.dir.path / "err2");
    rig.oom("big");
    // A restart on a loaded machine (CI runs two tests at once) can take longer than the default.
    REQUIRE(wait_until([&] { return alerts_named(server, "TrainingOOM").size() == 2; }, 30s));
    CHECK(alerts_named(server, "TrainingOOMPredicted").size() == 1);
  }

  TEST_CASE("preflight: off, and an unknown card size: no warning") {
    HttpTestServer server([](const ReceivedRequest&, size_t) { return kOk; });
    SUBCASE("off") {
      PreflightRig rig("preflight: off\ngpu_memory: 12GiB\n", server.url());
      DaemonProcess daemon(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                           rig.dir.path / "err");
      rig.job("big", too_big());
      rig.oom("big");
      REQUIRE(wait_until([&] { return alerts_named(server, "TrainingOOM").size() == 1; }));
      CHECK(alerts_named(server, "TrainingOOMPredicted").empty());
    }
    SUBCASE("the card size unknown and not configured: said once at --verbose") {
      PreflightRig rig("", server.url());
      DaemonProcess daemon(rig.dir.path / "state",
                           {"--verbose", "daemon", "--config", rig.config.string()},
                           rig.dir.path / "err");
      rig.job("big", too_big());
      rig.job("big2", too_big());
      rig.oom("big");
      rig.oom("big2");
      REQUIRE(wait_until([&] { return alerts_named(server, "TrainingOOM").size() == 2; }));
      CHECK(alerts_named(server, "TrainingOOMPredicted").empty());
      const std::string err = daemon.stderr_text();
      const std::string said = "pre-flight skipped: GPU size unknown (set gpu_memory)";
      REQUIRE(err.find(said) != std::string::npos);
      CHECK(err.find(said, err.find(said) + 1) == std::string::npos);
    }
  }
}
