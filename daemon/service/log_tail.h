// daemon/service/log_tail.h
//
// One log followed by its name outside the daemon (`scan --follow`), read as the daemon reads its
// logs: through FileFollower (file_follower.h), so a file truncated or rewritten in place is read
// again from its start as a new generation, its open incident settled first; and with the
// daemon's rotation rule (followed_logs.h): a file whose name now names another file, or none, is
// read to its end and on while its writer may still write to it, and finished once it has been
// quiet for kLeavingQuiet, while the new file under the name is read from its start. There is no
// store: nothing is checkpointed. The caller gives the time of each turn, so a test drives it on
// virtual time.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "daemon/common/read_buffer.h"
#include "daemon/service/file_follower.h"
#include "parsers/event.h"
#include "parsers/log_analyzer.h"
#include "parsers/result.h"

namespace oomtriage::daemon {

class LogTail {
 public:
  using Clock = std::chrono::steady_clock;

  // The daemon's wait for a rotated log's writer to reopen its log (followed_logs.cc).
  static constexpr std::chrono::seconds kLeavingQuiet{30};

  // Incidents a turn found, with the analyzer that found them (its trainer, arguments and outcome
  // rank and show them) and which file under the name holds them: 0 for the first, then one more
  // for each truncation or rotation (offsets start again at 0 in each).
  struct Found {
    const parsers::LogAnalyzer& analyzer;
    int file_number = 0;
    std::vector<parsers::OomEvent> events;
  };
  using Sink = std::function<void(Found)>;
  // What happened to the file under the name, in words (for stderr).
  using Notice = std::function<void(const std::string&)>;

  // `settle`: how long a file must be quiet before its open incident is reported (the daemon's
  // settle_ms).
  LogTail(std::string path, parsers::Trainer trainer, std::chrono::milliseconds settle, Sink sink,
          Notice notice);
  ~LogTail();
  LogTail(const LogTail&) = delete;
  LogTail& operator=(const LogTail&) = delete;

  // Opens the file under the name; the error names it.
  Result<Ok> open(Clock::time_point now);

  enum class Turn { kRead, kIdle, kFailed };
  // Reads what the followed files grew by, notices a truncation or a rotation, reports an
  // incident whose file has been quiet long enough at `now`, and finishes a rotated file quiet
  // for kLeavingQuiet. kFailed after a read error (said through the notice).
  Turn turn(Clock::time_point now);

  // At the end (SIGINT): every open incident reported as it stands.
  void stop();

  // Whether an incident waits for its file to be quiet (the caller's next turn should come soon).
  bool incident_open() const;

 private:
  struct Reading {
    std::unique_ptr<FileFollower> follower;
    int number = 0;
    Clock::time_point last_growth;
  };

  // The file now under the name, as the next reading; nullptr (errno set) when there is none.
  std::unique_ptr<Reading> open_under_name(Clock::time_point now);
  // Reads what `reading` grew by; a file under the name found truncated starts over. False on a
  // read error.
  bool read(Reading& reading, Clock::time_point now, bool under_name, bool& grew);
  void report(Reading& reading);
  void settle_if_quiet(Reading& reading, Clock::time_point now);
  // The name no longer names the file being read: it leaves, and the new one (if any) is read.
  void check_name(Clock::time_point now, bool& grew);

  std::string path_;
  parsers::Trainer trainer_;
  std::chrono::milliseconds settle_;
  Sink sink_;
  Notice notice_;
  ReadBuffer buffer_;
  std::unique_ptr<Reading> current_;  // the file under the name; null while the name is gone
  std::vector<std::unique_ptr<Reading>> leaving_;
  int files_ = 0;  // readings started
  bool missing_said_ = false;
};

}  // namespace oomtriage::daemon
