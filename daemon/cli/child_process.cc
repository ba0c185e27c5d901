// daemon/cli/child_process.cc: fork/exec, the pipes, the signal forwarding.
#include "daemon/cli/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

extern char** environ;

namespace oomtriage::daemon {
namespace {

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGCHLD);
  return set;
}

// Writes all of `bytes` to `fd`; a closed terminal or pipe on our side loses the copy, not the
// analysis.
void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

void take_over_signals() {
  const sigset_t set = handled_signals();
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

Result<ChildProcess> ChildProcess::start(const std::vector<std::string>& argv,
                                         const std::map<std::string, std::string>& env_overrides) {
  if (argv.empty()) return make_error(ErrorCode::kBadInput, "no command to run");
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    return make_error(ErrorCode::kIo, fmt::format("pipe: {}", std::strerror(errno)));
  }
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return make_error(ErrorCode::kIo, fmt::format("pipe: {}", std::strerror(errno)));
  }
  // Everything the child needs is built before fork: after it only async-signal-safe calls.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string name(entry.substr(0, entry.find('=')));
    if (env_overrides.count(name) == 0) env_strings.emplace_back(entry);
  }
  for (const auto& [name, value] : env_overrides) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = argv;
  std::vector<char*> args_p;
  for (auto& s : args) args_p.push_back(s.data());
  args_p.push_back(nullptr);
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
    return make_error(ErrorCode::kIo, fmt::format("fork: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the supervisor died before the line above
    const sigset_t set = handled_signals();
    ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    ::execvpe(args_p[0], args_p.data(), envp.data());
    const char* reason = std::strerror(errno);
    (void)!::write(STDERR_FILENO, "oomtriage run: cannot start ", 28);
    (void)!::write(STDERR_FILENO, args_p[0], std::strlen(args_p[0]));
    (void)!::write(STDERR_FILENO, ": ", 2);
    (void)!::write(STDERR_FILENO, reason, std::strlen(reason));
    (void)!::write(STDERR_FILENO, "\n", 1);
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: no signal may reach a group that does not exist yet
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  return ChildProcess(pid, out_pipe[0], err_pipe[0]);
}

ChildExit ChildProcess::pass_through(
    const std::function<void(int stream, std::string_view bytes)>& on_output,
    std::chrono::seconds grace, std::chrono::milliseconds tick,
    const std::function<void()>& on_tick) {
  using Clock = std::chrono::steady_clock;
  const sigset_t set = handled_signals();
  const int signals = ::signalfd(-1, &set, SFD_CLOEXEC);
  ChildExit result;
  bool exited = false;
  std::optional<Clock::time_point> kill_at;
  std::vector<char> buffer(64 << 10);
  const auto ask_to_end = [&](int signal) {
    ::kill(-pid_, signal);
    if (!kill_at) kill_at = Clock::now() + grace;
  };
  const bool ticking = on_tick && tick.count() > 0;
  Clock::time_point next_tick = Clock::now() + tick;
  while (out_fd_ >= 0 || err_fd_ >= 0 || !exited) {
    if (ticking && !exited && Clock::now() >= next_tick) {
      on_tick();
      next_tick = Clock::now() + tick;
    }
    if (stop_requested_ && !kill_at && !exited) {
      result.stopped_by_us = true;
      ask_to_end(SIGTERM);
    }
    pollfd fds[3] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}, {signals, POLLIN, 0}};
    int timeout_ms = -1;
    if (kill_at && !exited) {
      timeout_ms = static_cast<int>(std::max<int64_t>(
          0,
          std::chrono::duration_cast<std::chrono::milliseconds>(*kill_at - Clock::now()).count()));
    } else if (exited) {
      timeout_ms = 2000;  // a grandchild may hold the pipes: do not wait for it forever
    }
    if (ticking && !exited) {
      const auto until_tick = std::max<int64_t>(
          0,
          std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - Clock::now()).count());
      timeout_ms = timeout_ms < 0 ? static_cast<int>(until_tick)
                                  : std::min(timeout_ms, static_cast<int>(until_tick));
    }
    const int ready = ::poll(fds, 3, timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      if (exited) break;
      if (!kill_at) continue;  // a tick's timeout
      if (kill_at && Clock::now() >= *kill_at) {
        ::kill(-pid_, SIGKILL);
        kill_at = Clock::now() + std::chrono::hours(24);
      }
      continue;
    }
    for (int stream = 1; stream <= 2; ++stream) {
      int& fd = stream == 1 ? out_fd_ : err_fd_;
      if (fd < 0 || (fds[stream - 1].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = ::read(fd, buffer.data(), buffer.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        ::close(fd);
        fd = -1;
        continue;
      }
      const std::string_view bytes(buffer.data(), static_cast<size_t>(n));
      write_all(stream == 1 ? STDOUT_FILENO : STDERR_FILENO, bytes);
      on_output(stream, bytes);
    }
    if (fds[2].revents & POLLIN) {
      signalfd_siginfo info{};
      if (::read(signals, &info, sizeof info) == sizeof info) {
        if (info.ssi_signo == SIGINT || info.ssi_signo == SIGTERM) {
          result.interrupted = true;
          if (!exited) ask_to_end(static_cast<int>(info.ssi_signo));
        }
      }
      int status = 0;
      if (!exited && ::waitpid(pid_, &status, WNOHANG) == pid_) {
        exited = true;
        result.signaled = WIFSIGNALED(status);
        result.exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
        ::kill(-pid_, SIGKILL);  // what is left of its group (workers) goes with it
      }
    }
  }
  for (int* fd : {&out_fd_, &err_fd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  if (!exited) {
    int status = 0;
    if (::waitpid(pid_, &status, 0) == pid_) {
      result.signaled = WIFSIGNALED(status);
      result.exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    }
  }
  ::close(signals);
  return result;
}

}  // namespace oomtriage::daemon
