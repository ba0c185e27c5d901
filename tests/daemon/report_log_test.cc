// tests/daemon/report_log_test.cc
//
// `oomtriage report LOG` and `report FOLDER` where no daemon ever ran (issue 47): the log is read
// as `scan` reads it and its OOM reported, in text, JSON and Markdown, with one line saying that
// the daemon keeps the history; a store that knows the log tells its own story instead. A job's
// name with no store is one line with a hint.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

#include "daemon/common/clock.h"
#include "db/store.h"
#include "tests/support/e2e.h"
#include "tests/support/store_rows.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// An AI Toolkit job's folder as `scan` and `fix` find it: output/my_lora/log.txt, crashed in
// sampling at step 500.
fs::path job_folder(const fs::path& root) {
  const fs::path folder = root / "output" / "my_lora";
  fs::create_directories(folder);
  write_file(folder / "log.txt", slurp(kGolden / "aitk_sampling_oom_step500.log"));
  return folder;
}

// `oomtriage report ARGS` on a state folder: its exit code, stdout and stderr apart.
struct Said {
  int code = 0;
  std::string out;
  std::string err;
};
Said report(const fs::path& state, const std::string& args) {
  const fs::path err = state.parent_path() / "report.err";
  auto [code, out] = run_shell(std::string(OOMTRIAGE_BINARY) + " --color never --state-dir " +
                               state.string() + " report " + args + " 2>" + err.string());
  return {code, out, slurp(err)};
}

}  // namespace

TEST_SUITE("daemon::report_log") {
  TEST_CASE("report LOG with no store reads the log as scan does and says the daemon keeps more") {
    TempDir dir;
    const fs::path folder = job_folder(dir.path);
    const fs::path state = dir.path / "state";  // never made: no daemon ran
    const fs::path log = folder / "log.txt";

    const Said text = report(state, log.string());
    CAPTURE(text.out);
    CAPTURE(text.err);
    CHECK(text.code == 0);
    CHECK(text.out.find("job my_lora") != std::string::npos);
    CHECK(text.out.find("crashed_oom") != std::string::npos);
    CHECK(text.out.find("cuda in sampling, step 500") != std::string::npos);
    CHECK(text.out.find("fixes for the last incident") != std::string::npos);
    CHECK(text.err.find("read " + log.string() + " directly (no store at " +
                        (state / "oomtriage.db").string() + ")") != std::string::npos);
    CHECK(text.err.find("`oomtriage daemon` keeps each job's history") != std::string::npos);
    CHECK(std::count(text.err.begin(), text.err.end(), '\n') == 1);  // one line
    CHECK_FALSE(fs::exists(state));                                  // nothing made

    // --json: the report's shape (job, runs, events, fixes), stdout alone.
    const Said json = report(state, log.string() + " --json");
    REQUIRE(json.code == 0);
    const auto doc = nlohmann::json::parse(json.out);
    CHECK(doc["job"]["name"] == "my_lora");
    CHECK(doc["job"]["outcome"] == "crashed_oom");
    REQUIRE(doc["runs"].size() == 1);
    CHECK(doc["runs"][0]["log_path"] == fs::absolute(log).lexically_normal().string());
    REQUIRE(doc["events"].size() == 1);
    CHECK(doc["events"][0]["phase"] == "sampling");
    CHECK(doc["events"][0]["step"] == 500);
    CHECK(doc["events"][0]["run_id"] == doc["runs"][0]["id"]);
    CHECK_FALSE(doc["fixes"].empty());

    // The same fixes `scan` ranks for the log: one analyzer, one ranking.
    auto [scan_code, scan_out] = run_shell(std::string(OOMTRIAGE_BINARY) + " --state-dir " +
                                           state.string() + " scan --json " + log.string());
    REQUIRE(scan_code == 0);
    const auto scanned = nlohmann::json::parse(scan_out)["logs"][0];
    CHECK(doc["fixes"] == scanned["fixes"]);

    const Said markdown = report(state, log.string() + " --markdown");
    CHECK(markdown.code == 0);
    CHECK(markdown.out.find("sampling") != std::string::npos);
  }

  TEST_CASE("report FOLDER reads the job's log in it") {
    TempDir dir;
    const fs::path folder = job_folder(dir.path);
    const fs::path state = dir.path / "state";
    const Said said = report(state, folder.string());
    CAPTURE(said.out);
    CAPTURE(said.err);
    CHECK(said.code == 0);
    CHECK(said.out.find("cuda in sampling, step 500") != std::string::npos);
    CHECK(said.err.find("read " + (folder / "log.txt").string() + " directly") !=
          std::string::npos);

    // The run going on is the newest log of the folder; the older are counted.
    write_file(folder / "old.log", "an older run's log\n");
    fs::last_write_time(folder / "old.log",
                        fs::last_write_time(folder / "log.txt") - std::chrono::hours(1));
    const Said two = report(state, folder.string());
    CHECK(two.code == 0);
    CHECK(two.out.find("cuda in sampling, step 500") != std::string::npos);
    CHECK(two.err.find("the newest of 2 logs") != std::string::npos);

    // A folder with no log says so, as `scan` does, and exits 1.
    fs::create_directories(dir.path / "empty");
    const Said empty = report(state, (dir.path / "empty").string());
    CHECK(empty.code == 1);
    CHECK(empty.err.find("no logs in this folder") != std::string::npos);
  }

  TEST_CASE("a job's name with no store is one line with a hint - without a name too") {
    TempDir dir;
    const fs::path state = dir.path / "state";
    const Said named = report(state, "my_lora");
    CHECK(named.code == 1);
    CHECK(named.out.empty());
    CHECK(std::count(named.err.begin(), named.err.end(), '\n') == 1);
    CHECK(named.err.find("no job named 'my_lora'") != std::string::npos);
    CHECK(named.err.find("oomtriage report LOG") != std::string::npos);
    CHECK(named.err.find("oomtriage daemon") != std::string::npos);

    const Said unnamed = report(state, "");
    CHECK(unnamed.code == 1);
    CHECK(unnamed.err.find("no jobs yet") != std::string::npos);
    CHECK(unnamed.err.find("oomtriage report LOG") != std::string::npos);
  }

  TEST_CASE("a store that knows the log tells its story - one that does not, the log is read") {
    TempDir dir;
    const fs::path folder = job_folder(dir.path);
    const fs::path state = dir.path / "state";
    fs::create_directories(state);
    const std::string home = fs::absolute(folder).lexically_normal().string();
    {
      auto store = db::Store::open((state / "oomtriage.db").string());
      REQUIRE(store);
      const int64_t now = daemon::unix_now();
      // What the daemon stored of this log: an OOM it placed in saving (the log alone says
      // sampling), so that the story told is seen to be the store's.
      db::Progress progress = progress_for_new_job(**store, "my_lora", 1, now, home, home);
      progress.outcome = "crashed_oom";
      db::EventRow e;
      e.offset = 100;
      e.kind = "cuda";
      e.phase = "saving";
      e.step = 700;
      e.event_json = R"({"kind":"cuda","phase":"saving","step":700,"total_steps":3000,)"
                     R"("recovered":false,"line":67,"message":"CUDA out of memory."})";
      e.fixes_json = "[]";
      progress.events.push_back(e);
      REQUIRE((*store)->commit_progress(progress, now));
      // And a job elsewhere.
      db::Progress other = progress_for_new_job(**store, "other", 2, now);
      REQUIRE((*store)->commit_progress(other, now));
    }
    const Said known = report(state, (folder / "log.txt").string());
    CAPTURE(known.out);
    CAPTURE(known.err);
    CHECK(known.code == 0);
    CHECK(known.out.find("cuda in saving, step 700") != std::string::npos);
    CHECK(known.err.find("directly") == std::string::npos);
    const Said by_folder = report(state, folder.string());
    CHECK(by_folder.out.find("cuda in saving, step 700") != std::string::npos);

    // Another copy of the job's folder: the store does not know its log.
    const fs::path copy = dir.path / "copy" / "my_lora";
    fs::create_directories(copy);
    fs::copy_file(folder / "log.txt", copy / "log.txt");
    const Said unknown = report(state, (copy / "log.txt").string());
    CAPTURE(unknown.err);
    CHECK(unknown.code == 0);
    CHECK(unknown.out.find("cuda in sampling, step 500") != std::string::npos);
    CHECK(unknown.err.find("the store at " + (state / "oomtriage.db").string() +
                           " does not know this log") != std::string::npos);
  }
}
