// daemon/cli/child_process.h
//
// One trainer run as a child of `oomtriage run`: in its own process group, its stdout and stderr
// through pipes (passed on unchanged to ours, and to the caller as they arrive), killed if the
// supervisor dies (PR_SET_PDEATHSIG). SIGINT and SIGTERM sent to the supervisor go to the child's
// group, SIGKILL follows after a grace period.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/result.h"

namespace oomtriage::daemon {

struct ChildExit {
  int exit_code = 0;  // the child's code, or 128 + the signal that killed it
  bool signaled = false;
  bool interrupted = false;    // the supervisor was asked to stop (SIGINT/SIGTERM)
  bool stopped_by_us = false;  // stop() ended it
};

class ChildProcess {
 public:
  // Starts argv[0] (searched in PATH) with `env_overrides` added to our environment.
  static Result<ChildProcess> start(const std::vector<std::string>& argv,
                                    const std::map<std::string, std::string>& env_overrides);

  // Passes the child's output through until it exits and its pipes are drained; `on_output`
  // gets every chunk (stream 1 or 2) in the order it arrived. `on_output` may call stop().
  // `on_tick`, when given, runs every `tick` while the child runs (the GPU memory samples).
  ChildExit pass_through(const std::function<void(int stream, std::string_view bytes)>& on_output,
                         std::chrono::seconds grace,
                         std::chrono::milliseconds tick = std::chrono::milliseconds(0),
                         const std::function<void()>& on_tick = {});

  // Asks the child's group to end (SIGTERM, SIGKILL after the grace period).
  void stop() { stop_requested_ = true; }
  pid_t pid() const { return pid_; }

 private:
  ChildProcess(pid_t pid, int out_fd, int err_fd) : pid_(pid), out_fd_(out_fd), err_fd_(err_fd) {}

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  bool stop_requested_ = false;
};

// Blocks SIGINT, SIGTERM and SIGCHLD in the calling thread (they are read through a signalfd
// while a child runs) and ignores SIGPIPE; call once before the first start().
void take_over_signals();

}  // namespace oomtriage::daemon
