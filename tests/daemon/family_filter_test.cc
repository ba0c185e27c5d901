// tests/daemon/family_filter_test.cc
//
// One name for each model family and trainer (parsers/family_names.h, docs/design.md "Names of
// families and trainers"), through the real binary on a store written as the daemon writes it:
// `jobs --family` finds a job by its stored id, its architecture id or an alias, `--trainer`
// takes the trainer table's aliases, an unknown word is an error with the closest names, and
// `jobs`, `report` and `check` name a family the same way.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "daemon/common/clock.h"
#include "db/store.h"
#include "tests/support/check_run.h"
#include "tests/support/e2e.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

// A job of `trainer` whose one run crashed with an OOM of `family` (the store's id).
void add_crashed_job(db::Store& store, const std::string& name, const std::string& trainer,
                     const std::string& family, uint64_t ino, int64_t age) {
  const int64_t now = daemon::unix_now() - age;
  const std::string home = "/out/" + name;
  const int64_t job = *store.upsert_job(name, home, trainer, "/out", now);
  const int64_t run = *store.start_run(job, home + "/log.txt", std::nullopt, now);
  db::FileRow file;
  file.path = home + "/log.txt";
  file.dev = 1;
  file.ino = ino;
  file.job_id = job;
  file.run_id = run;
  db::Progress progress;
  progress.file_id = *store.insert_file(file, now);
  progress.job_id = job;
  progress.run_id = run;
  progress.outcome = "crashed_oom";
  db::EventRow e;
  e.offset = 100;
  e.kind = "cuda";
  e.phase = "train_step";
  e.model_family = family;
  e.step = 10;
  e.event_json = R"({"kind":"cuda","phase":"train_step","step":10,"recovered":false,"line":9,)"
                 R"("message":"CUDA out of memory."})";
  e.fixes_json = R"([{"id":"lower_batch","rank":1,"title":"t","changes":[],"cost":"c"}])";
  progress.events.push_back(e);
  REQUIRE(store.commit_progress(progress, now));
}

// Three crashed jobs: FLUX.1 by AI Toolkit, SDXL by kohya sd-scripts, a HiDream job by
// SimpleTuner (which the store files under "other").
fs::path fill(const TempDir& dir) {
  const fs::path state = dir.path / "state";
  fs::create_directories(state);
  auto store = db::Store::open((state / "oomtriage.db").string());
  REQUIRE(store);
  add_crashed_job(**store, "flux_job", "ai-toolkit", "flux.1", 1, 300);
  add_crashed_job(**store, "sdxl_job", "sd-scripts", "sdxl", 2, 200);
  add_crashed_job(**store, "hidream_job", "simpletuner", "other", 3, 100);
  return state;
}

std::pair<int, std::string> says(const fs::path& state, const std::string& args) {
  return oomtriage_says("--color never --state-dir " + state.string() + " " + args);
}

// The names `jobs --json ARGS` lists (its notes on stderr left out), or "exit N" when it fails.
std::vector<std::string> listed(const fs::path& state, const std::string& args) {
  const auto [rc, out] = run_shell(std::string(OOMTRIAGE_BINARY) + " --state-dir " +
                                   state.string() + " jobs --json " + args + " 2>/dev/null");
  if (rc != 0) return {"exit " + std::to_string(rc)};
  std::vector<std::string> names;
  const auto doc = nlohmann::json::parse(out);
  for (const auto& job : doc["jobs"]) names.push_back(job["name"].get<std::string>());
  return names;
}

}  // namespace

TEST_SUITE("daemon::family_names") {
  TEST_CASE("jobs --family finds a job by any of its family's names, in any case") {
    TempDir dir;
    const fs::path state = fill(dir);
    const std::vector<std::string> flux = {"flux_job"};
    for (const char* word :
         {"flux.1", "flux1-dev", "FLUX", "FLUX.1-dev", "flux1-schnell", "'FLUX.1'", "flux_1"}) {
      INFO(word);
      CHECK(listed(state, std::string("--family ") + word) == flux);
    }
    CHECK(listed(state, "--family SDXL") == std::vector<std::string>{"sdxl_job"});
    CHECK(listed(state, "--family stable-diffusion-xl") == std::vector<std::string>{"sdxl_job"});
    CHECK(listed(state, "--family wan2.2").empty());  // known, but no such job

    // A family the store files under "other": its "other" jobs, and a note that says so.
    CHECK(listed(state, "--family hidream") == std::vector<std::string>{"hidream_job"});
    auto [rc, out] = says(state, "jobs --family hidream 2>&1");
    CHECK(rc == 0);
    CHECK(out.find("files HiDream jobs under family 'other'") != std::string::npos);

    // A word no family has: an error with the closest names, nothing listed.
    std::tie(rc, out) = says(state, "jobs --family fluxx 2>&1");
    CHECK(rc != 0);
    CHECK(out.find("unknown model family 'fluxx'") != std::string::npos);
    CHECK(out.find("did you mean flux") != std::string::npos);
    CHECK(out.find("flux_job") == std::string::npos);
  }

  TEST_CASE("jobs --trainer takes the trainer table's names and aliases") {
    TempDir dir;
    const fs::path state = fill(dir);
    for (const char* word : {"ai-toolkit", "aitk", "AI_Toolkit"}) {
      INFO(word);
      CHECK(listed(state, std::string("--trainer ") + word) ==
            std::vector<std::string>{"flux_job"});
    }
    for (const char* word : {"sd-scripts", "kohya", "Kohya_SS"}) {
      INFO(word);
      CHECK(listed(state, std::string("--trainer ") + word) ==
            std::vector<std::string>{"sdxl_job"});
    }
    CHECK(listed(state, "--trainer aitk --family flux1-dev") ==
          std::vector<std::string>{"flux_job"});
    CHECK(listed(state, "--trainer kohya --family flux1-dev").empty());
    auto [rc, out] = says(state, "jobs --trainer kohyaa 2>&1");
    CHECK(rc != 0);
    CHECK(out.find("unknown trainer 'kohyaa'") != std::string::npos);
    CHECK(out.find("kohya") != std::string::npos);
  }

  TEST_CASE("jobs shows a family by its display name - its JSON keeps the stored id") {
    TempDir dir;
    const fs::path state = fill(dir);
    auto [rc, out] = says(state, "jobs");
    REQUIRE(rc == 0);
    CHECK(out.find("FAMILY") != std::string::npos);
    CHECK(out.find("FLUX.1") != std::string::npos);
    CHECK(out.find("SDXL") != std::string::npos);
    std::tie(rc, out) = says(state, "jobs --json --family flux1-dev");
    REQUIRE(rc == 0);
    const auto job = nlohmann::json::parse(out)["jobs"][0];
    CHECK(job["model_family"] == "flux.1");
    CHECK(job["model_family_name"] == "FLUX.1");
  }

  TEST_CASE("report names the family by its display name and id in every form") {
    TempDir dir;
    const fs::path state = fill(dir);
    const fs::path toml =
        fs::path(OOMTRIAGE_SOURCE_DIR) / "tests/testdata/configs/kohya_flux_lora.toml";
    {
      auto store = db::Store::open((state / "oomtriage.db").string());
      REQUIRE(store);
      const auto story = (*store)->job_story("flux_job");
      REQUIRE(story);
      REQUIRE(*story);
      REQUIRE((*store)->add_config_snapshot((**story).job.id, toml.string(), "sha", slurp(toml),
                                            daemon::unix_now()));
    }
    auto [rc, out] = says(state, "report flux_job");
    REQUIRE(rc == 0);
    CHECK(out.find("model FLUX.1 (flux.1)") != std::string::npos);
    std::tie(rc, out) = says(state, "report flux_job --markdown");
    CHECK(out.find("model FLUX.1 (flux.1)") != std::string::npos);
    std::tie(rc, out) = says(state, "report flux_job --json");
    REQUIRE(rc == 0);
    const auto job = nlohmann::json::parse(out)["job"];
    CHECK(job["model_family"] == "flux.1");
    CHECK(job["model_family_name"] == "FLUX.1");
  }

  TEST_CASE("check names the family as jobs does: display name and id beside the architecture") {
    TempDir dir;
    write_file(dir.path / "spec.json", R"({
      "model_family": "flux1-dev", "training_type": "lora", "resolution": [1024, 1024],
      "batch_size": 1, "gradient_checkpointing": true, "dtype": "bf16"})");
    const CheckRun json = run_check_in(dir.path, {"--spec", "spec.json", "--gpu", "80", "--json"});
    INFO(json.err);
    const auto doc = json.doc();
    REQUIRE(doc.is_object());
    CHECK(doc["family"] == "flux1-dev");  // the architecture row, as before
    CHECK(doc["family_id"] == "flux.1");  // what `jobs --json` calls model_family
    CHECK(doc["family_name"] == "FLUX.1");
    const CheckRun text = run_check_in(dir.path, {"--spec", "spec.json", "--gpu", "80"});
    CHECK(text.out.find("model: FLUX.1 (flux.1), architecture flux1-dev") != std::string::npos);
  }
}
