// tests/daemon/daemon_e2e_test.cc
//
// End to end: the real `oomtriage watch` on a temp training folder while a writer appends a log
// in real time. Detection while the file grows; kill -9 mid-stream and restart (every event
// stored exactly once); a job restarted into a new log.txt; rotation by the real logrotate in
// create and copytruncate modes; a vanished file; files present at the first start; a broken
// config; SIGTERM. Every wait is bounded; the store is read with the project's own db::Store.
// Where a test says nothing more may come (after a restart, a rotation, a locked store) the
// daemon's loop runs in process on virtual time (tests/support/virtual_daemon.h), and the
// settle's window is passed on its clock rather than waited out.
#include <doctest/doctest.h>

#include <set>

#include <cstdio>
#include <fcntl.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "tests/support/e2e.h"
#include "tests/support/http_test_server.h"
#include "tests/support/virtual_daemon.h"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using namespace oomtriage;

using namespace oomtriage::testing;

TEST_SUITE("daemon::e2e") {
  TEST_CASE("an OOM is stored while the log grows, in a job folder created after start") {
    TempDir dir;
    const fs::path out = dir.path / "output";
    fs::create_directories(out);
    DaemonProcess daemon(dir.path / "state", {"watch", out.string()}, dir.path / "err");
    const fs::path job = out / "my_lora";
    fs::create_directories(job);
    fs::copy_file(fs::path(OOMTRIAGE_SOURCE_DIR) / "examples/training_folder/my_lora/config.yaml",
                  job / "config.yaml");
    // The log grows in pieces; the crash comes in one burst, as a trainer prints its traceback
    // (a crash written slowly is the test after this one).
    const std::string log = slurp(kGolden / "aitk_sampling_oom_step500.log");
    const size_t crash = log.find("Error running job");
    REQUIRE(crash != std::string::npos);
    write_slowly(job / "log.txt", std::string_view(log).substr(0, crash));
    write_slowly(job / "log.txt", std::string_view(log).substr(crash), log.size());
    StoreView view{dir.path / "state" / "oomtriage.db"};
    REQUIRE(wait_until([&] { return view.events("my_lora") == 1; }));
    const auto story = view.story("my_lora");
    REQUIRE(story);
    const auto event = nlohmann::json::parse(story->events[0].event_json);
    CHECK(event["kind"] == "cuda");
    CHECK(event["phase"] == "sampling");
    CHECK(event["step"] == 500);
    CHECK(event["step_evidence"]["source"] == "bar");  // the daemon stores why, as scan prints it
    CHECK(event["phase_evidence"]["source"] == "frame");
    REQUIRE(story->snapshots.size() == 1);
    CHECK(story->events[0].snapshot_id == story->snapshots[0].id);
    const auto stored_fixes = nlohmann::json::parse(story->events[0].fixes_json);
    CHECK(stored_fixes[0]["id"] == "cheapen_previews");
    // One model everywhere: `scan` of the same log and config prints the same predicted peak
    // for every fix the daemon stored.
    {
      const std::string scan =
          std::string(OOMTRIAGE_BINARY) + " scan --json '" + (job / "log.txt").string() + "'";
      FILE* pipe = ::popen(scan.c_str(), "r");
      REQUIRE(pipe != nullptr);
      std::string out;
      char chunk[4096];
      for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, pipe)) > 0;) out.append(chunk, n);
      ::pclose(pipe);
      const auto scanned = nlohmann::json::parse(out);
      const auto& logs = scanned.is_array() ? scanned : scanned["logs"];
      const auto& scan_fixes = logs[0]["fixes"];
      REQUIRE(scan_fixes.size() == stored_fixes.size());
      for (size_t i = 0; i < scan_fixes.size(); ++i) {
        CAPTURE(scan_fixes[i]["id"]);
        CHECK(scan_fixes[i]["id"] == stored_fixes[i]["id"]);
        CHECK(scan_fixes[i]["predicted_peak_bytes"] == stored_fixes[i]["predicted_peak_bytes"]);
      }
      CHECK(scan_fixes[0]["predicted_peak_bytes"].is_number());
    }
    CHECK(wait_until([&] { return view.story("my_lora")->runs.at(0).outcome == "crashed_oom"; }));
    CHECK(daemon.stderr_text().find("job my_lora: cuda OOM in sampling at step 500/3000") !=
          std::string::npos);
    CHECK(daemon.stop(SIGTERM) == 0);
    // `report` tells why: the lines that showed the phase and the step.
    const std::string command = std::string(OOMTRIAGE_BINARY) + " --state-dir " +
                                (dir.path / "state").string() + " report my_lora --color never";
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string report;
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) report.append(buffer, n);
    CHECK(::pclose(pipe) == 0);
    CHECK(report.find("phase from frame at line") != std::string::npos);
    CHECK(report.find("in generate_images") != std::string::npos);
    CHECK(report.find("step from bar at line") != std::string::npos);
  }
  TEST_CASE("a crash written a line every 50 ms is stored with scan's verdict on the final file") {
    // AI Toolkit's message before its traceback, and a traceback of a trainer nobody wrote rules
    // for that ends in the OOM: each line arrives after the settle time has passed.
    const std::string aitk = slurp(kGolden / "aitk_sampling_oom_step500.log");
    const std::string other =
        "Epoch 0:  45%|████▌     | 45/100 [00:10<00:12,  4.50it/s, loss=0.1]\n"
        "encoding latents for the validation set\n"
        "Traceback (most recent call last):\n"
        "  File \"/home/me/Sample Training/train.py\", line 310, in <module>\n"
        "    main()\n"
        "  File \"/home/me/Sample Training/train.py\", line 288, in main\n"
        "    cache = precompute(vae, loader)\n"
        "  File \"/opt/venv/lib/python3.11/site-packages/diffusers/models/autoencoders/"
        "autoencoder_kl.py\", line 301, in encode\n"
        "    h = self.encoder(x)\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 23.55 GiB of which 1.19 GiB is free.\n";
    for (const auto& [log, crash_at] :
         {std::pair{aitk, aitk.find("Error running job")}, std::pair{other, size_t{0}}}) {
      REQUIRE(crash_at != std::string::npos);
      TempDir dir;
      const fs::path out = dir.path / "output";
      const fs::path job = out / "slow_job";
      fs::create_directories(job);
      DaemonProcess daemon(dir.path / "state", {"watch", out.string()}, dir.path / "err");
      const fs::path path = job / "log.txt";
      write_slowly(path, std::string_view(log).substr(0, crash_at));
      std::istringstream crash(log.substr(crash_at));
      for (std::string line; std::getline(crash, line);) {
        std::ofstream(path, std::ios::app) << line << "\n";
        std::this_thread::sleep_for(50ms);
      }
      const auto [scan_rc, scanned] = oomtriage_says("scan --json '" + path.string() + "'");
      REQUIRE(scan_rc == 0);
      const auto scan_event = nlohmann::json::parse(scanned)["logs"][0]["events"].at(0);
      const std::string report =
          "--state-dir '" + (dir.path / "state").string() + "' report --json";
      std::string reported;
      REQUIRE(wait_until([&] {
        int rc = 0;
        std::tie(rc, reported) = oomtriage_says(report + " 2>/dev/null");
        return rc == 0 && reported.find("\"crashed_oom\"") != std::string::npos;
      }));
      const auto events = nlohmann::json::parse(reported)["events"];
      REQUIRE(events.size() == 1);
      CAPTURE(events[0].dump());
      CAPTURE(scan_event.dump());
      CHECK(events[0]["phase"] == scan_event["phase"]);
      CHECK(events[0]["step"] == scan_event["step"]);
      CHECK(events[0]["phase_evidence"] == scan_event["phase_evidence"]);
      CHECK(events[0]["exception"] == scan_event["exception"]);
    }
  }

  TEST_CASE("a reader of the store never sees a run crashed_oom without its event") {
    // The OOM line opens an incident that settles settle_ms after the log goes quiet (its
    // traceback may still come). Reads commit meanwhile; the run's outcome must wait for the
    // event, in the same transaction. A long settle makes the window wide enough to look into.
    TempDir dir;
    const fs::path out = dir.path / "output";
    fs::create_directories(out / "my_lora");
    const fs::path config = dir.path / "oomtriage.yaml";
    std::ofstream(config) << "state_dir: " << (dir.path / "state").string()
                          << "\nsettle_ms: 3000\nwatch:\n  - logs: " << out.string()
                          << "/*/log.txt\n    job: \"{parent}\"\n";
    DaemonProcess daemon(dir.path / "state", {"daemon", "--config", config.string()},
                         dir.path / "err");
    const std::string log = slurp(kGolden / "aitk_sampling_oom_step500.log");
    const size_t crash = log.find("torch.OutOfMemoryError");
    REQUIRE(crash != std::string::npos);
    write_slowly(out / "my_lora" / "log.txt", log, log.size());  // one burst, crash included
    StoreView view{dir.path / "state" / "oomtriage.db"};
    size_t looks_before_the_event = 0;
    bool stored = false;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (!stored && std::chrono::steady_clock::now() < deadline) {
      const auto story = view.story("my_lora");
      if (story && !story->runs.empty()) {
        stored = !story->events.empty();
        if (!stored) {
          ++looks_before_the_event;
          INFO("the run's outcome before its event: " << story->runs.back().outcome);
          CHECK(story->runs.back().outcome != "crashed_oom");
        }
      }
      std::this_thread::sleep_for(50ms);
    }
    REQUIRE(stored);
    CHECK(looks_before_the_event > 0);  // the window was seen, so the check above could fail
    CHECK(view.story("my_lora")->runs.back().outcome == "crashed_oom");
  }

  TEST_CASE("kill -9 mid-stream and a restart store every event exactly once") {
    TempDir dir;
    const fs::path out = dir.path / "output";
    const fs::path job = out / "zimage_buckets";
    fs::create_directories(job);
    const std::string log = slurp(kGolden / "aitk_bucket_oom_random_step_abort.log");
    const size_t first_banner = log.find("skipping batch 2/3");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    {
      DaemonProcess daemon(dir.path / "state", {"watch", out.string()}, dir.path / "err");
      write_slowly(job / "log.txt", log.substr(0, first_banner));
      REQUIRE(wait_until([&] { return view.events("zimage_buckets") >= 1; }));
      CHECK(daemon.stop(SIGKILL) == -SIGKILL);
    }
    write_slowly(job / "log.txt", log.substr(first_banner));
    VirtualDaemon again(dir.path / "state", daemon::inline_watch_config({out.string()}),
                        dir.path / "err2");
    REQUIRE(again.run_until([&] { return view.events("zimage_buckets") >= 4; }));
    again.pass(600ms);  // longer than the settle delay: nothing more may come
    const auto story = view.story("zimage_buckets");
    REQUIRE(story->events.size() == 4);
    std::vector<int64_t> steps;
    for (const auto& e : story->events)
      steps.push_back(nlohmann::json::parse(e.event_json)["step"]);
    CHECK(steps == std::vector<int64_t>{1337, 1338, 1339, 1340});
    CHECK(story->runs.size() == 1);
  }
  TEST_CASE("a restart while a traceback is still arriving amends the event it reported") {
    // The message first (reported once the traceback wait is over: training, by the bar), then
    // the daemon killed, then the traceback whose frames say it was a preview: one event, amended.
    TempDir dir;
    const fs::path out = dir.path / "output";
    const fs::path job = out / "my_lora";
    fs::create_directories(job);
    const std::string head =
        "my_lora:  17%|#         | 500/3000 [12:02<58:09,  1.40s/it, lr: 1.0e-04 "
        "loss: 3.261e-01]\n"
        "Error running job: CUDA out of memory. Tried to allocate 2.00 GiB. "
        "GPU 0 has a total capacity of 23.55 GiB of which 1.19 GiB is free.\n"
        "========================================\nResult:\n - 1 failure\n";
    const std::string tail =
        "Traceback (most recent call last):\n"
        "  File \"/app/ai-toolkit/jobs/process/BaseSDTrainProcess.py\", line 378, in sample\n"
        "    self.sd.generate_images(gen_img_config_list)\n"
        "  File \"/app/ai-toolkit/toolkit/models/base_model.py\", line 512, in generate_images\n"
        "    img = pipeline(**extra)\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
        "capacity of 23.55 GiB of which 1.19 GiB is free.\n";
    StoreView view{dir.path / "state" / "oomtriage.db"};
    {
      DaemonProcess daemon(dir.path / "state", {"watch", out.string()}, dir.path / "err");
      write_slowly(job / "log.txt", head);
      REQUIRE(wait_until([&] { return view.events("my_lora") >= 1; }));
      CHECK(nlohmann::json::parse(view.story("my_lora")->events[0].event_json)["phase"] ==
            "train_step");
      CHECK(daemon.stop(SIGKILL) == -SIGKILL);
    }
    write_slowly(job / "log.txt", tail);
    VirtualDaemon again(dir.path / "state", daemon::inline_watch_config({out.string()}),
                        dir.path / "err2");
    REQUIRE(again.run_until([&] {
      const auto story = view.story("my_lora");
      return story && !story->events.empty() &&
             nlohmann::json::parse(story->events[0].event_json)["phase"] == "sampling";
    }));
    again.pass(3s);  // past the traceback wait: nothing more may come
    const auto story = view.story("my_lora");
    REQUIRE(story->events.size() == 1);
    const auto event = nlohmann::json::parse(story->events[0].event_json);
    CHECK(event["phase"] == "sampling");
    CHECK(event["step"] == 500);
  }

  TEST_CASE("a restarted job: log.txt moved to logs/, a new log.txt is a new run") {
    TempDir dir;
    const fs::path out = dir.path / "output";
    const fs::path job = out / "flux_gc_off";
    fs::create_directories(job);
    DaemonProcess daemon(dir.path / "state", {"watch", out.string()}, dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    write_slowly(job / "log.txt", slurp(kGolden / "aitk_gc_off_oom_step2.log"));
    REQUIRE(wait_until([&] { return view.events("flux_gc_off") == 1; }));
    fs::create_directories(job / "logs");
    fs::rename(job / "log.txt", job / "logs" / "1_log.txt");
    write_slowly(job / "log.txt", slurp(kGolden / "aitk_completed.log"));
    REQUIRE(wait_until([&] {
      auto s = view.story("flux_gc_off");
      return s && s->runs.size() == 2 && s->runs[1].outcome == "completed";
    }));
    CHECK(view.events("flux_gc_off") == 1);
    CHECK(view.story("flux_gc_off")->runs[0].outcome == "crashed_oom");
  }
  TEST_CASE("the next run carried the fix and crashed the same way: the next lever leads") {
    TempDir dir;
    const fs::path out = dir.path / "output";
    const fs::path job = out / "previews";
    fs::create_directories(job);
    // The config the golden log prints at its top (a LoRA: the network section is the file's).
    const std::string yaml =
        "job: extension\nconfig:\n  name: previews\n  process:\n    - type: sd_trainer\n"
        "      network:\n        type: lora\n        linear: 16\n"
        "      train:\n        batch_size: 1\n        steps: 3000\n"
        "        gradient_checkpointing: true\n        dtype: bf16\n"
        "      datasets:\n        - folder_path: /data/images\n"
        "          cache_latents_to_disk: true\n          resolution: [512, 768, 1024]\n"
        "      model:\n        name_or_path: black-forest-labs/FLUX.1-dev\n"
        "        is_flux: true\n        quantize: true\n"
        "      sample:\n        sample_every: 250\n        width: 1024\n        height: 1024\n"
        "        sample_steps: 20\n";
    std::ofstream(job / "config.yaml") << yaml;
    DaemonProcess daemon(dir.path / "state", {"watch", out.string()}, dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    write_slowly(job / "log.txt", slurp(kGolden / "aitk_sampling_oom_step500.log"));
    REQUIRE(wait_until([&] { return view.events("previews") == 1; }));
    CHECK(nlohmann::json::parse(view.story("previews")->events[0].fixes_json)[0]["id"] ==
          "cheapen_previews");
    // The user applies the top fix, the job restarts and dies in sampling again.
    const std::string fix = std::string(OOMTRIAGE_BINARY) + " --state-dir " +
                            (dir.path / "state").string() + " fix " + (job / "log.txt").string() +
                            " --write " + (job / "config.yaml").string() + " >/dev/null 2>&1";
    REQUIRE(std::system(fix.c_str()) == 0);
    fs::create_directories(job / "logs");
    fs::rename(job / "log.txt", job / "logs" / "1_log.txt");
    // The second run prints the config it started with: the fixed one.
    std::string second = slurp(kGolden / "aitk_sampling_oom_step500.log");
    for (const std::string key : {"\"width\": 1024", "\"height\": 1024"}) {
      second.replace(second.find(key), key.size(), key.substr(0, key.size() - 4) + "768");
    }
    write_slowly(job / "log.txt", second);
    REQUIRE(wait_until([&] { return view.events("previews") == 2; }));
    const auto story = view.story("previews");
    REQUIRE(story);
    REQUIRE(story->runs.size() == 2);
    const auto fixes = nlohmann::json::parse(story->events[1].fixes_json);
    INFO("the second crash's fixes: " << fixes.dump());
    REQUIRE(fixes.size() >= 2);
    CHECK(fixes[0]["id"] == "disable_sampling");
    CHECK(fixes.back()["id"] == "cheapen_previews");
    {
      // scan reads the same history from the store: the same fixes as the daemon's.
      const std::string scan = std::string(OOMTRIAGE_BINARY) + " --state-dir " +
                               (dir.path / "state").string() + " scan --json " +
                               (job / "log.txt").string() + " 2>/dev/null";
      FILE* pipe = ::popen(scan.c_str(), "r");
      REQUIRE(pipe != nullptr);
      std::string out;
      char buffer[4096];
      for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
      ::pclose(pipe);
      CHECK(nlohmann::json::parse(out)["logs"][0]["fixes"].dump() == fixes.dump());
    }
    // `report` tells which fix the second run carried and that it did not work.
    const std::string command = std::string(OOMTRIAGE_BINARY) + " --state-dir " +
                                (dir.path / "state").string() + " report previews --color never";
    FILE* pipe = ::popen(command.c_str(), "r");
    REQUIRE(pipe != nullptr);
    std::string report;
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) report.append(buffer, n);
    CHECK(::pclose(pipe) == 0);
    CHECK(report.find("carried cheapen_previews from the previous crash: did not work: crashed "
                      "again in sampling") != std::string::npos);
  }
  TEST_CASE(
      "fault: the store refuses commits (locked by another writer): the OOM is stored once later") {
    TempDir dir;
    const fs::path out = dir.path / "output";
    const fs::path job = out / "locked";
    fs::create_directories(job);
    VirtualDaemon daemon(dir.path / "state", daemon::inline_watch_config({out.string()}),
                         dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    // The job is followed; then another writer holds the store while the crash is written.
    const std::string log = slurp(kGolden / "aitk_sampling_oom_step500.log");
    const size_t half = log.size() / 3;
    write_slowly(job / "log.txt", log.substr(0, half));
    REQUIRE(daemon.run_until([&] { return view.story("locked").has_value(); }));
    sqlite3* other = nullptr;
    REQUIRE(sqlite3_open((dir.path / "state" / "oomtriage.db").c_str(), &other) == SQLITE_OK);
    // The daemon may be committing this very moment (a checkpoint, the read's progress): wait for
    // its transaction as any other writer would, instead of failing on the first SQLITE_BUSY.
    sqlite3_busy_timeout(other, 10000);
    REQUIRE(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) == SQLITE_OK);
    write_slowly(job / "log.txt", log.substr(half));
    REQUIRE(daemon.run_until(
        [&] { return daemon.stderr_text().find("nothing is lost") != std::string::npos; }));
    daemon.pass(300ms);  // a few refused commits and checkpoints
    REQUIRE(sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(other);
    REQUIRE(daemon.run_until([&] { return view.events("locked") == 1; }, 40s));
    daemon.pass(500ms);
    CHECK(view.events("locked") == 1);
    const auto story = view.story("locked");
    REQUIRE(story);
    CHECK(nlohmann::json::parse(story->events[0].event_json)["step"] == 500);
    CHECK(daemon.stderr_text().find("store: answering again") != std::string::npos);
  }
  TEST_CASE("fault: a second daemon on the same state dir is refused with a clear message") {
    TempDir dir;
    const fs::path out = dir.path / "output";
    fs::create_directories(out);
    DaemonProcess first(dir.path / "state", {"watch", out.string()}, dir.path / "err");
    const std::string second = std::string(OOMTRIAGE_BINARY) + " --state-dir " +
                               (dir.path / "state").string() + " watch " + out.string() + " 2>" +
                               (dir.path / "err2").string();
    const int status = std::system(second.c_str());
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
    CHECK(slurp(dir.path / "err2")
              .find("another oomtriage daemon (pid " + std::to_string(first.pid()) +
                    ") already uses") != std::string::npos);
    CHECK(first.alive());
  }
  TEST_CASE("fault: a store that exists but has no jobs yet is not a first start") {
    TempDir dir;
    const fs::path out = dir.path / "output";
    fs::create_directories(out);
    {
      DaemonProcess daemon(dir.path / "state", {"watch", out.string()}, dir.path / "err");
      CHECK(daemon.stop(SIGTERM) == 0);
    }
    // While it was down, a job started and crashed.
    fs::create_directories(out / "while_down");
    std::ofstream(out / "while_down" / "log.txt") << slurp(kGolden / "aitk_gc_off_oom_step2.log");
    DaemonProcess daemon(dir.path / "state", {"watch", out.string()}, dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    CHECK(wait_until([&] { return view.events("while_down") == 1; }));
  }
  TEST_CASE("fault: copytruncate while down, written past the old offset with the same head") {
    // A restarted job prints the same first KiB; by the restart the new run is longer than the
    // old offset and its crash sits before it. Size and head agree; the anchor does not.
    TempDir dir;
    const fs::path out = dir.path / "output";
    const fs::path job = out / "same_head";
    fs::create_directories(job);
    const std::string crash = slurp(kGolden / "aitk_gc_off_oom_step2.log");
    const std::string head = crash.substr(0, 1024);
    std::string old_run = head;
    for (int i = 0; old_run.size() < 32 * 1024; ++i)
      old_run += "old run, line " + std::to_string(i) + "\n";
    std::ofstream(job / "log.txt", std::ios::binary) << old_run;
    {
      DaemonProcess daemon(dir.path / "state", {"watch", out.string()}, dir.path / "err");
      StoreView view{dir.path / "state" / "oomtriage.db"};
      REQUIRE(wait_until([&] { return view.story("same_head").has_value(); }));
      CHECK(daemon.stop(SIGTERM) == 0);  // which reads to the end and commits the offset
    }
    // logrotate copytruncate, then the new run writes on while oomtriage is down.
    fs::copy_file(job / "log.txt", job / "log.txt.1");
    fs::resize_file(job / "log.txt", 0);
    std::string new_run = crash;
    for (int i = 0; new_run.size() < 40 * 1024; ++i)
      new_run += "new run, line " + std::to_string(i) + "\n";
    std::ofstream(job / "log.txt", std::ios::binary | std::ios::app) << new_run;
    DaemonProcess daemon(dir.path / "state", {"watch", out.string()}, dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    REQUIRE(wait_until([&] { return view.events("same_head") == 1; }));
    CHECK(nlohmann::json::parse(view.story("same_head")->events[0].event_json)["step"] == 2);
  }
  TEST_CASE("fault: a log rewritten in place at the same size is read again") {
    TempDir dir;
    const fs::path out = dir.path / "output";
    const fs::path job = out / "rewritten";
    fs::create_directories(job);
    VirtualDaemon daemon(dir.path / "state", daemon::inline_watch_config({out.string()}),
                         dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    const std::string crash = slurp(kGolden / "aitk_gc_off_oom_step2.log");
    std::string quiet(crash.size(), '.');
    for (size_t i = 79; i < quiet.size(); i += 80) quiet[i] = '\n';
    write_slowly(job / "log.txt", quiet);
    REQUIRE(daemon.run_until([&] { return view.story("rewritten").has_value(); }));
    daemon.pass(300ms);
    {
      // Overwrite in place: never shorter, same size at the end.
      std::fstream f(job / "log.txt", std::ios::binary | std::ios::in | std::ios::out);
      f.seekp(0);
      f << crash;
    }
    REQUIRE(daemon.run_until([&] { return view.events("rewritten") == 1; }));
  }
  TEST_CASE(
      "fault: a log deleted or renamed while its writer still writes: the later writes are read") {
    // The trainer keeps its descriptor: after `rm log.txt` (or logrotate's rename, before the
    // trainer reopens) it writes on into the file the name no longer reaches, crash included.
    TempDir dir;
    const fs::path out = dir.path / "output";
    fs::create_directories(out);
    VirtualDaemon daemon(dir.path / "state", daemon::inline_watch_config({out.string()}),
                         dir.path / "err", /*verbose=*/true);
    StoreView view{dir.path / "state" / "oomtriage.db"};
    const std::string log = slurp(kGolden / "aitk_sampling_oom_step500.log");
    const size_t third = log.size() / 3;
    for (const char* job : {"deleted", "renamed"}) {
      fs::create_directories(out / job);
      std::ofstream writer(out / job / "log.txt", std::ios::binary);
      writer << log.substr(0, third) << std::flush;
      REQUIRE(daemon.run_until([&] { return view.story(job).has_value(); }));
      daemon.pass(200ms);
      if (std::string(job) == "deleted") {
        fs::remove(out / job / "log.txt");
      } else {
        fs::rename(out / job / "log.txt", out / job / "log.txt.1");
      }
      // The daemon has seen the name go (it says so with --verbose).
      const std::string gone =
          (out / job / "log.txt").string() +
          (std::string(job) == "deleted" ? " was deleted" : " was rotated away");
      REQUIRE(
          daemon.run_until([&] { return daemon.stderr_text().find(gone) != std::string::npos; }));
      for (size_t i = third; i < log.size(); i += 512) writer << log.substr(i, 512) << std::flush;
      CHECK(daemon.run_until([&] { return view.events(job) == 1; }));
      CHECK(nlohmann::json::parse(view.story(job)->events.at(0).event_json)["step"] == 500);
    }
  }
  TEST_CASE(
      "fault: rotated while down into logs/ or logrotate's olddir: the unread tail is drained "
      "there") {
    TempDir dir;
    const fs::path out = dir.path / "output";
    const fs::path config = dir.path / "oomtriage.yaml";
    std::ofstream(config) << "watch:\n  - logs: " << (out / "*" / "log.txt").string()
                          << "\n    rotated_to: \"{dir}/old\"\n";
    const std::string log = slurp(kGolden / "aitk_gc_off_oom_step2.log");
    const size_t half = log.size() / 3;
    for (const char* job : {"restarted", "olddir"}) {
      fs::create_directories(out / job);
      std::ofstream(out / job / "log.txt", std::ios::binary) << log.substr(0, half);
    }
    const std::vector<std::string> args = {"daemon", "--config", config.string()};
    {
      DaemonProcess daemon(dir.path / "state", args, dir.path / "err");
      StoreView view{dir.path / "state" / "oomtriage.db"};
      // The first start reads present logs from their end; appended bytes are read.
      for (const char* job : {"restarted", "olddir"}) {
        REQUIRE(wait_until([&] { return view.story(job).has_value(); }));
      }
      CHECK(daemon.stop(SIGTERM) == 0);
    }
    // While oomtriage is down, each job crashes, and its log is moved away.
    for (const char* job : {"restarted", "olddir"}) {
      std::ofstream(out / job / "log.txt", std::ios::binary | std::ios::app) << log.substr(half);
    }
    fs::create_directories(out / "restarted" / "logs");
    fs::rename(out / "restarted" / "log.txt", out / "restarted" / "logs" / "1_log.txt");
    fs::create_directories(out / "olddir" / "old");
    fs::rename(out / "olddir" / "log.txt", out / "olddir" / "old" / "log.txt.1");
    DaemonProcess daemon(dir.path / "state", args, dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    CHECK(wait_until([&] { return view.events("restarted") == 1; }));
    CHECK(wait_until([&] { return view.events("olddir") == 1; }));
  }
  TEST_CASE(
      "fault: more logs than descriptors (ulimit -n 64): idle logs are closed, busy ones make "
      "the others wait, every crash is stored") {
    // Each crash's incident stays open for settle_ms, so every open log is busy at once: the
    // others, and logs that appear then, wait for a descriptor instead of taking the reserve
    // the store and its identity file live on (the budget is a hard cap).
    TempDir dir;
    const fs::path out = dir.path / "output";
    constexpr int kLogs = 120;
    constexpr int kLateLogs = 10;  // created while every descriptor is busy
    for (int i = 0; i < kLogs; ++i) {
      fs::create_directories(out / ("job" + std::to_string(i)));
      std::ofstream(out / ("job" + std::to_string(i)) / "log.txt") << "Running 1 job\n";
    }
    const fs::path conf = dir.path / "oomtriage.yaml";
    std::ofstream(conf) << "settle_ms: 1500\nrescan_seconds: 3600\nwatch:\n  - logs: "
                        << (out / "*" / "log.txt").string() << "\n";
    const fs::path err = dir.path / "err";
    const std::string command = "ulimit -n 64 && exec " + std::string(OOMTRIAGE_BINARY) +
                                " --state-dir " + (dir.path / "state").string() +
                                " daemon --config " + conf.string() + " 2>" + err.string();
    pid_t pid = -1;
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    REQUIRE(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) == 0);
    struct Reap {
      pid_t pid;
      ~Reap() {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    } reap{pid};
    REQUIRE(wait_until([&] { return slurp(err).find("store ready") != std::string::npos; }));
    const std::string crash = slurp(kGolden / "aitk_host_sigkill.log");
    for (int i = 0; i < kLogs; ++i) {
      std::ofstream(out / ("job" + std::to_string(i)) / "log.txt", std::ios::app) << crash;
    }
    CHECK(wait_until([&] { return slurp(err).find("all busy") != std::string::npos; }));
    for (int i = kLogs; i < kLogs + kLateLogs; ++i) {
      fs::create_directories(out / ("job" + std::to_string(i)));
      std::ofstream(out / ("job" + std::to_string(i)) / "log.txt") << "Running 1 job\n" << crash;
    }
    const auto all_stored = [&] {
      auto store = db::Store::open((dir.path / "state" / "oomtriage.db").string());
      if (!store) return false;
      for (int i = 0; i < kLogs + kLateLogs; ++i) {
        auto story = (*store)->job_story("job" + std::to_string(i));
        if (!story || !*story || (*story)->events.size() != 1) return false;
      }
      return true;
    };
    const bool stored = wait_until(all_stored, 90s);
    std::string notes;  // what the daemon said besides the events, when it fails
    std::istringstream lines(slurp(err));
    for (std::string line; std::getline(lines, line);) {
      if (line.find("OOM in") == std::string::npos && line.rfind("<7>", 0) != 0)
        notes += line + "\n";
    }
    {
      auto store = db::Store::open((dir.path / "state" / "oomtriage.db").string());
      REQUIRE(store);
      std::map<size_t, int> histogram;
      for (int i = 0; i < kLogs + kLateLogs; ++i) {
        auto story = (*store)->job_story("job" + std::to_string(i));
        ++histogram[story && *story ? (*story)->events.size() : 99];
      }
      for (const auto& [n, jobs] : histogram)
        notes += fmt::format("{} jobs with {} events\n", jobs, n);
    }
    INFO(notes);
    CHECK(stored);
    CHECK(slurp(err).find("Too many open files") == std::string::npos);
    CHECK(slurp(err).find("store identity") == std::string::npos);
  }
  TEST_CASE("real logrotate, create and copytruncate, mid-run: no event lost or doubled") {
    for (const char* mode : {"create", "copytruncate"}) {
      CAPTURE(mode);
      TempDir dir;
      const fs::path out = dir.path / "output";
      const fs::path job = out / "zimage_buckets";
      fs::create_directories(job);
      const fs::path conf = dir.path / "logrotate.conf";
      std::ofstream(conf) << (job / "log.txt").string() << " {\n  " << mode
                          << "\n  rotate 3\n  missingok\n  nocompress\n}\n";
      VirtualDaemon daemon(dir.path / "state", daemon::inline_watch_config({out.string()}),
                           dir.path / "err");
      StoreView view{dir.path / "state" / "oomtriage.db"};
      const std::string log = slurp(kGolden / "aitk_bucket_oom_random_step_abort.log");
      const size_t cut = log.find('\n', log.find("skipping batch 2/3")) + 1;
      write_slowly(job / "log.txt", log.substr(0, cut));
      REQUIRE(daemon.run_until([&] { return view.events("zimage_buckets") >= 1; }));
      const std::string command =
          "logrotate -f -s " + (dir.path / "state.lr").string() + " " + conf.string() + " 2>&1";
      REQUIRE(std::system(command.c_str()) == 0);
      CHECK(fs::exists(job / "log.txt.1"));
      write_slowly(job / "log.txt", log.substr(cut));  // the trainer reopens and goes on
      REQUIRE(daemon.run_until([&] { return view.events("zimage_buckets") >= 4; }));
      daemon.pass(600ms);  // longer than the settle delay: nothing more may come
      CHECK(view.events("zimage_buckets") == 4);
    }
  }
  TEST_CASE("a vanished file does not stop the others") {
    TempDir dir;
    const fs::path out = dir.path / "output";
    fs::create_directories(out / "a");
    fs::create_directories(out / "b");
    VirtualDaemon daemon(dir.path / "state", daemon::inline_watch_config({out.string()}),
                         dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    write_slowly(out / "a" / "log.txt", "Running 1 job\n# Running job: a\nsteps: 1\n");
    REQUIRE(daemon.run_until([&] { return view.story("a").has_value(); }));
    fs::remove_all(out / "a");
    write_slowly(out / "b" / "log.txt", slurp(kGolden / "aitk_host_sigkill.log"));
    REQUIRE(daemon.run_until([&] { return view.events("b") == 1; }));
    // A followed log written and deleted back to back: both changes usually come in one read of
    // the inotify queue (the write first), and the daemon must not trip over the file it let go.
    for (int i = 0; i < 20; ++i) {
      const fs::path log = out / ("flash" + std::to_string(i)) / "log.txt";
      fs::create_directories(log.parent_path());
      std::ofstream(log) << "Running 1 job\n";
      REQUIRE(
          daemon.run_until([&] { return view.story("flash" + std::to_string(i)).has_value(); }));
      daemon.pass(20ms);  // followed and watched
      std::ofstream(log, std::ios::app) << "step 1\n";
      fs::remove(log);
    }
    // inotify's queue is read in order: once a crash written after the deletions is stored,
    // the daemon has been through all of them.
    fs::create_directories(out / "after");
    write_slowly(out / "after" / "log.txt", "Killed\n");
    CHECK(daemon.run_until([&] { return view.events("after") == 1; }));
  }
  TEST_CASE("two training folders with a job of the same name make two jobs, not one") {
    TempDir dir;
    const fs::path a = dir.path / "col" / "a";
    const fs::path b = dir.path / "col" / "b";
    fs::create_directories(a / "my_lora");
    fs::create_directories(b / "my_lora");
    DaemonProcess daemon(dir.path / "state", {"watch", a.string(), b.string()}, dir.path / "err");
    write_slowly(a / "my_lora" / "log.txt", slurp(kGolden / "aitk_sampling_oom_step500.log"), 8192);
    write_slowly(b / "my_lora" / "log.txt", slurp(kGolden / "aitk_gc_off_oom_step2.log"), 8192);
    const fs::path db = dir.path / "state" / "oomtriage.db";
    std::vector<db::JobSummary> jobs;
    REQUIRE(wait_until([&] {
      auto store = db::Store::open(db.string());
      if (!store) return false;
      auto listed = (*store)->list_jobs();
      if (!listed) return false;
      jobs = *listed;
      return jobs.size() == 2 && jobs[0].events == 1 && jobs[1].events == 1;
    }));
    std::set<std::string> homes;
    for (const auto& job : jobs) {
      CHECK(job.name == "my_lora");
      homes.insert(job.home);
    }
    CHECK(homes == std::set<std::string>{(a / "my_lora").string(), (b / "my_lora").string()});
    const std::string listing =
        oomtriage_says("--color never --state-dir '" + (dir.path / "state").string() + "' jobs")
            .second;
    CHECK(listing.find("my_lora (col/a)") != std::string::npos);
    CHECK(listing.find("my_lora (col/b)") != std::string::npos);
  }
  TEST_CASE("logs present at the first start are read from their end") {
    TempDir dir;
    const fs::path out = dir.path / "output";
    fs::create_directories(out / "old");
    fs::copy_file(kGolden / "aitk_gc_off_oom_step2.log", out / "old" / "log.txt");
    DaemonProcess daemon(dir.path / "state", {"watch", out.string()}, dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    // Ready comes after the first scan, which read the old log from its end: nothing is left.
    REQUIRE(view.story("old").has_value());
    CHECK(view.events("old") == 0);  // no alert storm over an old crash
    // `report` says so, and how to read the part the daemon skipped.
    const std::string report = oomtriage_says("--color never --state-dir '" +
                                              (dir.path / "state").string() + "' report old")
                                   .second;
    const std::string log = (out / "old" / "log.txt").string();
    CHECK(report.find("note: " + log +
                      " was already there when the daemon first started and was read from its end; "
                      "`oomtriage scan " +
                      log + "` reads it all") != std::string::npos);
    CHECK(view.story("old")->unread_log == log);
    write_slowly(out / "old" / "log.txt", "Job process terminated with signal SIGKILL.\n");
    REQUIRE(wait_until([&] { return view.events("old") == 1; }));
    const auto event = nlohmann::json::parse(view.story("old")->events[0].event_json);
    CHECK(event["kind"] == "host_killed");
    // Line numbers count the lines skipped at the start.
    const std::string old = slurp(kGolden / "aitk_gc_off_oom_step2.log");
    CHECK(event["line"].get<int64_t>() == std::count(old.begin(), old.end(), '\n') + 1);
  }
  TEST_CASE("--backfill: logs present at the first start are read from their beginning") {
    TempDir dir;
    const fs::path out = dir.path / "output";
    fs::create_directories(out / "old");
    fs::copy_file(kGolden / "aitk_gc_off_oom_step2.log", out / "old" / "log.txt");
    DaemonProcess daemon(dir.path / "state", {"watch", "--backfill", out.string()},
                         dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    REQUIRE(wait_until([&] { return view.events("old") == 1; }));
    const auto event = nlohmann::json::parse(view.story("old")->events[0].event_json);
    CHECK(event["step"] == 2);
    CHECK(daemon.stderr_text().find("backfill: reading the logs already here") !=
          std::string::npos);
    CHECK_FALSE(view.story("old")->unread_log.has_value());  // nothing skipped, nothing to say
  }
  TEST_CASE("a broken daemon config is refused with its file, line and reason") {
    TempDir dir;
    const fs::path conf = dir.path / "oomtriage.yaml";
    std::ofstream(conf) << "watch:\n  - logs: /x/*/log.txt\n    trainer: pytorch-lightning\n";
    const std::string command = std::string(OOMTRIAGE_BINARY) + " --state-dir " +
                                dir.path.string() + " daemon --config " + conf.string() + " 2>" +
                                (dir.path / "err").string();
    const int status = std::system(command.c_str());
    CHECK(WEXITSTATUS(status) == 1);
    CHECK(slurp(dir.path / "err").find(conf.string() + ":3: unknown trainer `pytorch-lightning`") !=
          std::string::npos);
  }
  TEST_CASE("a new folder is looked into at once, level by level, without a full rescan") {
    // /out/<group>/<job>/log.txt: the group folder comes first, the job's later, then its log.
    // Each is found from inotify alone (the periodic rescan is an hour away).
    TempDir dir;
    const fs::path out = dir.path / "out";
    fs::create_directories(out);
    const fs::path conf = dir.path / "oomtriage.yaml";
    std::ofstream(conf) << "rescan_seconds: 3600\nwatch:\n  - logs: "
                        << (out / "*" / "*" / "log.txt").string() << "\n";
    VirtualDaemon daemon(dir.path / "state", conf, dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    fs::create_directories(out / "group");
    daemon.pass(200ms);
    fs::create_directories(out / "group" / "job");
    daemon.pass(200ms);
    write_slowly(out / "group" / "job" / "log.txt", "Killed\n");
    // Virtual time: the rescan, an hour away, cannot have come in these seconds.
    CHECK(daemon.run_until([&] { return view.events("job") == 1; }, 3s));
    // A folder and its log made at once (mkdir -p, then a write before the watch is there).
    fs::create_directories(out / "group2" / "job2");
    std::ofstream(out / "group2" / "job2" / "log.txt") << "Killed\n";
    CHECK(daemon.run_until([&] { return view.events("job2") == 1; }, 3s));
  }
  TEST_CASE("SIGHUP reloads the config, and keeps the old one when the new one is bad") {
    TempDir dir;
    const fs::path a = dir.path / "a";
    const fs::path b = dir.path / "b";
    fs::create_directories(a / "job1");
    fs::create_directories(b / "job2");
    const fs::path conf = dir.path / "oomtriage.yaml";
    std::ofstream(conf) << "watch:\n  - logs: " << (a / "*" / "log.txt").string() << "\n";
    DaemonProcess daemon(dir.path / "state", {"daemon", "--config", conf.string()},
                         dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    std::ofstream(conf) << "watch: [unclosed\n";
    ::kill(daemon.pid(), SIGHUP);
    REQUIRE(wait_until(
        [&] { return daemon.stderr_text().find("keeping the old config") != std::string::npos; }));
    write_slowly(a / "job1" / "log.txt", "Job process terminated with signal SIGKILL.\n");
    REQUIRE(wait_until([&] { return view.events("job1") == 1; }));
    std::ofstream(conf) << "watch:\n  - logs: " << (b / "*" / "log.txt").string() << "\n";
    ::kill(daemon.pid(), SIGHUP);
    REQUIRE(wait_until(
        [&] { return daemon.stderr_text().find("config reloaded") != std::string::npos; }));
    write_slowly(b / "job2" / "log.txt", "Killed\n");
    REQUIRE(wait_until([&] { return view.events("job2") == 1; }));
    CHECK(daemon.stop(SIGTERM) == 0);
  }
  TEST_CASE(
      "a SIGHUP storm: reloads coalesce, OOMs are stored and alerted while it lasts, a file "
      "broken for a moment is read again, and the last config written is the one in force") {
    TempDir dir;
    // A webhook with its 2 s storm window: a reload every second must not reopen it each time.
    HttpTestServer server([](const ReceivedRequest&, size_t) { return ScriptedResponse{}; });
    const fs::path a = dir.path / "a";
    const fs::path b = dir.path / "b";
    fs::create_directories(a);
    fs::create_directories(b / "late");
    const fs::path conf = dir.path / "oomtriage.yaml";
    const auto write_config = [&](bool with_b) {
      const fs::path tmp = dir.path / "oomtriage.yaml.tmp";
      std::ofstream(tmp) << "watch:\n  - logs: " << (a / "*" / "log.txt").string() << "\n"
                         << (with_b ? "  - logs: " + (b / "*" / "log.txt").string() + "\n" : "")
                         << "alerts:\n  - name: hook\n    type: webhook\n    url: "
                         << server.url("/oom") << "\n";
      fs::rename(tmp, conf);
    };
    write_config(false);
    DaemonProcess daemon(dir.path / "state", {"daemon", "--config", conf.string()},
                         dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    const auto count = [&](const std::string& needle) {
      const std::string text = daemon.stderr_text();
      int n = 0;
      for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
        ++n;
      return n;
    };
    // 100 signals a second, and the file rewritten between two versions all the while.
    std::atomic<bool> storming{true};
    std::atomic<int> sent{0};
    std::thread storm([&] {
      for (int i = 0; storming; ++i) {
        ::kill(daemon.pid(), SIGHUP);
        ++sent;
        if (i % 10 == 0) write_config(i % 20 == 0);
        std::this_thread::sleep_for(10ms);
      }
    });
    // Each OOM is stored, and its alert sent, while the storm goes on.
    for (int n = 0; n < 6; ++n) {
      const std::string job = fmt::format("job{}", n);
      fs::create_directories(a / job);
      write_slowly(a / job / "log.txt", "Killed\n");
      CHECK(wait_until([&] { return view.events(job) == 1; }));
      CHECK(wait_until([&] { return server.count() == static_cast<size_t>(n + 1); }));
    }
    // The last version written is the one in force once the signals stop.
    storming = false;
    storm.join();
    write_config(true);
    ::kill(daemon.pid(), SIGHUP);
    const int reloads_then = count("SIGHUP: config reloaded");
    REQUIRE(wait_until([&] { return count("SIGHUP: config reloaded") > reloads_then; }));
    write_slowly(b / "late" / "log.txt", "Killed\n");
    CHECK(wait_until([&] { return view.events("late") == 1; }));
    const int reloads = count("SIGHUP: config reloaded");
    INFO("signals sent: " << sent.load() << ", reloads: " << reloads);
    CHECK(sent.load() > 100);
    CHECK(reloads < sent.load() / 4);  // at most one a second, plus the one after the storm
    CHECK(count("keeping the old config") == 0);  // every version written was whole

    // A file caught half-written is read again a moment later, not refused.
    std::this_thread::sleep_for(1100ms);  // past the spacing: the next reload runs at once
    std::ofstream(conf) << "watch: [unclosed\n";
    ::kill(daemon.pid(), SIGHUP);
    std::this_thread::sleep_for(100ms);
    write_config(false);
    const int before = count("SIGHUP: config reloaded");
    REQUIRE(wait_until([&] { return count("SIGHUP: config reloaded") > before; }));
    CHECK(count("keeping the old config") == 0);
    CHECK(daemon.stop(SIGTERM) == 0);
  }
  TEST_CASE(
      "SIGHUP keeps the logs of a rule it left unchanged as they are - those of a changed "
      "rule are followed again under the new one") {
    TempDir dir;
    fs::create_directories(dir.path / "a" / "job1");
    fs::create_directories(dir.path / "b" / "job2");
    const fs::path log1 = dir.path / "a" / "job1" / "log.txt";
    const fs::path log2 = dir.path / "b" / "job2" / "log.txt";
    std::ofstream(log1) << "step 1\n";
    std::ofstream(log2) << "step 1\n";
    const fs::path conf = dir.path / "oomtriage.yaml";
    const auto write_config = [&](const std::string& second_job) {
      std::ofstream(conf) << "watch:\n  - logs: " << (dir.path / "a" / "*" / "log.txt").string()
                          << "\n  - logs: " << (dir.path / "b" / "*" / "log.txt").string()
                          << "\n    job: \"" << second_job << "\"\n";
    };
    write_config("{parent}");
    DaemonProcess daemon(dir.path / "state", {"--verbose", "daemon", "--config", conf.string()},
                         dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    const auto times_followed = [&](const fs::path& log) {
      const std::string text = daemon.stderr_text();
      const std::string needle = "following " + log.string() + " ";
      int count = 0;
      for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
        ++count;
      return count;
    };
    REQUIRE(times_followed(log1) == 1);
    REQUIRE(times_followed(log2) == 1);
    write_config("renamed-{parent}");
    ::kill(daemon.pid(), SIGHUP);
    REQUIRE(wait_until(
        [&] { return daemon.stderr_text().find("config reloaded") != std::string::npos; }));
    CHECK(times_followed(log1) == 1);  // untouched: its incident, watch and descriptor stay
    CHECK(times_followed(log2) == 2);
    write_slowly(log1, "Killed\n");
    write_slowly(log2, "Killed\n");
    CHECK(wait_until([&] { return view.events("job1") == 1; }));
    CHECK(wait_until([&] { return view.events("renamed-job2") == 1; }));
    CHECK(daemon.stop(SIGTERM) == 0);
  }
}

namespace {

// 40 logs made busy by bars redrawing every 50 ms under a daemon that polls them every 5 s, with
// burst checks every `burst_check_ms` (0: none). The logs are opened after the daemon started,
// so it holds no copy of their descriptors (a test's close is then the writers' last).
struct BusyLogs {
  static constexpr int kLogs = 40;
  TempDir dir;
  std::optional<DaemonProcess> daemon;
  std::vector<std::ofstream> logs;

  explicit BusyLogs(int burst_check_ms) {
    const fs::path out = dir.path / "output";
    fs::create_directories(out);
    const fs::path config = dir.path / "oomtriage.yaml";
    std::ofstream(config) << "watch:\n  - logs: " << (out / "*" / "log.txt").string()
                          << "\nread_interval_ms: 5000\nburst_check_ms: " << burst_check_ms << "\n";
    daemon.emplace(dir.path / "state",
                   std::vector<std::string>{"daemon", "--config", config.string()},
                   dir.path / "err");
    REQUIRE(
        wait_until([&] { return daemon->stderr_text().find("store ready") != std::string::npos; }));
    for (int i = 0; i < kLogs; ++i) {
      const fs::path job = out / ("busy" + std::to_string(i));
      fs::create_directories(job);
      logs.emplace_back(job / "log.txt", std::ios::app);
      logs.back() << "Running 1 job\n" << std::flush;
    }
    for (int step = 1; step <= 40; ++step) {
      redraw(step);
      std::this_thread::sleep_for(50ms);
    }
  }

  void redraw(int step) {
    for (auto& log : logs) {
      if (!log.is_open()) continue;
      log << "\rbusy:  10%|#         | " << step << "/30000 [01:00<09:00,  1.40s/it, loss: 4.1e-01]"
          << std::flush;
    }
  }

  // Writes an OOM into busy7 (and closes it when `close`) and waits, the others redrawing, until
  // it is stored: how long that took, or nullopt after 10 s.
  std::optional<std::chrono::steady_clock::duration> oom_stored(bool close) {
    StoreView view{dir.path / "state" / "oomtriage.db"};
    REQUIRE(view.events("busy7") == 0);
    const auto written = std::chrono::steady_clock::now();
    logs[7] << "\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 "
               "has a total capacity of 23.55 GiB of which 812.00 MiB is free.\n"
            << std::flush;
    if (close) logs[7].close();
    const bool stored = wait_until(
        [&] {
          redraw(41);
          return view.events("busy7") == 1;
        },
        10s);
    if (!stored) return std::nullopt;
    return std::chrono::steady_clock::now() - written;
  }
};

}  // namespace

TEST_SUITE("daemon::busy_logs") {
  TEST_CASE("an OOM in a busy log is read at its burst check, not at its poll") {
    // Each busy log is polled once per read_interval_ms (5 s, in 20 slices of 2 logs); the OOM
    // line, a line end among redraws, is read at the next burst check (200 ms).
    BusyLogs busy(200);
    const auto took = busy.oom_stored(/*close=*/false);
    REQUIRE(took);
    // Well before its 5 s poll (the settle delay and the check's 200 ms come first).
    CHECK(*took < 2500ms);
  }

  TEST_CASE("a busy log whose trainer died is read when it is closed, with burst checks off") {
    // Polled every 5 s and never checked: the OOM is read because its writer closed the log
    // (IN_CLOSE_WRITE), as a trainer that dies does.
    BusyLogs busy(0);
    const auto took = busy.oom_stored(/*close=*/true);
    REQUIRE(took);
    // Well before its 5 s poll: the settle delay comes first.
    CHECK(*took < 2500ms);
  }
}
