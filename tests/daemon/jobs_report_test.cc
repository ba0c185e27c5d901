// tests/daemon/jobs_report_test.cc
//
// `oomtriage jobs` filters and columns and `report` without a name, on a store written through
// db::Store as the daemon writes it: --since, --outcome, --limit, the newest incident's phase,
// step and top fix, RFC 3339 times, and the newest crashed job when no name is given. And the
// readers (`jobs`, `report`, `check`, `alerts`) run as a user who may only read the store.
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "daemon/cli/report_command.h"
#include "daemon/common/clock.h"
#include "daemon/render/job_names.h"
#include "db/store.h"
#include "parsers/job_config.h"
#include "tests/support/e2e.h"
#include "tests/support/skip.h"
#include "tests/support/store_rows.h"
#include "triage/memory_model.h"
#include "triage/spec_from_config.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

// A job last seen `age` seconds ago whose one run ended `outcome`, with an OOM when it crashed.
void add_job(db::Store& store, const std::string& name, int64_t age, const std::string& outcome,
             uint64_t ino, const std::string& folder = "") {
  const int64_t now = daemon::unix_now() - age;
  const std::string home = folder.empty() ? "/out/" + name : folder;
  db::Progress progress = testing::progress_for_new_job(store, name, ino, now, home, home);
  progress.outcome = outcome;
  if (outcome == "crashed_oom") {
    db::EventRow e;
    e.offset = 100;
    e.kind = "cuda";
    e.phase = "sampling";
    e.step = 500;
    e.event_json = R"({"kind":"cuda","phase":"sampling","step":500,"total_steps":3000,)"
                   R"("recovered":false,"line":67,"message":"CUDA out of memory."})";
    e.fixes_json = R"([{"id":"cheapen_previews","rank":1,"title":"t","changes":[],"cost":"c"}])";
    progress.events.push_back(e);
  }
  REQUIRE(store.commit_progress(progress, now));
}

std::pair<int, std::string> oomtriage_says(const fs::path& state, const std::string& args) {
  return testing::oomtriage_says("--color never --state-dir " + state.string() + " " + args);
}

std::vector<std::string> names(const std::string& json) {
  std::vector<std::string> out;
  const auto doc = nlohmann::json::parse(json);  // alive through the loop
  for (const auto& job : doc["jobs"]) {
    out.push_back(job["name"].get<std::string>());
  }
  return out;
}

}  // namespace

TEST_SUITE("daemon::jobs") {
  TEST_CASE("durations read as people write them") {
    CHECK(daemon::parse_duration("90s") == 90);
    CHECK(daemon::parse_duration("30m") == 1800);
    CHECK(daemon::parse_duration("24h") == 86400);
    CHECK(daemon::parse_duration("7d") == 604800);
    CHECK(daemon::parse_duration("2w") == 1209600);
    CHECK_FALSE(daemon::parse_duration("24"));
    CHECK_FALSE(daemon::parse_duration("h"));
    CHECK_FALSE(daemon::parse_duration("1.5h"));
    CHECK_FALSE(daemon::parse_duration("24hours"));
    CHECK_FALSE(daemon::parse_duration(""));
  }

  TEST_CASE("jobs filters by age, outcome and count - report without a name is the newest crash") {
    TempDir dir;
    const fs::path state = dir.path / "state";
    fs::create_directories(state);
    {
      auto store = db::Store::open((state / "oomtriage.db").string());
      REQUIRE(store);
      add_job(**store, "old_crash", 3 * 86400, "crashed_oom", 1);
      add_job(**store, "new_crash", 3600, "crashed_oom", 2);
      add_job(**store, "done", 60, "completed", 3);
    }
    auto [rc, out] = oomtriage_says(state, "jobs --json");
    REQUIRE(rc == 0);
    CHECK(names(out) == std::vector<std::string>{"done", "new_crash", "old_crash"});
    const auto first = nlohmann::json::parse(out)["jobs"][1];
    CHECK(first["phase"] == "sampling");
    CHECK(first["step"] == 500);
    CHECK(first["top_fix"] == "cheapen_previews");
    CHECK(first["last_seen"].get<std::string>().find('T') == 10);  // RFC 3339
    CHECK(nlohmann::json::parse(out)["jobs"][0]["phase"].is_null());

    std::tie(rc, out) = oomtriage_says(state, "jobs --json --since 24h");
    CHECK(names(out) == std::vector<std::string>{"done", "new_crash"});
    std::tie(rc, out) = oomtriage_says(state, "jobs --json --outcome crashed_oom");
    CHECK(names(out) == std::vector<std::string>{"new_crash", "old_crash"});
    std::tie(rc, out) = oomtriage_says(state, "jobs --json --outcome crashed_oom --limit 1");
    CHECK(names(out) == std::vector<std::string>{"new_crash"});
    std::tie(rc, out) = oomtriage_says(state, "jobs --since 10s");
    CHECK(rc == 0);
    CHECK(out.find("no jobs match") != std::string::npos);
    std::tie(rc, out) = oomtriage_says(state, "jobs --since yesterday");
    CHECK(rc == 1);

    std::tie(rc, out) = oomtriage_says(state, "jobs");
    REQUIRE(rc == 0);
    // The last OOM's phase is under LAST OOM (its step under AT) since the live columns came.
    CHECK(out.find("LAST OOM") != std::string::npos);
    CHECK(out.find("sampling") != std::string::npos);
    CHECK(out.find("TOP FIX") != std::string::npos);
    CHECK(out.find("cheapen_previews") != std::string::npos);

    // No name: the newest job that crashed, not the newest job.
    std::tie(rc, out) = oomtriage_says(state, "report --json");
    REQUIRE(rc == 0);
    CHECK(nlohmann::json::parse(out)["job"]["name"] == "new_crash");
    std::tie(rc, out) = oomtriage_says(state, "report");
    CHECK(out.starts_with("job new_crash"));
  }

  TEST_CASE("two jobs of one name in two folders are two jobs, shown and named apart") {
    TempDir dir;
    const fs::path state = dir.path / "state";
    fs::create_directories(state);
    {
      auto store = db::Store::open((state / "oomtriage.db").string());
      REQUIRE(store);
      add_job(**store, "my_lora", 120, "crashed_oom", 1, "/data/col/a/my_lora");
      add_job(**store, "my_lora", 60, "completed", 2, "/data/col/b/my_lora");
      add_job(**store, "other", 30, "completed", 3, "/data/col/b/other");
    }
    auto [rc, out] = oomtriage_says(state, "jobs");
    REQUIRE(rc == 0);
    CHECK(out.find("my_lora (col/a)") != std::string::npos);
    CHECK(out.find("my_lora (col/b)") != std::string::npos);
    CHECK(out.find("other (") == std::string::npos);  // a name no other job has stays as it is
    std::tie(rc, out) = oomtriage_says(state, "jobs --json");
    const auto listed = nlohmann::json::parse(out)["jobs"];
    REQUIRE(listed.size() == 3);
    CHECK(listed[1]["display_name"] == "my_lora (col/b)");
    CHECK(listed[1]["folder"] == "/data/col/b/my_lora");

    // The bare name is refused with both; the shown name or the folder picks one.
    std::tie(rc, out) = oomtriage_says(state, "report my_lora 2>&1");
    CHECK(rc == 1);
    CHECK(out.find("'my_lora' names 2 jobs: my_lora (col/b), my_lora (col/a)") !=
          std::string::npos);
    std::tie(rc, out) = oomtriage_says(state, "report 'my_lora (col/a)' --json");
    REQUIRE(rc == 0);
    CHECK(nlohmann::json::parse(out)["job"]["log_dir"] == "/data/col/a/my_lora");
    CHECK(nlohmann::json::parse(out)["job"]["name"] == "my_lora");
    std::tie(rc, out) = oomtriage_says(state, "report /data/col/b/my_lora/");
    REQUIRE(rc == 0);
    CHECK(out.starts_with("job my_lora (col/b)  ai-toolkit  completed"));
    // No name: the newest crash, which is one of the two.
    std::tie(rc, out) = oomtriage_says(state, "report");
    CHECK(out.starts_with("job my_lora (col/a)"));
  }

  TEST_CASE(
      "display names: just enough of the folder, the folder named like the job when that is "
      "the difference, hosts kept apart, a store made anew counted once") {
    const auto job = [](std::string name, std::string home, std::string host = "") {
      db::JobSummary j;
      j.name = std::move(name);
      j.home = std::move(home);
      j.log_dir = j.home;
      j.host = std::move(host);
      return j;
    };
    std::vector<db::JobSummary> jobs = {job("my_lora", "/srv/x/col/a/my_lora"),
                                        job("my_lora", "/srv/x/col/b/my_lora"),
                                        job("solo", "/srv/solo")};
    CHECK(daemon::display_names(jobs) ==
          std::vector<std::string>{"my_lora (col/a)", "my_lora (col/b)", "solo"});
    // {parent} of /data/runs/my_lora/log.txt and {stem} of /data/runs/my_lora.log.
    jobs = {job("my_lora", "/data/runs/my_lora"), job("my_lora", "/data/runs")};
    const auto names = daemon::display_names(jobs);
    CHECK(names[0] != names[1]);
    CHECK(daemon::find_job(names[1], jobs, names).job == &jobs[1]);
    CHECK(daemon::find_job("/data/runs/my_lora/", jobs, names).job == &jobs[0]);
    // Two nodes' jobs of one name: each is plain, and asking by name lists both hosts.
    jobs = {job("my_lora", "/out/my_lora", "gpu1"), job("my_lora", "/out/my_lora", "gpu2"),
            job("my_lora", "/out/my_lora", "gpu1")};
    daemon::keep_newest(jobs);
    REQUIRE(jobs.size() == 2);
    const auto fleet = daemon::display_names(jobs);
    CHECK(fleet == std::vector<std::string>{"my_lora", "my_lora"});
    const auto match = daemon::find_job("my_lora", jobs, fleet);
    CHECK(match.job == nullptr);
    CHECK(match.candidates ==
          std::vector<std::string>{"my_lora on host gpu1", "my_lora on host gpu2"});
  }

  TEST_CASE("report names the model of a kohya TOML or a OneTrainer JSON snapshot") {
    TempDir dir;
    const fs::path state = dir.path / "state";
    const fs::path configs = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests/testdata/configs";
    fs::create_directories(state);
    {
      auto store = db::Store::open((state / "oomtriage.db").string());
      REQUIRE(store);
      for (const auto& [job, file] : {std::pair{"kohya", "kohya_flux_lora.toml"},
                                      std::pair{"onetrainer", "onetrainer_config.json"}}) {
        add_job(**store, job, 60, "completed", job == std::string("kohya") ? 1 : 2);
        const auto story = (*store)->job_story(job);
        REQUIRE(story);
        REQUIRE(*story);
        REQUIRE((*store)->add_config_snapshot((**story).job.id, (configs / file).string(), "sha",
                                              slurp(configs / file), daemon::unix_now()));
      }
    }
    for (const char* job : {"kohya", "onetrainer"}) {
      int rc = 0;
      std::string out;
      std::tie(rc, out) = oomtriage_says(state, std::string("report --json ") + job);
      INFO(out);
      REQUIRE(rc == 0);
      CHECK(nlohmann::json::parse(out)["job"]["model_family"] == "flux.1");
    }
  }

  TEST_CASE("report without a name on an empty store says there are no jobs") {
    TempDir dir;
    auto [rc, out] = oomtriage_says(dir.path / "state", "report");
    CHECK(rc == 1);
    CHECK(out.find("no jobs yet") != std::string::npos);
  }

  TEST_CASE(
      "readers never write: jobs, report, check and alerts answer as a user who may only read "
      "the store, and leave it as it was") {
    TempDir dir;
    const fs::path state = dir.path / "state";
    fs::create_directories(state);
    const fs::path db_path = state / "oomtriage.db";
    const fs::path config =
        fs::path(OOMTRIAGE_SOURCE_DIR) / "examples/training_folder/my_lora/config.yaml";
    const std::string config_text = slurp(config);
    // Three crashes of the example's family that needed 20% more than the model predicts: what
    // `check` adjusts its estimate by, when it reads the store.
    auto parsed =
        parsers::parse_job_config(config_text, parsers::ConfigFormat::kYaml, "config.yaml");
    REQUIRE(parsed);
    const uint64_t predicted = triage::estimate_memory(triage::spec_from_config(*parsed))
                                   .phase(parsers::Phase::kTrainStep)
                                   ->peak_bytes;
    {
      // The daemon's writer: jobs, snapshots, runs, events and their alerts' outbox rows.
      auto store = db::Store::open(db_path.string());
      REQUIRE(store);
      for (int i = 0; i < 3; ++i) {
        const std::string name = fmt::format("lora_{}", i);
        const int64_t now = daemon::unix_now() - 60 * (3 - i);
        const std::string home = "/out/" + name;
        db::Progress progress;
        progress.job_id = *(*store)->upsert_job(name, home, "ai-toolkit", "/out", now);
        // The run ran this config: what the fleet's history reads it by.
        progress.snapshot_id = *(*store)->add_config_snapshot(
            progress.job_id, home + "/config.yaml", "sha-" + name, config_text, now);
        progress.run_id =
            *(*store)->start_run(progress.job_id, home + "/log.txt", progress.snapshot_id, now);
        progress.file_id = *(*store)->insert_file({.path = home + "/log.txt",
                                                   .dev = 1,
                                                   .ino = static_cast<uint64_t>(10 + i),
                                                   .job_id = progress.job_id,
                                                   .run_id = progress.run_id},
                                                  now);
        progress.outcome = "crashed_oom";
        db::EventRow e;
        e.offset = 100;
        e.kind = "cuda";
        e.phase = "train_step";
        e.step = 40 + i;
        e.event_json =
            nlohmann::json{{"kind", "cuda"},
                           {"phase", "train_step"},
                           {"step", 40 + i},
                           {"recovered", false},
                           {"tried_to_allocate_bytes", uint64_t{1} << 30},
                           {"total_capacity_bytes", uint64_t{48} << 30},
                           {"free_bytes", 0},
                           {"this_process_in_use_bytes", predicted * 6 / 5 - (uint64_t{1} << 30)}}
                .dump();
        e.fixes_json =
            R"([{"id":"enable_gradient_checkpointing","rank":1,"title":"t","changes":[],"cost":"c"}])";
        progress.events.push_back(e);
        progress.receivers = {"ops-webhook"};
        REQUIRE((*store)->commit_progress(progress, now));
      }
    }
    // Closed: the WAL went into the file and away, as when the daemon is stopped.
    REQUIRE_FALSE(fs::exists(state / "oomtriage.db-wal"));

    // Root may write anything: the readers run as nobody where the test runs as root.
    std::string as_reader;
    if (::geteuid() == 0) {
      if (have_program("setpriv")) {
        as_reader = "setpriv --reuid=nobody --regid=nogroup --clear-groups ";
      } else if (have_program("runuser")) {
        as_reader = "runuser -u nobody -- ";
      } else {
        OOMTRIAGE_SKIP("root without setpriv or runuser: no user who may only read the store");
      }
    }
    using fs::perms;
    const perms read_only = perms::owner_read | perms::group_read | perms::others_read;
    const perms enter = read_only | perms::owner_exec | perms::group_exec | perms::others_exec;
    fs::permissions(dir.path, enter | perms::owner_write);  // mkdtemp's 0700 would keep nobody out
    fs::permissions(db_path, read_only);
    fs::permissions(state, enter);
    const auto listing = [&] {
      std::vector<std::string> names;
      for (const auto& entry : fs::directory_iterator(state))
        names.push_back(entry.path().filename());
      std::sort(names.begin(), names.end());
      return names;
    };
    const std::vector<std::string> files_before = listing();
    const std::string bytes_before = slurp(db_path);
    const auto reader_says = [&](const std::string& args) {
      return run_shell("cd / && " + as_reader + OOMTRIAGE_BINARY + " --color never --state-dir " +
                       state.string() + " " + args + " 2>&1");
    };

    int rc = 0;
    std::string out;
    std::tie(rc, out) = reader_says("jobs --json");
    INFO("jobs: " << out);
    CHECK(rc == 0);
    CHECK(out.find("attempt to write a readonly database") == std::string::npos);
    if (rc == 0) {
      CHECK(names(out) == std::vector<std::string>{"lora_2", "lora_1", "lora_0"});
      CHECK(nlohmann::json::parse(out)["jobs"][0]["top_fix"] == "enable_gradient_checkpointing");
    }

    std::tie(rc, out) = reader_says("report lora_1 --json");
    INFO("report: " << out);
    CHECK(rc == 0);
    if (rc == 0) {
      const auto report = nlohmann::json::parse(out);
      CHECK(report["job"]["name"] == "lora_1");
      REQUIRE(report["events"].size() == 1);
      CHECK(report["events"][0]["step"] == 41);
    }

    std::tie(rc, out) = reader_says("check " + config.string() + " --gpu 48GiB");
    INFO("check: " << out);
    CHECK(rc == 0);  // fits, with the history read
    CHECK(out.find("adjusted +20% from 3 runs") != std::string::npos);
    CHECK(out.find("not read") == std::string::npos);

    std::tie(rc, out) = reader_says("alerts --json");
    INFO("alerts: " << out);
    CHECK(rc == 0);
    if (rc == 0) {
      const auto alerts = nlohmann::json::parse(out)["alerts"];
      REQUIRE(alerts.size() == 3);
      CHECK(alerts[0]["receiver"] == "ops-webhook");
      CHECK(alerts[0]["state"] == "pending");
    }

    // Nothing changed: the file's bytes, and nothing made beside it (no -wal, no -shm).
    CHECK(slurp(db_path) == bytes_before);
    CHECK(listing() == files_before);
    fs::permissions(state, enter | perms::owner_write);  // for TempDir's removal
  }
}
