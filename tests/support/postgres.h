// tests/support/postgres.h
//
// A throwaway PostgreSQL cluster from Debian's packages for the fleet store's tests: initdb into
// a temp folder, the server on a free loopback port with its socket in that folder, a superuser
// `oomtriage` whose password is only in a password file (as a node would keep it), stopped and
// started at will (an outage), removed at the end. initdb refuses to run as root: as root the
// cluster belongs to the `postgres` user and its commands run through runuser. Tests skip when
// the server's binaries are absent.
#pragma once

#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "tests/support/e2e.h"
#include "tests/support/files.h"

namespace oomtriage::testing {

class PostgresCluster {
 public:
  // The server's binaries (/usr/lib/postgresql/<newest>/bin), if installed.
  static std::optional<std::filesystem::path> binaries() {
    namespace fs = std::filesystem;
    std::error_code ec;
    std::vector<fs::path> found;
    for (const auto& version : fs::directory_iterator("/usr/lib/postgresql", ec)) {
      if (fs::exists(version.path() / "bin" / "initdb") &&
          fs::exists(version.path() / "bin" / "pg_ctl")) {
        found.push_back(version.path() / "bin");
      }
    }
    if (found.empty()) return std::nullopt;
    std::sort(found.begin(), found.end());
    return found.back();
  }

  // Creates and starts the cluster; ok() says whether it worked (why not is in error()).
  PostgresCluster() {
    namespace fs = std::filesystem;
    const auto bin = binaries();
    if (!bin) {
      error_ = "PostgreSQL's server is not installed (Debian: postgresql)";
      return;
    }
    bin_ = *bin;
    char tmpl[] = "/tmp/oomtriage-pg-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    fs::permissions(root_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    data_ = root_ / "data";
    const fs::path superuser_password = root_ / "superuser.pw";
    std::ofstream(superuser_password) << kPassword << "\n";
    passfile_ = root_ / "pgpass";
    if (::geteuid() == 0) {
      if (::getpwnam("postgres") == nullptr) {
        error_ = "running as root and there is no `postgres` user to run the server as";
        return;
      }
      as_ = "runuser -u postgres -- ";
      std::system(("chown postgres " + root_.string() + " " + superuser_password.string()).c_str());
    }
    if (!run("initdb -D " + data_.string() +
             " -U oomtriage --pwfile=" + superuser_password.string() +
             " --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --no-sync >" +
             (root_ / "initdb.log").string() + " 2>&1")) {
      error_ = "initdb failed: " + slurp(root_ / "initdb.log");
      return;
    }
    // The server binds its own port: one free a moment ago, another if a test beside this one
    // took it meanwhile (oomtriage::testing::serve_on_free_port).
    port_ = serve_on_free_port([&](unsigned short candidate) {
      port_ = candidate;
      std::ofstream(passfile_, std::ios::trunc)
          << "127.0.0.1:" << port_ << ":*:oomtriage:" << kPassword << "\n";
      fs::permissions(passfile_, fs::perms::owner_read | fs::perms::owner_write);
      return start();
    });
    ok_ = port_ != 0;
    if (!ok_) error_ = "the server did not start: " + slurp(root_ / "server.log");
  }

  ~PostgresCluster() {
    if (!data_.empty() && std::filesystem::exists(data_ / "postmaster.pid")) {
      run("pg_ctl -D " + data_.string() + " -m immediate -w stop >/dev/null 2>&1");
    }
    std::error_code ec;
    if (!root_.empty()) std::filesystem::remove_all(root_, ec);
  }
  PostgresCluster(const PostgresCluster&) = delete;
  PostgresCluster& operator=(const PostgresCluster&) = delete;

  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }

  // The database as a node's config names it: no password, the password file beside it.
  std::string url() const {
    return "postgresql://oomtriage@127.0.0.1:" + std::to_string(port_) +
           "/postgres?passfile=" + passfile_.string();
  }
  std::string url_without_passfile() const {
    return "postgresql://oomtriage@127.0.0.1:" + std::to_string(port_) + "/postgres";
  }
  const std::filesystem::path& passfile() const { return passfile_; }

  bool start() {
    return run("pg_ctl -D " + data_.string() + " -l " + (root_ / "server.log").string() +
               " -o \"-c listen_addresses=127.0.0.1 -p " + std::to_string(port_) + " -k " +
               root_.string() + " -c fsync=off\" -w -t 60 start >/dev/null 2>&1");
  }
  bool stop() {
    return run("pg_ctl -D " + data_.string() + " -m fast -w -t 60 stop >/dev/null 2>&1");
  }

  // A statement's result through psql (the first column of each row, one per line).
  std::string query(const std::string& sql) const {
    const std::filesystem::path out = root_ / "query.out";
    const std::string command = "PGPASSFILE=" + passfile_.string() + " " +
                                (bin_ / "psql").string() + " -X -A -t -q -h 127.0.0.1 -p " +
                                std::to_string(port_) + " -U oomtriage -d postgres -c \"" + sql +
                                "\" >" + out.string() + " 2>&1";
    std::system(command.c_str());
    return slurp(out);
  }

 private:
  static constexpr const char* kPassword = "fleet-test-secret";

  bool run(const std::string& command) const {
    return std::system((as_ + (bin_ / "").string() + command).c_str()) == 0;
  }

  std::filesystem::path bin_;
  std::filesystem::path root_;
  std::filesystem::path data_;
  std::filesystem::path passfile_;
  std::string as_;
  int port_ = 0;
  bool ok_ = false;
  std::string error_;
};

}  // namespace oomtriage::testing
