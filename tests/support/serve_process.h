// tests/support/serve_process.h
//
// `oomtriage serve` as tests meet it: the real binary on a loopback port (ServeProcess), asked by
// curl (get), for tests/daemon/serve_test.cc and serve_live_test.cc.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/e2e.h"
#include "tests/support/files.h"

namespace oomtriage::testing {

// `oomtriage serve` started with `args`; ready once it printed its address.
class ServeProcess {
 public:
  ServeProcess(std::vector<std::string> args, const fs::path& err) : err_(err) {
    fs::remove(err);
    pid_ = spawn_oomtriage(std::move(args), err);
    const std::regex address(R"(http://127\.0\.0\.1:(\d+)/)");
    wait_until([&] {
      std::smatch m;
      const std::string text = slurp(err_);
      if (std::regex_search(text, m, address)) port_ = std::stoi(m[1]);
      return port_ != 0 || !alive();
    });
  }
  ~ServeProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;
  bool alive() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      pid_ = -1;
      return false;
    }
    return true;
  }
  int stop() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // The exit code of a server that would not start.
  int exit_code() {
    wait_until([&] { return !alive(); });
    return exit_code_;
  }
  std::string url(const std::string& path = "/") const {
    return fmt::format("http://127.0.0.1:{}{}", port_, path);
  }
  unsigned short port() const { return static_cast<unsigned short>(port_); }
  std::string stderr_text() const { return slurp(err_); }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int exit_code_ = -2;
  fs::path err_;
};

struct Fetched {
  int status = 0;
  std::string headers;
  std::string body;
};

inline Fetched get(const std::string& url, const std::string& curl_args = "") {
  static int n = 0;
  const fs::path base =
      fs::temp_directory_path() / fmt::format("oomtriage-serve-{}-{}", ::getpid(), n++);
  const auto [rc, code] =
      run_shell(fmt::format("curl -s -m 20 {} -D '{}.h' -o '{}.b' -w '%{{http_code}}' '{}'",
                            curl_args, base.string(), base.string(), url));
  Fetched out;
  out.status = std::atoi(code.c_str());
  out.headers = slurp(base.string() + ".h");
  out.body = slurp(base.string() + ".b");
  fs::remove(base.string() + ".h");
  fs::remove(base.string() + ".b");
  return out;
}

inline size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace oomtriage::testing
