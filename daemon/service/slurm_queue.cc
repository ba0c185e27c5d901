// daemon/service/slurm_queue.cc: squeue's command line and output, a command run with a time
// limit, the polling thread.
#include "daemon/service/slurm_queue.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

extern char** environ;

namespace oomtriage::daemon {

std::vector<std::string> squeue_command(const std::string& host) {
  return {"squeue",
          "--noheader",
          "--nodelist=" + host,
          "--states=RUNNING",
          "--array",
          "--expand-patterns",
          "--Format=JobID:40,ArrayJobID:40,ArrayTaskID:40,STDOUT:4096"};
}

std::vector<SlurmJob> parse_squeue(std::string_view output) {
  std::vector<SlurmJob> jobs;
  while (!output.empty()) {
    const size_t end = std::min(output.find('\n'), output.size());
    std::string_view line = output.substr(0, end);
    output.remove_prefix(std::min(end + 1, output.size()));
    std::string_view fields[3];
    bool complete = true;
    for (std::string_view& field : fields) {
      const size_t start = line.find_first_not_of(' ');
      if (start == std::string_view::npos) {
        complete = false;
        break;
      }
      line.remove_prefix(start);
      const size_t stop = std::min(line.find(' '), line.size());
      field = line.substr(0, stop);
      line.remove_prefix(stop);
    }
    // The path: the rest, without the padding (a path may hold spaces, not end with one).
    const size_t first = line.find_first_not_of(' ');
    const size_t last = line.find_last_not_of(" \r");
    if (!complete || first == std::string_view::npos || line[first] != '/') continue;
    SlurmJob job;
    job.job_id = fields[0];
    job.array_job_id = fields[1];
    if (fields[2] != "N/A") job.array_task_id = fields[2];
    job.stdout_path = line.substr(first, last - first + 1);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

std::vector<std::string> sacct_command(const std::string& job_id) {
  return {"sacct", "-j", job_id, "-X", "-n", "-P", "-o", "JobID,State,ExitCode"};
}

std::optional<SlurmEnd> parse_sacct(std::string_view output, const std::string& job_id) {
  static constexpr std::string_view kFinal[] = {"COMPLETED", "FAILED",    "OUT_OF_MEMORY",
                                                "CANCELLED", "TIMEOUT",   "NODE_FAIL",
                                                "PREEMPTED", "BOOT_FAIL", "DEADLINE"};
  while (!output.empty()) {
    const size_t end = std::min(output.find('\n'), output.size());
    std::string_view line = output.substr(0, end);
    output.remove_prefix(std::min(end + 1, output.size()));
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t bar1 = line.find('|');
    const size_t bar2 = bar1 == std::string_view::npos ? bar1 : line.find('|', bar1 + 1);
    if (bar2 == std::string_view::npos || line.substr(0, bar1) != job_id) continue;
    std::string_view state = line.substr(bar1 + 1, bar2 - bar1 - 1);
    state = state.substr(0, state.find(' '));  // "CANCELLED by 1000"
    if (std::find(std::begin(kFinal), std::end(kFinal), state) == std::end(kFinal)) {
      return std::nullopt;
    }
    std::string_view exit_code = line.substr(bar2 + 1);
    exit_code = exit_code.substr(0, exit_code.find('|'));
    return SlurmEnd{job_id, std::string(state), std::string(exit_code)};
  }
  return std::nullopt;
}

std::string short_host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "localhost";
  std::string host(name);
  return host.substr(0, host.find('.'));
}

Result<std::string> run_command(const std::vector<std::string>& argv,
                                std::chrono::milliseconds timeout) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    return make_error(ErrorCode::kIo, fmt::format("{}: pipe: {}", argv[0], std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> raw;
  for (const std::string& arg : argv) raw.push_back(const_cast<char*>(arg.c_str()));
  raw.push_back(nullptr);
  pid_t pid = -1;
  const int spawned = ::posix_spawnp(&pid, raw[0], &actions, nullptr, raw.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  if (spawned != 0) {
    ::close(out[0]);
    return make_error(ErrorCode::kIo,
                      fmt::format("cannot run {}: {}", argv[0], std::strerror(spawned)));
  }
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timed_out = false;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{out[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = ready == 0;
      break;
    }
    char buffer[8192];
    const ssize_t n = ::read(out[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > (16u << 20)) break;  // no squeue prints this much: stop reading
  }
  ::close(out[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return make_error(ErrorCode::kIo,
                      fmt::format("{} did not answer within {} ms", argv[0], timeout.count()));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return make_error(ErrorCode::kIo, fmt::format("{} failed (exit status {})", argv[0],
                                                  WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  return text;
}

SlurmPoller::SlurmPoller(std::chrono::milliseconds interval, OnJobs on_jobs, OnEnded on_ended)
    : interval_(interval),
      on_jobs_(std::move(on_jobs)),
      on_ended_(std::move(on_ended)),
      thread_([this] { loop(); }) {}

SlurmPoller::~SlurmPoller() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void SlurmPoller::loop() {
  const std::vector<std::string> command = squeue_command(short_host_name());
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    auto answer = run_command(command, std::chrono::seconds(10));
    if (answer) {
      std::vector<SlurmJob> running = parse_squeue(*answer);
      if (on_ended_) judge_ended(running);
      on_jobs_(std::move(running));
    } else {
      on_jobs_(answer.error());
    }
    lock.lock();
    wake_.wait_for(lock, interval_, [this] { return stopping_; });
  }
}

void SlurmPoller::judge_ended(const std::vector<SlurmJob>& running) {
  for (SlurmJob& job : running_) {
    const bool still = std::any_of(running.begin(), running.end(),
                                   [&](const SlurmJob& j) { return j.job_id == job.job_id; });
    if (!still) ending_.emplace_back(std::move(job), 0);
  }
  running_ = running;
  std::erase_if(ending_, [this](std::pair<SlurmJob, int>& ending) {
    auto& [job, asked] = ending;
    auto answer = run_command(sacct_command(job.job_id), std::chrono::seconds(10));
    if (answer) {
      if (auto end = parse_sacct(*answer, job.job_id)) {
        on_ended_(job, std::move(*end));
        return true;
      }
    }
    return ++asked >= 10;  // accounting that never says: the log's verdict stands
  });
}

}  // namespace oomtriage::daemon
