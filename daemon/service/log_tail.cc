// daemon/service/log_tail.cc: FileFollower's reads of one log by its name, with the daemon's
// truncation and rotation rules (daemon.cc's read, followed_logs.cc's check_identity).
#include "daemon/service/log_tail.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "daemon/service/file_identity.h"
#include "daemon/service/tracked_log.h"

namespace oomtriage::daemon {

LogTail::LogTail(std::string path, parsers::Trainer trainer, std::chrono::milliseconds settle,
                 Sink sink, Notice notice)
    : path_(std::move(path)),
      trainer_(trainer),
      settle_(settle),
      sink_(std::move(sink)),
      notice_(std::move(notice)),
      buffer_(kReadChunk) {}

LogTail::~LogTail() = default;

Result<Ok> LogTail::open(Clock::time_point now) {
  current_ = open_under_name(now);
  if (!current_) {
    const int error = errno;
    return make_error(ErrorCode::kIo,
                      fmt::format("cannot read {}: {}", path_, std::strerror(error)));
  }
  return Ok{};
}

std::unique_ptr<LogTail::Reading> LogTail::open_under_name(Clock::time_point now) {
  const int fd = open_log(path_);
  if (fd < 0) return nullptr;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int error = S_ISDIR(st.st_mode) ? EISDIR : errno ? errno : EINVAL;
    ::close(fd);
    errno = error;
    return nullptr;
  }
  auto reading = std::make_unique<Reading>();
  reading->follower = std::make_unique<FileFollower>(path_, trainer_, fd, st.st_dev, st.st_ino,
                                                     Checkpoint{}, /*cri=*/false);
  reading->number = files_++;
  reading->last_growth = now;
  return reading;
}

bool LogTail::read(Reading& reading, Clock::time_point now, bool under_name, bool& grew) {
  FileFollower& follower = *reading.follower;
  for (;;) {
    FileFollower::Read read = follower.read(kReadBudgetPerTurn, buffer_.span());
    if (read.rewritten && under_name) {
      // As the daemon: what the old content still had open is reported, then the file is read
      // again from byte 0 as the next file under the name.
      notice_(
          fmt::format("{} was truncated (copytruncate?): reading it again from the start", path_));
      follower.analyzer().settle();
      report(reading);
      follower.restart();
      reading.number = files_++;
      read = follower.read(kReadBudgetPerTurn, buffer_.span());
    }
    if (read.error) {
      notice_(fmt::format("read {}: {}", path_, std::strerror(read.error)));
      return false;
    }
    if (read.bytes > 0) {
      reading.last_growth = now;
      grew = true;
    }
    report(reading);
    if (!read.more) return true;
  }
}

void LogTail::report(Reading& reading) {
  std::vector<parsers::OomEvent> events = reading.follower->analyzer().take_events();
  if (!events.empty()) sink_({reading.follower->analyzer(), reading.number, std::move(events)});
}

void LogTail::settle_if_quiet(Reading& reading, Clock::time_point now) {
  parsers::LogAnalyzer& analyzer = reading.follower->analyzer();
  if (analyzer.has_open_incident() &&
      now - reading.last_growth >= analyzer.quiet_before_settle(settle_)) {
    analyzer.settle();
    report(reading);
  }
}

void LogTail::check_name(Clock::time_point now, bool& grew) {
  struct stat st {};
  const bool exists = ::stat(path_.c_str(), &st) == 0;
  if (current_ && exists && static_cast<uint64_t>(st.st_dev) == current_->follower->dev() &&
      static_cast<uint64_t>(st.st_ino) == current_->follower->ino()) {
    return;
  }
  if (current_) {
    // Its last bytes under this name, then it is read on while its writer may still write to it.
    read(*current_, now, /*under_name=*/false, grew);
    struct stat old {};
    const bool deleted = ::fstat(current_->follower->fd(), &old) != 0 || old.st_nlink == 0;
    notice_(
        fmt::format("{} was {}: its last lines are still read; the new file under the name "
                    "is read from its start",
                    path_, deleted ? "deleted" : "rotated away"));
    current_->last_growth = now;
    leaving_.push_back(std::move(current_));
  }
  if (!exists) return;
  current_ = open_under_name(now);
  if (!current_) {
    if (!missing_said_) notice_(fmt::format("cannot read {}: {}", path_, std::strerror(errno)));
    missing_said_ = true;
    return;
  }
  missing_said_ = false;
  read(*current_, now, /*under_name=*/true, grew);
}

LogTail::Turn LogTail::turn(Clock::time_point now) {
  bool grew = false;
  if (current_ && !read(*current_, now, /*under_name=*/true, grew)) return Turn::kFailed;
  for (auto& leaving : leaving_) read(*leaving, now, /*under_name=*/false, grew);
  check_name(now, grew);
  if (current_) settle_if_quiet(*current_, now);
  std::erase_if(leaving_, [&](std::unique_ptr<Reading>& leaving) {
    settle_if_quiet(*leaving, now);
    if (now - leaving->last_growth < kLeavingQuiet) return false;
    // Its writer has moved on: the stream ends here, its last line and outcome decided.
    parsers::LogAnalysis last = leaving->follower->analyzer().finish();
    if (!last.events.empty()) {
      sink_({leaving->follower->analyzer(), leaving->number, std::move(last.events)});
    }
    return true;
  });
  return grew ? Turn::kRead : Turn::kIdle;
}

void LogTail::stop() {
  for (auto& leaving : leaving_) {
    leaving->follower->analyzer().settle();
    report(*leaving);
  }
  if (current_) {
    current_->follower->analyzer().settle();
    report(*current_);
  }
}

bool LogTail::incident_open() const {
  const auto open = [](const std::unique_ptr<Reading>& r) {
    return r && r->follower->analyzer().has_open_incident();
  };
  return open(current_) || std::any_of(leaving_.begin(), leaving_.end(), open);
}

}  // namespace oomtriage::daemon
