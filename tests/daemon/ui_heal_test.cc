// tests/daemon/ui_heal_test.cc
//
// The daemon's `heal:` section end to end on an AI Toolkit UI setup without a GPU: a database
// with the UI's schema (ui/prisma/schema.prisma as Prisma writes it to SQLite), a fake worker
// that starts queued jobs the way the UI's does (tests/fake_trainers/aitk_worker.py), and the
// fake AI Toolkit trainer, which writes its status there as the real one does. Skipped where
// Debian's python3-tqdm or python3-yaml is absent.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include <algorithm>
#include <memory>

#include "daemon/common/daemon_config.h"
#include "daemon/service/aitk_ui.h"
#include "tests/support/e2e.h"
#include "tests/support/http_test_server.h"
#include "tests/support/skip.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

const fs::path kFakeTrainers = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "fake_trainers";

// AI Toolkit's schema, in the SQL Prisma's SQLite connector generates for it.
constexpr const char* kAitkSchema = R"sql(
CREATE TABLE "Job" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "name" TEXT NOT NULL,
    "gpu_ids" TEXT NOT NULL,
    "job_config" TEXT NOT NULL,
    "created_at" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" DATETIME NOT NULL,
    "status" TEXT NOT NULL DEFAULT 'stopped',
    "stop" BOOLEAN NOT NULL DEFAULT false,
    "return_to_queue" BOOLEAN NOT NULL DEFAULT false,
    "step" INTEGER NOT NULL DEFAULT 0,
    "total_steps" INTEGER,
    "info" TEXT NOT NULL DEFAULT '',
    "speed_string" TEXT NOT NULL DEFAULT '',
    "queue_position" INTEGER NOT NULL DEFAULT 0,
    "pid" INTEGER,
    "job_type" TEXT NOT NULL DEFAULT 'train',
    "job_ref" TEXT,
    "save_now" BOOLEAN NOT NULL DEFAULT false,
    "sample_now" BOOLEAN NOT NULL DEFAULT false
);
CREATE TABLE "Queue" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "gpu_ids" TEXT NOT NULL,
    "is_running" BOOLEAN NOT NULL DEFAULT false
);
CREATE TABLE "Settings" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "key" TEXT NOT NULL,
    "value" TEXT NOT NULL
);
CREATE UNIQUE INDEX "Job_name_key" ON "Job"("name");
CREATE UNIQUE INDEX "Queue_gpu_ids_key" ON "Queue"("gpu_ids");
CREATE UNIQUE INDEX "Settings_key_key" ON "Settings"("key");
)sql";

// The job the run tests use, as the UI stores it: cheaper previews and then no 1024 px bucket
// make it fit in 15 GiB; saves every 100 steps.
nlohmann::json ui_job_config(const fs::path& training_folder) {
  return {
      {"job", "extension"},
      {"config",
       {{"name", "ui_lora"},
        {"process",
         {{{"type", "ui_trainer"},
           {"training_folder", training_folder.string()},
           {"device", "cuda"},
           {"network", {{"type", "lora"}, {"linear", 16}, {"linear_alpha", 16}}},
           {"save", {{"save_every", 100}}},
           {"datasets", {{{"folder_path", "/data/images"}, {"resolution", {512, 768, 1024}}}}},
           {"train",
            {{"batch_size", 1},
             {"steps", 400},
             {"gradient_checkpointing", true},
             {"cache_text_embeddings", true},
             {"dtype", "bf16"}}},
           {"model", {{"name_or_path", "ostris/Flex.1-alpha"}, {"quantize", true}}},
           {"sample",
            {{"sample_every", 150}, {"width", 1024}, {"height", 1024}, {"sample_steps", 20}}}}}}}},
      {"meta", {{"name", "ui_lora"}, {"version", "1.0"}}}};
}

struct AitkDb {
  sqlite3* db = nullptr;
  explicit AitkDb(const fs::path& path) {
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
  }
  ~AitkDb() { sqlite3_close(db); }
  void exec(const std::string& sql) {
    char* error = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
    INFO(sql << ": " << (error ? error : ""));
    sqlite3_free(error);
    REQUIRE(rc == SQLITE_OK);
  }
  std::string text(const std::string& sql) {
    sqlite3_stmt* stmt = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK);
    std::string value;
    if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0)) {
      value = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
    return value;
  }
};

// A running program killed when the test ends (the fake worker).
struct Background {
  pid_t pid = -1;
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  Background(const std::vector<std::string>& args, const std::vector<std::string>& env_add) {
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
    env_strings.insert(env_strings.end(), env_add.begin(), env_add.end());
    std::vector<char*> argv, envp;
    std::vector<std::string> a = args;
    for (auto& s : a) argv.push_back(s.data());
    argv.push_back(nullptr);
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    REQUIRE(posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), envp.data()) == 0);
  }
  ~Background() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

void require_python() {
  if (std::system("/usr/bin/python3 -c 'import tqdm, yaml' >/dev/null 2>&1") != 0) {
    OOMTRIAGE_SKIP("/usr/bin/python3 with tqdm and yaml is absent");
  }
}

struct UiRig {
  TempDir dir;
  fs::path output = dir.path / "output";
  fs::path db_path = dir.path / "aitk_db.db";
  fs::path config = dir.path / "oomtriage.yaml";
  HttpTestServer hook{[](const ReceivedRequest&, size_t) { return ScriptedResponse{}; }};

  UiRig() {
    fs::create_directories(output);
    AitkDb db(db_path);
    db.exec(kAitkSchema);
    // Queued in the UI with its queue running, as after a press of "Start".
    db.exec(
        "INSERT INTO Job (id, name, gpu_ids, job_config, updated_at, status, queue_position) "
        "VALUES ('6f1c2a9e-0d7b-4b43-9a55-2f0c8d1e7a10', 'ui_lora', '0', '" +
        ui_job_config(output).dump() + "', 1764590000000, 'queued', 1000)");
    db.exec("INSERT INTO Queue (gpu_ids, is_running) VALUES ('0', 1)");
  }

  // The daemon's config, its `heal:` section's lines given (the database's by default).
  void write_config(std::string heal_lines = "") {
    if (heal_lines.empty()) heal_lines = "  ai_toolkit_db: " + db_path.string() + "\n";
    std::ofstream(config) << "watch:\n  - logs: " << (output / "*" / "log.txt").string()
                          << "\n    trainer: ai-toolkit\nread_interval_ms: 100\nrescan_seconds: 1\n"
                          << "alerts:\n  - name: hook\n    type: webhook\n    url: " << hook.url()
                          << "\nheal:\n"
                          << heal_lines << "  max_attempts: 3\n";
  }

  std::vector<std::string> alert_names() const {
    std::vector<std::string> names;
    for (const ReceivedRequest& request : hook.requests()) {
      const auto body = nlohmann::json::parse(request.body);  // outlives the loop over it
      for (const auto& alert : body.at("alerts")) {
        names.push_back(alert.at("labels").at("alertname").get<std::string>());
      }
    }
    return names;
  }
  size_t alerts_named(const std::string& name) const {
    const std::vector<std::string> names = alert_names();
    return static_cast<size_t>(std::count(names.begin(), names.end(), name));
  }
};

// The worker started by the caller runs the job, which needs cheaper previews and then no
// 1024 px bucket: the daemon heals it twice and it completes. What a person checks afterwards: the
// UI's config, the logs, the store's history, the alerts and the report.
void expect_healed_twice(UiRig& rig, DaemonProcess& daemon) {
  AitkDb db(rig.db_path);
  const bool done = wait_until(
      [&] { return db.text("SELECT status FROM Job WHERE name = 'ui_lora'") == "completed"; }, 90s);
  INFO(daemon.stderr_text());
  REQUIRE(done);
  // The fixes are in the UI's own copy of the config, the one its worker starts from.
  const auto config = nlohmann::json::parse(db.text("SELECT job_config FROM Job"));
  const auto& process = config.at("config").at("process").at(0);
  CHECK(process.at("sample").at("width") == 768);
  CHECK(process.at("datasets").at(0).at("resolution") == nlohmann::json::array({512, 768}));
  CHECK(db.text("SELECT info FROM Job") == "Training completed");
  // Three runs, each restart resumed from the save at step 100.
  const fs::path folder = rig.output / "ui_lora";
  CHECK(slurp(folder / "log.txt").find("Found step 100 in metadata") != std::string::npos);
  CHECK(slurp(folder / "logs" / "1_log.txt").find("Found step 100 in metadata") !=
        std::string::npos);
  CHECK(fs::exists(folder / "ui_lora_000000400.safetensors"));
  // The history in the store, and the verdict alert after both OOM alerts.
  std::string bodies;
  for (const auto& r : rig.hook.requests()) bodies += r.body.substr(0, 400) + "\n";
  INFO(bodies);
  REQUIRE(wait_until([&] { return rig.alert_names().size() >= 3; }, 10s));
  CHECK(rig.alerts_named("TrainingOOM") == 2);
  CHECK(rig.alerts_named("TrainingOOMHealed") == 1);
  StoreView store{rig.dir.path / "state" / "oomtriage.db"};
  const auto story = store.story("ui_lora");
  REQUIRE(story.has_value());
  REQUIRE(story->attempts.size() == 3);
  CHECK(story->attempts[0].outcome == "crashed_oom");
  CHECK(story->attempts[1].fix_id == "cheapen_previews");
  CHECK(story->attempts[1].resumed_step == 100);
  CHECK(story->attempts[2].fix_id == "drop_top_bucket");
  CHECK(story->attempts[2].outcome == "completed");
  CHECK(story->attempts[2].verdict == "healed");
  const std::string report = (rig.dir.path / "report.txt").string();
  REQUIRE(std::system(("'" OOMTRIAGE_BINARY "' --state-dir '" + (rig.dir.path / "state").string() +
                       "' --color never report ui_lora >'" + report + "'")
                          .c_str()) == 0);
  const std::string text = slurp(report);
  CHECK(text.find("attempt 2/3: Make preview samples cheaper: sample.width 1024 -> 768") !=
        std::string::npos);
  CHECK(text.find("resumed at step 100, completed (healed)") != std::string::npos);
}

std::unique_ptr<Background> start_worker(const UiRig& rig, const std::string& step_seconds,
                                         bool resume_broken = false,
                                         std::vector<std::string> env_more = {}) {
  std::vector<std::string> env = {"FAKE_VRAM_GIB=15", "FAKE_STEP_SECONDS=" + step_seconds};
  if (resume_broken) env.emplace_back("FAKE_RESUME_BROKEN=1");
  env.insert(env.end(), env_more.begin(), env_more.end());
  return std::make_unique<Background>(
      std::vector<std::string>{"/usr/bin/python3", (kFakeTrainers / "aitk_worker.py").string(),
                               rig.db_path.string(), (kFakeTrainers / "ai_toolkit.py").string(),
                               "120"},
      env);
}

// The fake UI's HTTP routes on a free port, with AI_TOOLKIT_AUTH set to `token`.
struct FakeUi {
  fs::path port_file, request_log;
  std::unique_ptr<Background> process;
  std::string url;
  FakeUi(const UiRig& rig, const std::string& token)
      : port_file(rig.dir.path / "ui.port"), request_log(rig.dir.path / "ui_requests.txt") {
    process = std::make_unique<Background>(
        std::vector<std::string>{"/usr/bin/python3", (kFakeTrainers / "aitk_ui.py").string(),
                                 rig.db_path.string(), port_file.string(), request_log.string()},
        std::vector<std::string>{"AI_TOOLKIT_AUTH=" + token});
    REQUIRE(wait_until([&] { return fs::exists(port_file); }, 10s));
    url = "http://127.0.0.1:" + slurp(port_file);
  }
  std::string requests() const { return fs::exists(request_log) ? slurp(request_log) : ""; }
};

}  // namespace

TEST_SUITE("daemon::heal") {
  TEST_CASE(
      "a UI job that needs two fixes is patched in the UI's database, re-queued, resumed "
      "and completes") {
    require_python();
    UiRig rig;
    rig.write_config();
    DaemonProcess daemon(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                         rig.dir.path / "daemon.err");
    const auto worker = start_worker(rig, "0.01");
    expect_healed_twice(rig, daemon);
  }

  TEST_CASE("a UI job is healed through the UI's own HTTP routes, with its token") {
    require_python();
    UiRig rig;
    FakeUi ui(rig, "s3cret-token");
    const fs::path token_file = rig.dir.path / "aitk.token";
    std::ofstream(token_file) << "s3cret-token\n";
    // No database: everything goes through the routes.
    rig.write_config("  ui_url: " + ui.url + "/\n  token_file: " + token_file.string() + "\n");
    DaemonProcess daemon(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                         rig.dir.path / "daemon.err");
    const auto worker = start_worker(rig, "0.01");
    expect_healed_twice(rig, daemon);
    const std::string requests = ui.requests();
    INFO(requests);
    const std::string id = "6f1c2a9e-0d7b-4b43-9a55-2f0c8d1e7a10";
    // Twice each: the UI's edit, its "Start" and its queue's "Start", as a person would click.
    auto count = [&](const std::string& line) {
      size_t n = 0;
      for (size_t at = requests.find(line); at != std::string::npos;
           at = requests.find(line, at + 1)) {
        ++n;
      }
      return n;
    };
    CHECK(count("POST /api/jobs 200\n") == 2);
    CHECK(count("GET /api/jobs/" + id + "/start 200\n") == 2);
    CHECK(count("GET /api/queue/0/start 200\n") == 2);
    CHECK(count(" 401\n") == 0);
    CHECK(daemon.stderr_text().find("queued through the UI at " + ui.url) != std::string::npos);
  }

  TEST_CASE("a wrong UI token is refused by the UI, logged, and nothing is re-queued") {
    require_python();
    UiRig rig;
    FakeUi ui(rig, "s3cret-token");
    const fs::path token_file = rig.dir.path / "aitk.token";
    std::ofstream(token_file) << "not-the-token\n";
    rig.write_config("  ui_url: " + ui.url + "\n  token_file: " + token_file.string() +
                     "\n  wait_seconds: 3\n");
    DaemonProcess daemon(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                         rig.dir.path / "daemon.err");
    const auto worker = start_worker(rig, "0.01");
    AitkDb db(rig.db_path);
    REQUIRE(wait_until([&] { return rig.alert_names().size() >= 2; }, 60s));
    INFO(daemon.stderr_text());
    CHECK(rig.alerts_named("TrainingOOMHealStopped") == 1);
    CHECK(db.text("SELECT status FROM Job") == "error");
    CHECK(daemon.stderr_text().find("HTTP 401 (wrong or missing token_file)") != std::string::npos);
    CHECK(ui.requests().find("POST") == std::string::npos);
  }

  TEST_CASE("the UI down: the daemon writes the UI's database instead") {
    require_python();
    UiRig rig;
    const ReservedPort down;  // bound, never listening: every call is refused
    const std::string dead = "http://127.0.0.1:" + std::to_string(down.port());
    rig.write_config("  ui_url: " + dead + "\n  ai_toolkit_db: " + rig.db_path.string() + "\n");
    DaemonProcess daemon(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                         rig.dir.path / "daemon.err");
    const auto worker = start_worker(rig, "0.01");
    expect_healed_twice(rig, daemon);
    CHECK(daemon.stderr_text().find("queued through " + rig.db_path.string()) != std::string::npos);
  }

  TEST_CASE("the UI's job list is read by name, and an answer of another shape is an error") {
    const std::string list =
        R"({"jobs": [{"id": "a", "name": "other", "status": "running"},
                     {"id": "b", "name": "ui_lora", "gpu_ids": "0,1", "job_config": "{}",
                      "status": "error", "info": "Job process terminated with exit code 1.",
                      "stop": false, "step": 120}]})";
    const auto found = daemon::job_from_ui_list(list, "ui_lora");
    REQUIRE(found);
    REQUIRE(found->has_value());
    CHECK((*found)->id == "b");
    CHECK((*found)->gpu_ids == "0,1");
    CHECK((*found)->status == "error");
    const auto missing = daemon::job_from_ui_list(list, "nobody");
    REQUIRE(missing);
    CHECK_FALSE(missing->has_value());
    for (const char* wrong : {"", "null", "[]", R"({"error": "Failed to fetch training data"})",
                              R"({"jobs": {"name": "ui_lora"}})", "{\"jobs\": [\xff"}) {
      CHECK_FALSE(daemon::job_from_ui_list(wrong, "ui_lora"));
    }
    // A field of an unexpected type is read as absent, not thrown.
    const auto odd =
        daemon::job_from_ui_list(R"({"jobs": [{"name": "ui_lora", "status": 3}]})", "ui_lora");
    REQUIRE(odd);
    CHECK((*odd)->status.empty());
  }

  TEST_CASE("heal: config mistakes are one line naming the file and line") {
    auto parse = [](const std::string& heal) {
      auto config = daemon::parse_daemon_config(
          "watch:\n  - logs: /tmp/x/*/log.txt\nheal:\n" + heal, "oomtriage.yaml");
      return config ? std::string("ok") : config.error().message;
    };
    CHECK(parse("  max_attempts: 3\n") ==
          "oomtriage.yaml:4: heal needs `ui_url:` (AI Toolkit's UI) or `ai_toolkit_db:` (its "
          "aitk_db.db)");
    CHECK(parse("  ui_url: localhost:8675\n") ==
          "oomtriage.yaml:4: ui_url must be an http:// or https:// URL");
    CHECK(parse("  ui_url: http://127.0.0.1:8675\n  token_file: /nonexistent/token\n") ==
          "oomtriage.yaml:5: cannot read the UI's token file /nonexistent/token");
    CHECK(parse("  ai_toolkit_db: /srv/aitk/aitk_db.db\n  fixes: [lower_rank]\n")
              .find("oomtriage.yaml:5: fix `lower_rank` is not one that keeps") == 0);
    CHECK(parse("  ai_toolkit_db: aitk_db.db\n") ==
          "oomtriage.yaml:4: ai_toolkit_db must be an absolute path");
    CHECK(parse("  ai_toolkit_db: /srv/aitk/aitk_db.db\n  retries: 2\n") ==
          "oomtriage.yaml:5: unknown heal key `retries`");
    CHECK(parse("  ui_url: http://127.0.0.1:8675/\n") == "ok");
  }

  TEST_CASE("a UI restart that dies while loading, before its training bar, is the next attempt") {
    require_python();
    UiRig rig;
    rig.write_config();
    DaemonProcess daemon(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                         rig.dir.path / "daemon.err");
    const auto worker = start_worker(rig, "0.01", false,
                                     {"FAKE_LOAD_OOM_ONCE=" + (rig.dir.path / "loaded").string()});
    // Attempt 1 dies sampling; attempt 2 (cheaper previews) while loading the model, before any
    // training step; attempt 3 (4-bit weights, the loading lever) completes.
    INFO(daemon.stderr_text());
    REQUIRE(wait_until([&] { return rig.alerts_named("TrainingOOMHealed") == 1; }, 90s));
    StoreView store{rig.dir.path / "state" / "oomtriage.db"};
    const auto story = store.story("ui_lora");
    REQUIRE(story.has_value());
    REQUIRE(story->attempts.size() == 3);
    CHECK(story->attempts[1].fix_id == "cheapen_previews");
    CHECK(story->attempts[1].outcome == "crashed_oom");
    CHECK_FALSE(story->attempts[1].resumed_step.has_value());  // it never drew its bar
    CHECK(story->attempts[2].fix_id == "quantize_model");
    CHECK(story->attempts[2].resumed_step == 100);
    CHECK(story->attempts[2].verdict == "healed");
    CHECK(slurp(rig.output / "ui_lora" / "logs" / "1_log.txt").find("Loading transformer") !=
          std::string::npos);
  }

  TEST_CASE("a daemon restarted in the middle of an episode goes on with its budget") {
    require_python();
    UiRig rig;
    rig.write_config();
    const auto worker = start_worker(rig, "0.02");
    {
      DaemonProcess first(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                          rig.dir.path / "daemon1.err");
      INFO(first.stderr_text());
      REQUIRE(wait_until(
          [&] { return first.stderr_text().find("attempt 2/3 queued") != std::string::npos; },
          60s));
    }  // killed: the second attempt runs and crashes while no daemon watches
    DaemonProcess second(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                         rig.dir.path / "daemon2.err");
    INFO(second.stderr_text());
    REQUIRE(wait_until([&] { return rig.alerts_named("TrainingOOMHealed") == 1; }, 90s));
    CHECK(second.stderr_text().find("goes on with attempt 2/3 from the store") !=
          std::string::npos);
    StoreView store{rig.dir.path / "state" / "oomtriage.db"};
    const auto story = store.story("ui_lora");
    REQUIRE(story.has_value());
    REQUIRE_FALSE(story->attempts.empty());
    CHECK(story->attempts.back().attempt == 3);
    CHECK(story->attempts.back().fix_id == "drop_top_bucket");
    CHECK(story->attempts.back().verdict == "healed");
  }

  TEST_CASE("a UI restart that starts over at step 0 is stopped before it overwrites its saves") {
    require_python();
    UiRig rig;
    std::unique_ptr<FakeUi> ui;
    SUBCASE("stopped through the database") { rig.write_config(); }
    SUBCASE("stopped through the UI's route") {
      ui = std::make_unique<FakeUi>(rig, "");
      rig.write_config("  ui_url: " + ui->url + "\n");
    }
    DaemonProcess daemon(rig.dir.path / "state", {"daemon", "--config", rig.config.string()},
                         rig.dir.path / "daemon.err");
    // Steps slow enough that the stop lands before the restart trains past its old save.
    const auto worker = start_worker(rig, "0.02", /*resume_broken=*/true);
    AitkDb db(rig.db_path);
    const bool stopped = wait_until(
        [&] { return db.text("SELECT status FROM Job WHERE name = 'ui_lora'") == "stopped"; }, 60s);
    INFO(daemon.stderr_text());
    REQUIRE(stopped);
    CHECK(db.text("SELECT stop FROM Job") == "1");
    StoreView store{rig.dir.path / "state" / "oomtriage.db"};
    const auto story = store.story("ui_lora");
    REQUIRE(story.has_value());
    REQUIRE(story->attempts.size() == 2);
    CHECK(story->attempts[1].resumed_step == 0);
    CHECK(story->attempts[1].verdict == "stopped: did not resume");
    REQUIRE(wait_until([&] { return rig.alert_names().size() >= 2; }, 10s));
    CHECK(rig.alerts_named("TrainingOOMHealStopped") == 1);
    // The restart was stopped before it saved anything: not over step 100, not past it.
    CHECK(slurp(rig.output / "ui_lora" / "log.txt").find("Saved checkpoint") == std::string::npos);
    CHECK_FALSE(fs::exists(rig.output / "ui_lora" / "ui_lora_000000200.safetensors"));
    if (ui) CHECK(ui->requests().find("/stop 200\n") != std::string::npos);
  }
}
