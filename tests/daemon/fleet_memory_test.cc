// tests/daemon/fleet_memory_test.cc
//
// The fleet's memory correction read back from a real SQLite store (a temp file): runs recorded
// with their config snapshots and OOM events as the daemon records them, then the factor the
// store's history gives, for the family the configs name.
#include <doctest/doctest.h>

#include "daemon/service/fleet_memory.h"
#include "tests/support/e2e.h"
#include "triage/spec_from_config.h"

using namespace oomtriage;
using namespace oomtriage::daemon;
using namespace oomtriage::testing;

namespace {

const fs::path kSource(OOMTRIAGE_SOURCE_DIR);

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A run of `job` with `config`, ended `outcome`, with `event_json` as its OOM event when it is
// not empty. The snapshot is kept as `/srv/<job>/<config_file>`, or at `config_file` when it is
// a whole path.
void record(db::Store& store, const std::string& job, const std::string& config,
            const std::string& outcome, const std::string& event_json, int64_t now,
            const std::string& config_file = "config.yaml") {
  const int64_t job_id = *store.upsert_job(job, "/srv/" + job, "ai-toolkit", "/srv/" + job, now);
  const std::string path =
      config_file.starts_with("/") ? config_file : "/srv/" + job + "/" + config_file;
  const int64_t snapshot = *store.add_config_snapshot(job_id, path, "sha-" + job, config, now);
  const int64_t run = *store.start_run(job_id, "/srv/" + job + "/log.txt", snapshot, now);
  const int64_t file = *store.insert_file({.path = "/srv/" + job + "/log.txt",
                                           .ino = static_cast<uint64_t>(now),
                                           .job_id = job_id,
                                           .run_id = run},
                                          now);
  db::Progress progress{.file_id = file,
                        .job_id = job_id,
                        .run_id = run,
                        .snapshot_id = snapshot,
                        .outcome = outcome};
  if (!event_json.empty()) {
    const auto event = nlohmann::json::parse(event_json);
    db::EventRow row{.offset = 100,
                     .kind = event.at("kind").get<std::string>(),
                     .phase = event.at("phase").get<std::string>(),
                     .event_json = event_json};
    row.fixes_json = "[]";
    progress.events.push_back(row);
  }
  REQUIRE(store.commit_progress(progress, now));
}

// A run as record() keeps it; an OOM carries a training-step event needing `need` bytes.
void record_run(db::Store& store, const std::string& job, const std::string& config,
                const std::string& outcome, uint64_t need, int64_t now,
                const std::string& config_file = "config.yaml") {
  std::string event;
  if (outcome == "crashed_oom") {
    event = nlohmann::json{{"kind", "cuda"},
                           {"phase", "train_step"},
                           {"tried_to_allocate_bytes", uint64_t{1} << 30},
                           {"total_capacity_bytes", uint64_t{48} << 30},
                           {"free_bytes", 0},
                           {"this_process_in_use_bytes", need - (uint64_t{1} << 30)}}
                .dump();
  }
  record(store, job, config, outcome, event, now, config_file);
}

}  // namespace

TEST_SUITE("daemon::fleet memory") {
  TEST_CASE("runs recorded in a real store give their family's correction back") {
    TempDir dir;
    const std::string path = (dir.path / "oomtriage.db").string();
    auto opened = db::Store::open(path);
    REQUIRE(opened);
    db::Store& store = **opened;
    const std::string config = read_text(kSource / "examples/training_folder/my_lora/config.yaml");
    auto parsed = parsers::parse_job_config(config, parsers::ConfigFormat::kYaml, "config.yaml");
    REQUIRE(parsed);
    const triage::MemoryEstimate estimate =
        triage::estimate_memory(triage::spec_from_config(*parsed));
    const std::string family = estimate.family;
    const uint64_t predicted = estimate.phase(parsers::Phase::kTrainStep)->peak_bytes;

    SUBCASE("no runs: factor 1") {
      auto c = fleet_correction(store, family, std::nullopt);
      REQUIRE(c);
      CHECK(c->factor == 1.0);
      CHECK(c->runs == 0);
    }
    SUBCASE("two OOMs are not enough; three that needed 20% more raise it by 20%") {
      record_run(store, "a", config, "crashed_oom", predicted * 6 / 5, 1);
      record_run(store, "b", config, "crashed_oom", predicted * 6 / 5, 2);
      record_run(store, "running", config, "running", 0, 3);  // not finished: not read
      auto two = fleet_correction(store, family, std::nullopt);
      REQUIRE(two);
      CHECK(two->factor == 1.0);
      CHECK(two->runs == 2);
      record_run(store, "c", config, "crashed_oom", predicted * 6 / 5, 4);
      // Through the path, as `oomtriage check` asks; the three were on 48 GiB cards.
      auto three = fleet_correction(path, family, uint64_t{48} << 30);
      REQUIRE(three);
      CHECK(three->factor == doctest::Approx(1.2).epsilon(0.01));
      CHECK(three->runs == 3);
      CHECK(triage::describe(*three) ==
            "adjusted +20% from 3 runs of " + family + " on 48 GiB cards on this fleet");
    }
    SUBCASE("one completed run's sampled peak changes the next check of its family") {
      const auto check = [&] {
        return oomtriage_says("--state-dir " + dir.path.string() + " check " +
                              (kSource / "examples/training_folder/my_lora/config.yaml").string() +
                              " --gpu 48GiB");
      };
      record_run(store, "sampled", config, "completed", 0, 1);
      const std::string before = check().second;
      INFO("check before: " << before);
      CHECK(before.find("adjusted") == std::string::npos);
      // The daemon sampled the run at 80% of what the model predicts for its peak.
      const auto story = **store.job_story("sampled");
      const uint64_t peak = estimate.peak().peak_bytes * 4 / 5;
      db::GpuMemoryRow sampled{
          story.runs[0].id, 0, uint64_t{48} << 30, peak, "train_step", 10, 0, "{}", 1};
      // Sampled only from the middle of the run (the daemon came late): not a measurement.
      REQUIRE(store.record_gpu_memory(sampled));
      auto partial = fleet_correction(path, family, uint64_t{48} << 30);
      REQUIRE(partial);
      CHECK(partial->measured == 0);
      CHECK(partial->factor == 1.0);
      sampled.from_start = true;
      REQUIRE(store.record_gpu_memory(sampled));
      auto c = fleet_correction(path, family, uint64_t{48} << 30);
      REQUIRE(c);
      CHECK(c->factor == doctest::Approx(0.8).epsilon(0.01));
      CHECK(c->measured == 1);
      const std::string after = check().second;
      INFO("check after: " << after);
      CHECK(after.find("adjusted -20% from 1 run of " + family) != std::string::npos);
      CHECK(after.find("1 with a measured peak") != std::string::npos);
    }
    SUBCASE("a kohya TOML, a SimpleTuner and a OneTrainer JSON are read as `check` reads them") {
      const fs::path configs = kSource / "tests/testdata/configs";
      // Kept where it was read: its dataset config (resolution, batch) is beside it.
      record_run(store, "kohya", read_text(configs / "kohya_flux_lora.toml"), "completed", 0, 1,
                 (configs / "kohya_flux_lora.toml").string());
      record_run(store, "onetrainer", read_text(configs / "onetrainer_config.json"), "completed", 0,
                 2, "config.json");
      record_run(store, "simpletuner", read_text(configs / "simpletuner_config.json"), "completed",
                 0, 3, "config.json");
      std::vector<std::string> unread;
      auto runs = fleet_runs(store, kFleetHistoryRuns, &unread);
      REQUIRE(runs);
      CHECK(unread.empty());
      REQUIRE(runs->size() == 3);
      for (const triage::FleetRun& run : *runs) {
        CHECK(run.family == "flux1-dev");
        CHECK(run.predicted_peak > 0);
      }
    }
    SUBCASE("a snapshot that does not parse is left out, and said once with its file") {
      record_run(store, "bad", "config: [unclosed", "completed", 0, 1);
      record_run(store, "bad", "config: [unclosed", "completed", 0, 2);  // a second run of it
      std::vector<std::string> unread;
      auto runs = fleet_runs(store, kFleetHistoryRuns, &unread);
      REQUIRE(runs);
      CHECK(runs->empty());
      REQUIRE(unread.size() == 1);
      CHECK(unread.front().find("/srv/bad/config.yaml") != std::string::npos);
      // A family the model does not know: said too.
      record_run(store, "unknown",
                 read_text(kSource / "tests/testdata/configs/hf_training_args.json"), "completed",
                 0, 3, "training_args.json");
      unread.clear();
      REQUIRE(fleet_correction(store, family, std::nullopt, &unread));
      CHECK(unread.size() == 2);
    }
  }
  TEST_CASE("a config's own crash outranks the model: check on it no longer says it fits") {
    TempDir dir;
    const std::string path = (dir.path / "oomtriage.db").string();
    auto opened = db::Store::open(path);
    REQUIRE(opened);
    db::Store& store = **opened;
    const fs::path example = kSource / "examples/training_folder/my_lora/config.yaml";
    const std::string config = read_text(example);
    const auto check = [&](const fs::path& file) {
      return oomtriage_says("--state-dir " + dir.path.string() + " check " + file.string() +
                            " --gpu 23.55GiB --json");
    };
    const auto before = nlohmann::json::parse(check(example).second);
    INFO("check before: " << before.dump());
    REQUIRE(before["verdict"] != "will_not_fit");
    // The README's crash: sampling at step 500 on a 23.55 GiB card, needing about 24 GiB.
    const uint64_t mib = uint64_t{1} << 20;
    record(store, "my_lora", config, "crashed_oom",
           nlohmann::json{{"kind", "cuda"},
                          {"phase", "sampling"},
                          {"step", 500},
                          {"total_steps", 3000},
                          {"tried_to_allocate_bytes", 1536 * mib},
                          {"total_capacity_bytes", 24115 * mib},
                          {"free_bytes", 812 * mib},
                          {"this_process_in_use_bytes", 22800 * mib}}
               .dump(),
           2);

    const auto after = nlohmann::json::parse(check(example).second);
    INFO("check after: " << after.dump());
    CHECK(after["verdict"] == "will_not_fit");
    CHECK(after["first_failing_phase"] == "sampling");
    const std::string assumptions = after["assumptions"].dump();
    CHECK(assumptions.find("sampling raised to") != std::string::npos);
    CHECK(assumptions.find("crashed there at step 500") != std::string::npos);
    // The training step ran 500 steps: it is not what fails, and the weights are not scaled.
    for (const auto& phase : after["phases"]) {
      if (phase["phase"] == "train_step" || phase["phase"] == "model_load") {
        CHECK(phase["peak_bytes"].get<uint64_t>() <= 24115 * mib);
      }
    }
    // The fix the seed guide gives a preview OOM comes first.
    REQUIRE_FALSE(after["fixes"].empty());
    CHECK(after["fixes"][0]["id"] == "cheapen_previews");
    // Another config (its previews already cheap) is not this job: the crash says nothing of it.
    std::string other = config;
    other.replace(other.find("sample_steps: 30"), 16, "sample_steps: 12");
    other.replace(other.find("width: 1024"), 11, "width: 512");
    std::ofstream(dir.path / "other.yaml") << other;
    const auto unrelated = nlohmann::json::parse(check(dir.path / "other.yaml").second);
    CHECK(unrelated["assumptions"].dump().find("raised to") == std::string::npos);
  }
}
