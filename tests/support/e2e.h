// tests/support/e2e.h
//
// Helpers for end-to-end tests that run the real `oomtriage` binary: temp folders, bounded
// waits, a daemon process (stderr to a file, ready when it says "store ready"), a writer that
// appends like a trainer, and a read-only view of the store.
#pragma once

#include <doctest/doctest.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "db/store.h"
#include "tests/support/files.h"

extern char** environ;

namespace oomtriage::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

inline const fs::path kGolden = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "testdata" / "logs";

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/oomtriage-e2e-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;  // never throw from a destructor; a leftover temp folder is harmless
    fs::remove_all(path, ec);
  }
};

inline bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds limit = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(25ms);
  }
  return done();
}

// Starts the oomtriage binary with `args`, its stderr appended to `err` and its stdout dropped;
// returns its pid. Never ctest's output pipe: a test that aborts (an ASan report) leaves its
// daemon running, and a daemon holding that pipe made ctest wait for it for ever (a CI timeout).
inline pid_t spawn_oomtriage(std::vector<std::string> args, const fs::path& err) {
  args.insert(args.begin(), OOMTRIAGE_BINARY);
  std::vector<char*> raw;
  for (auto& a : args) raw.push_back(a.data());
  raw.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  pid_t pid = -1;
  REQUIRE(posix_spawn(&pid, raw[0], &actions, nullptr, raw.data(), environ) == 0);
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

class DaemonProcess {
 public:
  DaemonProcess(const fs::path& state, std::vector<std::string> args, const fs::path& err)
      : err_(err) {
    args.insert(args.begin(), {"--state-dir", state.string()});
    pid_ = spawn_oomtriage(std::move(args), err);
    // Ready once it says so on stderr; a daemon that exited first is a failure, not readiness.
    const auto ready = [&] { return stderr_text().find("store ready") != std::string::npos; };
    wait_until([&] { return ready() || !alive(); });
    INFO("the daemon's stderr: " << stderr_text());
    REQUIRE_MESSAGE(alive(), "the daemon exited before it was ready");
    REQUIRE_MESSAGE(ready(), "the daemon did not say it was ready within the wait");
  }
  ~DaemonProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  bool alive() {
    if (pid_ <= 0) return false;
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_status_ = status;
      pid_ = -1;
      return false;
    }
    return true;
  }
  // Sends `signal` and waits for the exit; returns the exit code (or -signal).
  int stop(int signal) {
    ::kill(pid_, signal);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  }
  std::string stderr_text() const { return slurp(err_); }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int exit_status_ = 0;
  fs::path err_;
};

// Appends `text` to `path` in small pieces, like a trainer writing as it goes.
inline void write_slowly(const fs::path& path, std::string_view text, size_t piece = 512) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  for (size_t i = 0; i < text.size(); i += piece) {
    out << text.substr(i, piece);
    out.flush();
    std::this_thread::sleep_for(1ms);
  }
}

struct StoreView {
  fs::path db;
  std::optional<db::JobStory> story(const std::string& job) {
    if (!fs::exists(db)) return std::nullopt;
    auto store = db::Store::open(db.string());
    if (!store) return std::nullopt;
    auto s = (*store)->job_story(job);
    return s ? *s : std::nullopt;
  }
  size_t events(const std::string& job) {
    auto s = story(job);
    return s ? s->events.size() : 0;
  }
};

// What a shell command prints on stdout, and its exit code.
inline std::pair<int, std::string> run_shell(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string out;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) out.append(buffer, n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// What `oomtriage ARGS` prints (stdout and stderr) and its exit code.
inline std::pair<int, std::string> oomtriage_says(const std::string& args) {
  return run_shell(std::string(OOMTRIAGE_BINARY) + " " + args + " 2>&1");
}

// An environment variable set for the processes a test starts (PATH for a fake squeue), put
// back after.
struct ScopedEnv {
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  const char* name_;
  std::optional<std::string> old_;
};

// Kills the process whose pid is in `pid_file` (a server a test started in the background) and
// waits for it to exit, so nothing writes into the test's folder while it is removed.
// A port for a server the test starts that binds its own (Alertmanager, Prometheus): it cannot
// be handed a bound socket (ReservedPort in http_test_server.h), so it gets a port the kernel
// handed out a moment ago, and another one when `start_server(port)` says it did not come up
// there (a test beside it took the port meanwhile). Returns the port, or 0.
inline unsigned short serve_on_free_port(const std::function<bool(unsigned short)>& start_server) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    const bool bound = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
                       ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
    if (fd >= 0) ::close(fd);
    if (bound && start_server(ntohs(addr.sin_port))) return ntohs(addr.sin_port);
  }
  return 0;
}

struct KillOnExit {
  fs::path pid_file;
  ~KillOnExit() {
    const std::string pid = "$(cat " + pid_file.string() + ")";
    std::system(("kill " + pid + " 2>/dev/null; for i in $(seq 100); do kill -0 " + pid +
                 " 2>/dev/null || break; sleep 0.05; done")
                    .c_str());
  }
};

}  // namespace oomtriage::testing
