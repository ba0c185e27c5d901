// daemon/cli/top_command.cc: `oomtriage top`'s loop: the store read each interval, the frame drawn
// over the last one, keys read as they are typed; the terminal given back as it was found.
#include "daemon/cli/top_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "daemon/common/clock.h"
#include "daemon/common/exit_codes.h"
#include "daemon/render/job_names.h"
#include "daemon/render/top_view.h"
#include "db/fleet_store.h"
#include "db/store.h"

namespace oomtriage::daemon {
namespace {

// Beside every running job, the newest this many: a store of 100,000 jobs is not read whole each
// second, and what needs someone (stalled, running, just crashed) is among them.
constexpr size_t kNewestJobs = 500;

// The terminal's size: the kernel's, else $COLUMNS and $LINES, else 80 columns and no row limit.
struct Size {
  int columns = 80;
  int rows = 0;
};
Size terminal_size() {
  Size size;
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
    size.columns = ws.ws_col;
    size.rows = ws.ws_row;
    return size;
  }
  const auto positive = [](const char* name) {
    const char* value = std::getenv(name);
    const int n = value ? std::atoi(value) : 0;
    return n > 0 ? n : 0;
  };
  if (const int columns = positive("COLUMNS")) size.columns = columns;
  size.rows = positive("LINES");
  return size;
}

// What a frame shows: the jobs, or why the store could not be read.
struct Reading {
  std::vector<db::JobSummary> jobs;
  std::optional<Error> error;
};

// Reads the jobs each interval. A node's store is opened anew each time: opened once, a store
// the daemon was not writing then would be read as it stood (db::ReadOnly::kOneCommand), and a
// daemon started later never seen. The fleet store's connection is kept.
class JobSource {
 public:
  explicit JobSource(StoreTarget target) : target_(std::move(target)) {}

  Reading read() {
    Reading reading;
    if (!reader_ || !db::is_fleet_url(target_.location)) {
      auto opened = open();
      if (!opened) {
        reader_.reset();
        reading.error = opened.error();
        return reading;
      }
      reader_ = std::move(*opened);
    }
    if (!reader_) return reading;  // no store yet: no jobs yet
    auto jobs = find();
    if (!jobs) {
      reader_.reset();  // a fleet store that went away is connected to again
      reading.error = jobs.error();
      return reading;
    }
    reading.jobs = std::move(*jobs);
    return reading;
  }

 private:
  // The first time through open_reader(), which says on stderr that the store was once recovered;
  // then the same file without saying it again each second.
  Result<std::unique_ptr<db::JobReader>> open() {
    if (!opened_before_ || db::is_fleet_url(target_.location)) {
      auto opened = open_reader(target_);
      opened_before_ = opened && *opened;
      return opened;
    }
    std::error_code ec;
    if (!std::filesystem::exists(target_.location, ec)) return std::unique_ptr<db::JobReader>();
    auto store = db::Store::open_read_only(target_.location, db::ReadOnly::kOneCommand);
    if (!store) return store.error();
    return std::unique_ptr<db::JobReader>(std::move(*store));
  }

  Result<std::vector<db::JobSummary>> find() {
    db::JobQuery running;
    running.host = target_.host;
    running.outcome = "running";
    OOMTRIAGE_ASSIGN_OR_RETURN(std::vector<db::JobSummary> jobs, reader_->find_jobs(running));
    db::JobQuery newest;
    newest.host = target_.host;
    newest.limit = kNewestJobs;
    OOMTRIAGE_ASSIGN_OR_RETURN(std::vector<db::JobSummary> recent, reader_->find_jobs(newest));
    for (db::JobSummary& job : recent) {
      const bool listed = std::any_of(jobs.begin(), jobs.end(),
                                      [&](const db::JobSummary& j) { return j.key == job.key; });
      if (!listed) jobs.push_back(std::move(job));
    }
    // Newest first, as keep_newest() wants: a fleet store's older copy of a job goes.
    std::stable_sort(jobs.begin(), jobs.end(),
                     [](const auto& a, const auto& b) { return a.last_seen > b.last_seen; });
    keep_newest(jobs);
    return jobs;
  }

  StoreTarget target_;
  std::unique_ptr<db::JobReader> reader_;
  bool opened_before_ = false;
};

std::string frame_of(const Reading& reading, const StoreTarget& target, Size size, bool color) {
  TopFrame frame;
  frame.width = size.columns;
  frame.now = unix_now();
  frame.color = color;
  frame.source = target.location + (target.host.empty() ? "" : " host " + target.host);
  if (reading.error) frame.note = "cannot read the store: " + reading.error->message;
  // The header, the note and the titles above the jobs.
  if (size.rows > 0) frame.rows = std::max(1, size.rows - 2 - (frame.note.empty() ? 0 : 1));
  return render_top(reading.jobs, frame);
}

bool write_all(const std::string& text) {
  for (size_t at = 0; at < text.size();) {
    const ssize_t n = ::write(STDOUT_FILENO, text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

// The signals that end `top` or redraw it arrive as bytes on a pipe that poll() waits on with the
// keys, so that none is lost between a check and the wait.
int wake_pipe[2] = {-1, -1};
void on_signal(int signal) {
  const int saved = errno;
  const char byte = static_cast<char>(signal);
  (void)!::write(wake_pipe[1], &byte, 1);
  errno = saved;
}

// Installs the handlers, and puts back those it found when it goes.
class Signals {
 public:
  Signals() {
    if (::pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    for (const int signal : {SIGINT, SIGTERM, SIGHUP, SIGWINCH}) {
      struct sigaction old {};
      if (::sigaction(signal, &action, &old) == 0) old_[signal] = old;
    }
  }
  ~Signals() {
    for (const auto& [signal, old] : old_) ::sigaction(signal, &old, nullptr);
    for (int& fd : wake_pipe) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }
  Signals(const Signals&) = delete;
  Signals& operator=(const Signals&) = delete;

 private:
  std::map<int, struct sigaction> old_;
};

// The terminal taken for the view: keys one at a time and not echoed (signals still come from
// Ctrl-C), the screen of its own with no cursor. Given back as it was found when it goes.
class Screen {
 public:
  explicit Screen(bool keys) {
    if (keys && ::tcgetattr(STDIN_FILENO, &saved_) == 0) {
      termios raw = saved_;
      raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
      raw.c_cc[VMIN] = 1;
      raw.c_cc[VTIME] = 0;
      keys_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    write_all("\x1b[?1049h\x1b[?25l");  // the alternate screen, the cursor hidden
  }
  ~Screen() {
    write_all("\x1b[?25h\x1b[?1049l");
    if (keys_) ::tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  Screen(const Screen&) = delete;
  Screen& operator=(const Screen&) = delete;

  // Over the previous frame: each line cleared to its end, and what is below it.
  static void draw(const std::string& frame) {
    std::string out = "\x1b[H";
    for (size_t at = 0; at < frame.size();) {
      size_t end = frame.find('\n', at);
      if (end == std::string::npos) end = frame.size();
      out.append(frame, at, end - at);
      out += "\x1b[K";
      // No newline after the last line: on the screen's last row it would scroll the header away.
      if (end + 1 < frame.size()) out += "\r\n";
      at = end + 1;
    }
    out += "\x1b[J";
    write_all(out);
  }

 private:
  termios saved_{};
  bool keys_ = false;
};

enum class Wake { kRefresh, kRedraw, kQuit };

// Waits up to `timeout` for a key or a signal. `keys` is standard input's descriptor, -1 once it
// has ended (a closed pipe is always readable: it is no longer waited on).
Wake wait_for(std::chrono::milliseconds timeout, int& keys) {
  pollfd fds[2] = {{wake_pipe[0], POLLIN, 0}, {keys, POLLIN, 0}};
  const int ready = ::poll(fds, 2, static_cast<int>(std::max<int64_t>(0, timeout.count())));
  if (ready <= 0) return Wake::kRefresh;  // the interval passed, or EINTR: the pipe says which
  Wake wake = Wake::kRefresh;
  if (fds[0].revents & POLLIN) {
    char signals[16];
    const ssize_t n = ::read(wake_pipe[0], signals, sizeof signals);
    for (ssize_t i = 0; i < n; ++i) {
      wake = signals[i] == SIGWINCH ? std::max(wake, Wake::kRedraw) : Wake::kQuit;
    }
  }
  if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
    char typed[64];
    const ssize_t n = ::read(keys, typed, sizeof typed);
    if (n <= 0 && !(n < 0 && errno == EINTR)) keys = -1;
    for (ssize_t i = 0; i < n; ++i) {
      if (typed[i] == 'q' || typed[i] == 'Q') wake = Wake::kQuit;
    }
    if (wake != Wake::kQuit && n > 0) wake = Wake::kRedraw;  // any other key: now
  }
  return wake;
}

}  // namespace

int run_top(const TopOptions& options) {
  if (!(options.interval_seconds >= 0.1)) {
    fmt::print(stderr, "oomtriage: --interval takes seconds, 0.1 or more\n");
    return kExitBadInput;
  }
  const bool color = color_enabled(options.color);
  JobSource source(options.store);
  if (options.once) {
    Reading reading = source.read();
    if (reading.error) {
      fmt::print(stderr, "oomtriage: {}\n", reading.error->message);
      return exit_code_for(*reading.error);
    }
    Size size = terminal_size();
    size.rows = 0;  // a script gets every job
    write_all(frame_of(reading, options.store, size, color));
    return kExitOk;
  }

  const bool terminal = ::isatty(STDOUT_FILENO) == 1;
  Signals signals;
  if (wake_pipe[0] < 0) {
    fmt::print(stderr, "oomtriage: cannot make a pipe: {}\n", std::strerror(errno));
    return kExitEnvironment;
  }
  // Read before the screen is taken, so that what the store's opening says on stderr is seen.
  Reading reading = source.read();
  std::optional<Screen> screen;
  if (terminal) screen.emplace(::isatty(STDIN_FILENO) == 1);
  int keys = STDIN_FILENO;
  const auto interval =
      std::chrono::milliseconds(static_cast<int64_t>(options.interval_seconds * 1000));
  auto next_read = std::chrono::steady_clock::now() + interval;
  for (;;) {
    Size size = terminal_size();
    if (screen) {
      Screen::draw(frame_of(reading, options.store, size, color));
    } else {
      size.rows = 0;  // a file or a pipe takes every job
      if (!write_all(frame_of(reading, options.store, size, color) + "\n")) break;
    }
    Wake wake = Wake::kRedraw;
    while (wake == Wake::kRedraw || std::chrono::steady_clock::now() < next_read) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          next_read - std::chrono::steady_clock::now());
      wake = wait_for(left, keys);
      if (wake != Wake::kRefresh) break;
    }
    if (wake == Wake::kQuit) break;
    if (wake == Wake::kRefresh) {
      reading = source.read();
      next_read = std::chrono::steady_clock::now() + interval;
    }
  }
  return kExitOk;
}

}  // namespace oomtriage::daemon
