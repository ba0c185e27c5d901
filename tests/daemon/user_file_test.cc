// tests/daemon/user_file_test.cc
//
// Files a user controls (docs/reliability.md): the one reader (daemon/common/user_file.h)
// refuses a FIFO, a device, a directory, a /proc file and a file past its limit with a one-line
// message, without blocking; the real binary on each hostile config (a million nested JSON
// arrays, YAML nested deep, a billion laughs, a TOML header of many segments, /dev/zero, a FIFO,
// a /proc file, a 100 MiB sparse file): `check` exits 1 with the message, at once; `scan` of a
// log beside such a config still finds its OOM; the daemon follows a folder holding them next to
// a normal job, says each refusal once and stores every OOM. AI Toolkit UI's stored config is
// read at most one character past the limit and refused by the patcher.
#include "daemon/common/user_file.h"

#include <doctest/doctest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>

#include "daemon/service/aitk_ui.h"
#include "db/aitk_database.h"
#include "tests/support/e2e.h"
#include "tests/support/hostile_configs.h"
#include "triage/config_patch.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

void make_fifo(const fs::path& path) { REQUIRE(::mkfifo(path.c_str(), 0644) == 0); }

// A 100 MiB file of one hole: nothing to read, only its size to be refused for.
void make_sparse(const fs::path& path) {
  write(path, "");
  fs::resize_file(path, 100u << 20);
}

struct Ran {
  int exit_code = -1;
  std::string out;
  std::string err;
  double seconds = 0;
};

// `oomtriage ARGS` in `dir`, killed after 60 s (a hang fails the test instead of holding it).
Ran run_oomtriage(const TempDir& dir, const std::string& args) {
  const fs::path out = dir.path / "stdout";
  const fs::path err = dir.path / "stderr";
  const std::string command = "cd " + quoted(dir.path.string()) + " && timeout -s KILL 60 " +
                              OOMTRIAGE_BINARY + " --state-dir " +
                              quoted((dir.path / "state").string()) + " " + args + " >" +
                              quoted(out.string()) + " 2>" + quoted(err.string());
  const auto start = std::chrono::steady_clock::now();
  const int status = std::system(command.c_str());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err), seconds};
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_SUITE("daemon::user_file") {
  TEST_CASE("the reader: a regular file within its limit, everything else refused in one line") {
    TempDir dir;
    write(dir.path / "job.yaml", "config: {}\n");
    auto read = daemon::read_user_file((dir.path / "job.yaml").string());
    REQUIRE(read);
    CHECK(*read == "config: {}\n");
    write(dir.path / "empty.yaml", "");
    CHECK(*daemon::read_user_file((dir.path / "empty.yaml").string()) == "");

    // Exactly the limit is read; one byte more is refused.
    write(dir.path / "ten", std::string(10, 'x'));
    CHECK(daemon::read_user_file((dir.path / "ten").string(), 10));
    auto over = daemon::read_user_file((dir.path / "ten").string(), 9);
    REQUIRE_FALSE(over);
    CHECK(over.error().code == ErrorCode::kBadInput);
    CHECK(over.error().message == (dir.path / "ten").string() + ": refused: larger than 9 bytes");

    const auto refused = [](const std::string& path) {
      auto r = daemon::read_user_file(path);
      REQUIRE_FALSE(r);
      CHECK(r.error().code == ErrorCode::kBadInput);
      return r.error().message;
    };
    const auto start = std::chrono::steady_clock::now();
    make_fifo(dir.path / "fifo.yaml");  // no writer: opening it for reading would block forever
    CHECK(refused((dir.path / "fifo.yaml").string()) ==
          (dir.path / "fifo.yaml").string() + ": refused: not a regular file");
    CHECK(refused("/dev/zero") == "/dev/zero: refused: not a regular file");
    fs::create_symlink("/dev/zero", dir.path / "zero.yaml");
    CHECK(refused((dir.path / "zero.yaml").string()) ==
          (dir.path / "zero.yaml").string() + ": refused: not a regular file");
    CHECK(refused(dir.path.string()) == dir.path.string() + ": refused: not a regular file");
    CHECK(refused("/proc/self/status") == "/proc/self/status: refused: a file of /proc or /sys");
    if (fs::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
      CHECK(refused("/sys/kernel/mm/transparent_hugepage/enabled") ==
            "/sys/kernel/mm/transparent_hugepage/enabled: refused: a file of /proc or /sys");
    }
    make_sparse(dir.path / "sparse.yaml");
    CHECK(refused((dir.path / "sparse.yaml").string()) ==
          (dir.path / "sparse.yaml").string() + ": refused: larger than 4 MiB");
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));

    auto missing = daemon::read_user_file((dir.path / "nope.yaml").string());
    REQUIRE_FALSE(missing);
    CHECK(missing.error().code == ErrorCode::kIo);
    CHECK(missing.error().message ==
          (dir.path / "nope.yaml").string() + ": cannot be read: No such file or directory");
  }

  TEST_CASE("check on each hostile file exits 1 with its one-line message, at once") {
    TempDir dir;
    write(dir.path / "deep.json", deep_json_config());
    write(dir.path / ".job_config.json", deep_json_config());
    write(dir.path / "flow.yaml", deep_yaml_flow_config());
    write(dir.path / "block.yaml", deep_yaml_block_config());
    write(dir.path / "laughs.yaml", billion_laughs_yaml());
    write(dir.path / "deep.toml", deep_toml_config());
    make_fifo(dir.path / "fifo.yaml");
    make_sparse(dir.path / "sparse.yaml");
    write(dir.path / "spec.json", "{\"model_family\": " + std::string(100000, '[') + "}");
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"deep.json", "deep.json:1: nested deeper than 64 levels"},
        {".job_config.json", ".job_config.json:1: nested deeper than 64 levels"},
        {"flow.yaml", "flow.yaml:5: nested deeper than 64 levels"},
        {"block.yaml", "block.yaml:67: nested deeper than 64 levels"},
        {"laughs.yaml", "laughs.yaml: refused: YAML aliases expand past 100000 nodes"},
        {"deep.toml --trainer sd-scripts", "deep.toml:2: nested deeper than 64 levels"},
        {"fifo.yaml", "fifo.yaml: refused: not a regular file"},
        {"sparse.yaml", "sparse.yaml: refused: larger than 4 MiB"},
        {"/dev/zero", "/dev/zero: refused: not a regular file"},
        {"/proc/self/status", "/proc/self/status: refused: a file of /proc or /sys"},
        {"--spec spec.json", "spec.json:1: nested deeper than 64 levels"},
        {"--spec /dev/zero", "/dev/zero: refused: not a regular file"},
        {"-- python train_network.py --config_file /dev/zero",
         "/dev/zero: refused: not a regular file"},
        {"-- python train_network.py --config_file fifo.yaml",
         "fifo.yaml: refused: not a regular file"},
    };
    for (const auto& [args, message] : cases) {
      const std::string label = "check " + args;
      INFO(label);
      const Ran r = run_oomtriage(dir, "check --gpu 24GiB " + args);
      CHECK(r.exit_code == 1);
      CHECK(r.err == "oomtriage: " + message + "\n");
      CHECK(r.out.empty());
      CHECK(r.seconds < 10);
    }
  }

  TEST_CASE("scan of a log beside a hostile config still finds the OOM, and says why once") {
    TempDir dir;
    // (log, config file beside it, its text, what is said): a config.toml is read beside a log
    // of a trainer that writes one (kohya's).
    const std::string aitk = "aitk_gc_off_oom_step2.log";
    const std::vector<std::array<std::string, 4>> jobs = {
        {aitk, ".job_config.json", deep_json_config(),
         ".job_config.json:1: nested deeper than 64 levels"},
        {aitk, "config.yaml", billion_laughs_yaml(),
         "config.yaml: refused: YAML aliases expand past 100000 nodes"},
        {aitk, "config.yaml", deep_yaml_flow_config(),
         "config.yaml:5: nested deeper than 64 levels"},
        {"kohya_sample_oom_step500.log", "config.toml", deep_toml_config(),
         "config.toml:2: nested deeper than 64 levels"},
    };
    int i = 0;
    for (const auto& [log, name, text, message] : jobs) {
      const fs::path job = dir.path / ("job" + std::to_string(i++));
      const std::string label = job.filename().string() + "/" + name;
      INFO(label);
      fs::create_directories(job);
      fs::copy_file(kGolden / log, job / "log.txt");
      write(job / name, text);
      const Ran r = run_oomtriage(dir, "scan " + quoted((job / "log.txt").string()));
      CHECK(r.exit_code == 0);
      CHECK(r.out.find("crashed_oom") != std::string::npos);
      CHECK(count(r.err, message) == 1);
      CHECK(r.seconds < 20);
    }
    // A config named on the command line that is refused: exit 1, as for one that does not parse.
    const std::string log = quoted((dir.path / "job0" / "log.txt").string());
    make_fifo(dir.path / "named.fifo");
    for (const std::string command : {"scan --config /dev/zero ", "fix --config named.fifo "}) {
      INFO(command);
      const Ran named = run_oomtriage(dir, command + log);
      CHECK(named.exit_code == 1);
      CHECK(named.err.find(": refused: not a regular file") != std::string::npos);
      CHECK(named.seconds < 20);
    }
    // A FIFO or a /proc link where a config would be is passed over without being opened.
    const fs::path job = dir.path / "fifo_job";
    fs::create_directories(job);
    fs::copy_file(kGolden / "aitk_gc_off_oom_step2.log", job / "log.txt");
    make_fifo(job / ".job_config.json");
    fs::create_symlink("/proc/self/status", job / "config.yaml");
    const Ran r = run_oomtriage(dir, "scan " + quoted((job / "log.txt").string()));
    CHECK(r.exit_code == 0);
    CHECK(r.out.find("crashed_oom") != std::string::npos);
    CHECK(r.seconds < 20);
  }

  TEST_CASE("AI Toolkit UI's stored config: read at most one character past the limit, refused") {
    TempDir dir;
    const fs::path path = dir.path / "aitk_db.db";
    sqlite3* raw = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
    sqlite3_stmt* insert = nullptr;
    REQUIRE(sqlite3_exec(raw,
                         "CREATE TABLE Job (id TEXT, name TEXT UNIQUE, gpu_ids TEXT, job_config "
                         "TEXT, status TEXT, info TEXT)",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    REQUIRE(sqlite3_prepare_v2(raw, "INSERT INTO Job VALUES (?, ?, '0', ?, 'error', '')", -1,
                               &insert, nullptr) == SQLITE_OK);
    const std::string big = "{\"config\": \"" + std::string(5u << 20, 'x') + "\"}";
    const std::string deep = deep_json_config();
    for (const auto& [name, config] :
         {std::pair<std::string, const std::string*>{"big", &big}, {"deep", &deep}}) {
      sqlite3_bind_text(insert, 1, name.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(insert, 2, name.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(insert, 3, config->data(), static_cast<int>(config->size()),
                        SQLITE_TRANSIENT);
      REQUIRE(sqlite3_step(insert) == SQLITE_DONE);
      sqlite3_reset(insert);
    }
    sqlite3_finalize(insert);
    sqlite3_close(raw);

    auto database = db::AitkDatabase::open(path.string());
    REQUIRE(database);
    auto row = (*database)->job_named("big");
    REQUIRE(row);
    REQUIRE(row->has_value());
    CHECK((*row)->job_config.size() == parsers::kMaxDocumentBytes + 1);
    CHECK(triage::patch_json((*row)->job_config, {}).error().message ==
          "the config: refused: larger than 4 MiB");
    row = (*database)->job_named("deep");
    REQUIRE(row);
    REQUIRE(row->has_value());
    CHECK((*row)->job_config == deep);
    CHECK(triage::patch_json((*row)->job_config, {}).error().message ==
          "the config:1: nested deeper than 64 levels");
    // The UI's own answer, nested deep, is an answer of another shape: an error, not a crash.
    CHECK_FALSE(daemon::job_from_ui_list(
        "{\"jobs\": " + std::string(1000000, '[') + std::string(1000000, ']') + "}", "x"));
  }

  TEST_CASE("the daemon config and its secret files are read within the limits") {
    TempDir dir;
    Ran r = run_oomtriage(dir, "daemon --config /dev/zero");
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("/dev/zero: refused: not a regular file") != std::string::npos);
    write(dir.path / "laughs.yaml", billion_laughs_yaml() + "watch:\n  - logs: /x/*/log.txt\n");
    r = run_oomtriage(dir, "daemon --config laughs.yaml");
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("laughs.yaml: refused: YAML aliases expand past 100000 nodes") !=
          std::string::npos);
    CHECK(r.seconds < 10);
    make_fifo(dir.path / "url.fifo");
    write(dir.path / "secret.yaml", "watch:\n  - logs: " + dir.path.string() +
                                        "/*/log.txt\nalerts:\n  - name: hook\n    type: webhook\n"
                                        "    url_file: " +
                                        (dir.path / "url.fifo").string() + "\n");
    r = run_oomtriage(dir, "daemon --config secret.yaml");
    CHECK(r.exit_code == 1);
    CHECK(r.err.find("url_file " + (dir.path / "url.fifo").string() +
                     ": refused: not a regular file") != std::string::npos);
    CHECK(r.seconds < 10);
  }

  TEST_CASE("the daemon follows hostile configs beside a normal job: one line each, every OOM") {
    TempDir dir;
    const fs::path out = dir.path / "output";
    for (const char* job : {"deep", "laughs", "fifo", "normal"}) fs::create_directories(out / job);
    write(out / "deep" / ".job_config.json", deep_json_config());
    write(out / "laughs" / "config.yaml", billion_laughs_yaml());
    make_fifo(out / "fifo" / ".job_config.json");
    DaemonProcess daemon(dir.path / "state", {"watch", out.string()}, dir.path / "err");
    StoreView view{dir.path / "state" / "oomtriage.db"};
    for (const char* job : {"deep", "laughs", "fifo", "normal"}) {
      write_slowly(out / job / "log.txt", slurp(kGolden / "aitk_gc_off_oom_step2.log"), 8192);
    }
    for (const char* job : {"deep", "laughs", "fifo", "normal"}) {
      INFO(job);
      CHECK(wait_until([&] { return view.events(job) == 1; }, 20s));
    }
    CHECK(daemon.alive());
    const std::string err = daemon.stderr_text();
    CHECK(count(err, (out / "deep" / ".job_config.json").string() +
                         ":1: nested deeper than 64 levels") == 1);
    CHECK(count(err, (out / "laughs" / "config.yaml").string() +
                         ": refused: YAML aliases expand past 100000 nodes") == 1);
    // Its peak memory stayed far under the unit's MemoryHigh=256M (systemd/oomtriage.service).
    // Not under AddressSanitizer (scripts/test_sanitized.sh): its shadow memory is most of it.
#if defined(__SANITIZE_ADDRESS__)
    constexpr long kPeakKiB = 4L << 20;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    constexpr long kPeakKiB = 4L << 20;
#else
    constexpr long kPeakKiB = 128L << 10;
#endif
#else
    constexpr long kPeakKiB = 128L << 10;
#endif
    const std::string status = slurp(fs::path("/proc") / std::to_string(daemon.pid()) / "status");
    const size_t hwm = status.find("VmHWM:");
    REQUIRE(hwm != std::string::npos);
    const long peak_kib = std::stol(status.substr(hwm + 6));
    INFO("peak RSS " << peak_kib << " KiB");
    CHECK(peak_kib < kPeakKiB);
    CHECK(daemon.stop(SIGTERM) == 0);
  }
}
