// tests/daemon/check_config_test.cc
//
// `oomtriage check-config FILE` (like `nginx -t`) and the daemon share one set of checks: a
// mistake is refused with its file, line and a did-you-mean (an unknown placeholder or key, two
// receivers of one name, a relative glob); what is legal but probably wrong (a glob under a
// folder that is not there, or is a file) is a warning, printed by check-config and logged by the
// daemon at start.
#include <doctest/doctest.h>

#include "tests/support/e2e.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

struct Checked {
  int exit_code = -1;
  std::string out;
  std::string err;
};

Checked check_config(const TempDir& dir, const std::string& text) {
  const fs::path config = dir.path / "oomtriage.yaml";
  std::ofstream(config, std::ios::trunc) << text;
  const fs::path out = dir.path / "out";
  const fs::path err = dir.path / "err";
  const int status = std::system((std::string(OOMTRIAGE_BINARY) + " check-config " +
                                  config.string() + " >" + out.string() + " 2>" + err.string())
                                     .c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

}  // namespace

TEST_SUITE("daemon::check_config") {
  TEST_CASE("mistakes are refused with their line and a did-you-mean") {
    TempDir dir;
    const std::string train = (dir.path / "train").string();
    fs::create_directories(train);
    const std::string watch = "watch:\n  - logs: " + train + "/*/log.txt\n";
    const std::string file = (dir.path / "oomtriage.yaml").string();

    Checked c = check_config(dir, watch + "    job: \"{parnt}-x\"\n");
    CHECK(c.exit_code == 1);
    CHECK(c.err.find(file + ":3: unknown placeholder {parnt} in `job:`; did you mean {parent}?") !=
          std::string::npos);

    c = check_config(dir, watch +
                              "alerts:\n  - type: webhook\n    name: ops\n    url: "
                              "http://127.0.0.1:9/a\n  - type: webhook\n    name: ops\n    "
                              "url: http://127.0.0.1:9/b\n");
    CHECK(c.exit_code == 1);
    CHECK(c.err.find(file + ":8: two receivers are named `ops`") != std::string::npos);

    c = check_config(dir, "watch:\n  - logs: output/*/log.txt\n");
    CHECK(c.exit_code == 1);
    CHECK(c.err.find(file + ":2: `logs:` must be an absolute path") != std::string::npos);

    c = check_config(dir, watch + "wach: 1\n");
    CHECK(c.exit_code == 1);
    CHECK(c.err.find("unknown key `wach`; did you mean `watch`?") != std::string::npos);

    c = check_config(dir, watch + "store: postgresql://u:secret@db/oom\n");
    CHECK(c.exit_code == 1);
    CHECK(c.err.find("secret") == std::string::npos);

    // Retention of the fleet store.
    c = check_config(dir, watch + "fleet:\n  keep_days: -3\n");
    CHECK(c.exit_code == 1);
    CHECK(c.err.find(file + ":4: keep_days must be 0 (keep everything) or more, up to 36500") !=
          std::string::npos);
    c = check_config(dir, watch + "fleet:\n  keep_dayz: 30\n");
    CHECK(c.exit_code == 1);
    CHECK(c.err.find(file + ":4: unknown fleet key `keep_dayz`") != std::string::npos);
    CHECK(check_config(dir, watch + "fleet:\n  keep_days: 90\n").exit_code == 0);
  }

  TEST_CASE("a glob that can find nothing is a warning - a good config says ok") {
    TempDir dir;
    const std::string train = (dir.path / "train").string();
    fs::create_directories(train);
    std::ofstream(dir.path / "a-file") << "x";
    Checked c = check_config(dir, "watch:\n  - logs: " + train +
                                      "/*/log.txt\n  - logs: " + (dir.path / "gone").string() +
                                      "/*/log.txt\n  - logs: " + (dir.path / "a-file").string() +
                                      "/*.log\n");
    CHECK(c.exit_code == 0);
    CHECK(c.err.find(":3: " + (dir.path / "gone").string() + " does not exist") !=
          std::string::npos);
    CHECK(c.err.find(":4: " + (dir.path / "a-file").string() + " is not a folder") !=
          std::string::npos);
    CHECK(c.out.find("ok (3 watch rule(s), 0 receiver(s), pre-flight warns against the card NVML "
                     "reports, 2 warning(s))") != std::string::npos);

    c = check_config(dir, "watch:\n  - logs: " + train +
                              "/*/log.txt\nalerts:\n  - type: webhook\n    url: "
                              "http://127.0.0.1:9/a\n");
    CHECK(c.exit_code == 0);
    CHECK(c.err.empty());
    CHECK(c.out.find("ok (1 watch rule(s), 1 receiver(s), pre-flight warns against the card "
                     "NVML reports)") != std::string::npos);

    // Pre-flight: warn (the default) or off, against `gpu_memory:` or the card NVML reports.
    const std::string one_rule = "watch:\n  - logs: " + train + "/*/log.txt\n";
    c = check_config(dir, one_rule + "preflight: off\n");
    CHECK(c.exit_code == 0);
    CHECK(c.out.find("pre-flight off") != std::string::npos);
    c = check_config(dir, one_rule + "preflight: warn\ngpu_memory: 24GiB\n");
    CHECK(c.exit_code == 0);
    CHECK(c.out.find("pre-flight warns against a 24.00 GiB card") != std::string::npos);
    c = check_config(dir, one_rule + "gpu_memory: 12\n");
    CHECK(c.out.find("pre-flight warns against a 12.00 GiB card") != std::string::npos);
    c = check_config(dir, one_rule + "gpu_memory: auto\n");
    CHECK(c.out.find("the card NVML reports") != std::string::npos);
    c = check_config(dir, one_rule + "preflight: loud\n");
    CHECK(c.exit_code == 1);
    CHECK(c.err.find(":3: preflight must be `warn` or `off`, not `loud`") != std::string::npos);
    c = check_config(dir, one_rule + "gpu_memory: lots\n");
    CHECK(c.exit_code == 1);
    CHECK(c.err.find(":3: gpu_memory must be `auto`, a memory size or a card") !=
          std::string::npos);
    c = check_config(dir, one_rule + "preflght: off\n");
    CHECK(c.err.find("did you mean `preflight`?") != std::string::npos);

    c = check_config(dir, "watch: [");
    CHECK(c.exit_code == 1);
    CHECK(check_config(dir, "").exit_code == 1);
    CHECK(std::system((std::string(OOMTRIAGE_BINARY) + " check-config " +
                       (dir.path / "missing.yaml").string() + " 2>/dev/null")
                          .c_str()) != 0);
  }

  TEST_CASE("the daemon logs the same warnings at start, and runs") {
    TempDir dir;
    const fs::path train = dir.path / "train";
    fs::create_directories(train);
    const fs::path config = dir.path / "oomtriage.yaml";
    std::ofstream(config) << "watch:\n  - logs: " << train.string()
                          << "/*/log.txt\n  - logs: " << (dir.path / "gone").string()
                          << "/*/log.txt\n";
    DaemonProcess daemon(dir.path / "state", {"daemon", "--config", config.string()},
                         dir.path / "err");
    CHECK(daemon.alive());
    CHECK(daemon.stderr_text().find((dir.path / "gone").string() + " does not exist") !=
          std::string::npos);
  }
}
