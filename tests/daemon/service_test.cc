// tests/daemon/service_test.cc
//
// The service around the daemon: the systemd unit passes `systemd-analyze verify` and its
// exposure stays at or under 2.0; under NOTIFY_SOCKET the daemon sends READY=1 and watchdog
// pings; /metrics passes `promtool check metrics` and a real Prometheus scrapes it; the
// node_exporter textfile is written; the .deb installs and removes cleanly.
#include <doctest/doctest.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstdlib>
#include <regex>

#include "tests/support/e2e.h"
#include "tests/support/http_test_server.h"
#include "tests/support/skip.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

const fs::path kSource(OOMTRIAGE_SOURCE_DIR);

int run(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// The unit with ExecStart pointing at the binary under test (verify wants it to exist).
fs::path unit_for_test(const fs::path& dir, const std::string& name = "oomtriage.service") {
  std::string unit = slurp(kSource / "systemd" / name);
  const std::string from = "/usr/bin/oomtriage";
  unit.replace(unit.find(from), from.size(), OOMTRIAGE_BINARY);
  const fs::path path = dir / name;
  std::ofstream(path) << unit;
  return path;
}

std::string config_with_metrics(const fs::path& out, unsigned short port,
                                const fs::path& textfile) {
  return "watch:\n  - logs: " + (out / "*" / "log.txt").string() +
         "\nmetrics:\n  listen: 127.0.0.1:" + std::to_string(port) +
         "\n  textfile: " + textfile.string() + "\n";
}

}  // namespace

TEST_SUITE("daemon::service") {
  TEST_CASE("the units pass systemd-analyze verify, with an exposure of 2.0 or less") {
    if (!have_program("systemd-analyze")) {
      OOMTRIAGE_SKIP("systemd-analyze is not installed");
    }
    for (const std::string name : {"oomtriage.service", "oomtriage-serve.service"}) {
      CAPTURE(name);
      TempDir dir;
      const fs::path unit = unit_for_test(dir.path, name);
      CHECK(run("systemd-analyze verify --man=no " + unit.string() + " 2>" +
                (dir.path / "err").string()) == 0);
      CHECK(slurp(dir.path / "err") == "");
      run("systemd-analyze security --offline=yes " + unit.string() + " > " +
          (dir.path / "sec").string() + " 2>&1");
      const std::string report = slurp(dir.path / "sec");
      std::smatch m;
      REQUIRE(std::regex_search(
          report, m,
          std::regex("Overall exposure level for " +
                     std::regex_replace(name, std::regex("\\."), "\\.") + ": ([0-9.]+)")));
      MESSAGE(name << " systemd-analyze security exposure: " << m[1]);
      CHECK(std::stod(m[1]) <= 2.0);
    }
  }
  TEST_CASE(
      "under NOTIFY_SOCKET the daemon says READY=1 after its start-up scan and pings the "
      "watchdog") {
    TempDir dir;
    const fs::path socket_path = dir.path / "notify.sock";
    const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    timeval tv{0, 200000};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    fs::create_directories(dir.path / "out" / "job");
    ::setenv("NOTIFY_SOCKET", socket_path.c_str(), 1);
    ::setenv("WATCHDOG_USEC", "400000", 1);
    std::string messages;
    {
      DaemonProcess daemon(dir.path / "state", {"watch", (dir.path / "out").string()},
                           dir.path / "err");
      ::unsetenv("NOTIFY_SOCKET");
      ::unsetenv("WATCHDOG_USEC");
      wait_until(
          [&] {
            char buffer[512];
            const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
            if (n > 0) messages += std::string(buffer, static_cast<size_t>(n)) + "\n";
            return messages.find("READY=1") != std::string::npos &&
                   messages.find("WATCHDOG=1") != std::string::npos;
          },
          5s);
      CHECK(daemon.stop(SIGTERM) == 0);
      char buffer[512];
      ssize_t n;
      while ((n = ::recv(fd, buffer, sizeof buffer, 0)) > 0)
        messages += std::string(buffer, static_cast<size_t>(n)) + "\n";
    }
    ::close(fd);
    CHECK(messages.find("READY=1") != std::string::npos);
    CHECK(messages.find("STATUS=watching") != std::string::npos);
    CHECK(messages.find("WATCHDOG=1") != std::string::npos);
    CHECK(messages.find("STOPPING=1") != std::string::npos);
  }
  TEST_CASE(
      "/metrics passes promtool and counts events, the textfile is written, a real Prometheus "
      "scrapes it") {
    TempDir dir;
    const fs::path out = dir.path / "output";
    fs::create_directories(out / "job");
    const fs::path textfile = dir.path / "oomtriage.prom";
    // Port 0: the daemon binds a free port and says which (no port picked here and bound later).
    std::ofstream(dir.path / "c.yaml") << config_with_metrics(out, 0, textfile);
    DaemonProcess daemon(dir.path / "state", {"daemon", "--config", (dir.path / "c.yaml").string()},
                         dir.path / "err");
    std::smatch said;
    const std::string err = daemon.stderr_text();
    REQUIRE(std::regex_search(err, said, std::regex(R"(serving /metrics on port (\d+))")));
    const unsigned short port = static_cast<unsigned short>(std::stoi(said[1]));
    write_slowly(out / "job" / "log.txt", slurp(kGolden / "aitk_gc_off_oom_step2.log"), 4096);
    const std::string scrape = "curl -sf http://127.0.0.1:" + std::to_string(port) + "/metrics > " +
                               (dir.path / "metrics.txt").string();
    REQUIRE(wait_until([&] {
      return run(scrape) == 0 &&
             slurp(dir.path / "metrics.txt")
                     .find("oomtriage_events_total{kind=\"cuda\",phase=\"train_step\"} 1") !=
                 std::string::npos;
    }));
    const std::string metrics = slurp(dir.path / "metrics.txt");
    CHECK(metrics.find("oomtriage_files_watched 1") != std::string::npos);
    CHECK(metrics.find("oomtriage_build_info{version=") != std::string::npos);
    CHECK(metrics.find("job=") == std::string::npos);  // no per-job labels
    CHECK(fs::exists(textfile));
    // Half a check is not a pass: without the tools the whole test is reported skipped.
    if (!have_program("promtool")) {
      OOMTRIAGE_SKIP("promtool is not installed (scripts/setup.sh installs it)");
    }
    CHECK(run("promtool check metrics < " + (dir.path / "metrics.txt").string() +
              " > /dev/null 2>&1") == 0);
    CHECK(run("curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:" + std::to_string(port) +
              "/secret | grep -q 404") == 0);

    const char* prometheus = "/usr/bin/prometheus";
    if (!fs::exists(prometheus)) {
      OOMTRIAGE_SKIP("prometheus is not installed (scripts/setup.sh installs it)");
    }
    std::ofstream(dir.path / "prometheus.yml")
        << "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: oomtriage\n"
        << "    static_configs:\n      - targets: ['127.0.0.1:" << port << "']\n";
    const KillOnExit stop{dir.path / "prom.pid"};
    std::string query;
    const unsigned short prom_port = serve_on_free_port([&](unsigned short candidate) {
      const std::string start = std::string(prometheus) +
                                " --config.file=" + (dir.path / "prometheus.yml").string() +
                                " --storage.tsdb.path=" + (dir.path / "tsdb").string() +
                                " --web.listen-address=127.0.0.1:" + std::to_string(candidate) +
                                " > " + (dir.path / "prom.log").string() + " 2>&1 & echo $! > " +
                                (dir.path / "prom.pid").string();
      if (run(start) != 0) return false;
      query = "curl -sf 'http://127.0.0.1:" + std::to_string(candidate) +
              "/api/v1/query?query=oomtriage_events_total' > " + (dir.path / "q.json").string();
      const auto taken = [&] {
        return slurp(dir.path / "prom.log").find("address already in use") != std::string::npos;
      };
      const std::string ready =
          "curl -sf http://127.0.0.1:" + std::to_string(candidate) + "/-/ready > /dev/null 2>&1";
      wait_until([&] { return taken() || run(ready) == 0; }, 20s);
      if (!taken() && run(ready) == 0) return true;
      KillOnExit{dir.path / "prom.pid"};  // another process has the port: stop it, take another
      return false;
    });
    INFO("prometheus's log: " << slurp(dir.path / "prom.log"));
    REQUIRE(prom_port != 0);
    CHECK(wait_until(
        [&] {
          return run(query) == 0 &&
                 slurp(dir.path / "q.json").find("train_step") != std::string::npos;
        },
        20s));
  }
  TEST_CASE(
      "the .deb installs the binary, unit, config, man page and completion, and removes them") {
    // Installs a package on this machine: only where CI asks for it.
    if (std::getenv("OOMTRIAGE_TEST_DEB") == nullptr) {
      OOMTRIAGE_SKIP("installs the .deb system-wide; set OOMTRIAGE_TEST_DEB=1 (the CI does)");
    }
    if (::geteuid() != 0 || !have_program("cpack") || !have_program("dpkg")) {
      OOMTRIAGE_SKIP("needs root, cpack and dpkg");
    }
    TempDir dir;
    const fs::path build = fs::path(OOMTRIAGE_BINARY).parent_path();
    REQUIRE(run("cd " + build.string() + " && cpack -G DEB -B " + dir.path.string() + " > " +
                (dir.path / "cpack.log").string() + " 2>&1") == 0);
    fs::path deb;
    for (const auto& entry : fs::directory_iterator(dir.path)) {
      if (entry.path().extension() == ".deb") deb = entry.path();
    }
    REQUIRE_FALSE(deb.empty());
    if (fs::exists("/usr/bin/oomtriage") && run("dpkg -s oomtriage >/dev/null 2>&1") != 0) {
      OOMTRIAGE_SKIP("/usr/bin/oomtriage exists and is not from the package");
    }
    REQUIRE(run("dpkg -i " + deb.string() + " > " + (dir.path / "install.log").string() +
                " 2>&1") == 0);
    CHECK(run("/usr/bin/oomtriage version | grep -q 'oomtriage 0.1.0'") == 0);
    CHECK(fs::exists("/usr/lib/systemd/system/oomtriage.service"));
    CHECK(fs::exists("/usr/lib/systemd/system/oomtriage-serve.service"));
    CHECK(fs::exists("/etc/oomtriage/oomtriage.yaml"));
    CHECK(fs::exists("/usr/share/bash-completion/completions/oomtriage"));
    CHECK(fs::exists("/usr/share/zsh/vendor-completions/_oomtriage"));
    CHECK(fs::exists("/usr/share/fish/vendor_completions.d/oomtriage.fish"));
    CHECK(fs::exists("/usr/share/man/man1/oomtriage.1"));
    CHECK(run("dpkg -r oomtriage > " + (dir.path / "remove.log").string() + " 2>&1") == 0);
    CHECK_FALSE(fs::exists("/usr/bin/oomtriage"));
    CHECK_FALSE(fs::exists("/usr/lib/systemd/system/oomtriage.service"));
    run("dpkg --purge oomtriage > /dev/null 2>&1");
  }
}
