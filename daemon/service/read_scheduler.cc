// daemon/service/read_scheduler.cc: quiet logs watched, busy ones checked and polled in slices.
#include "daemon/service/read_scheduler.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "daemon/common/journal_log.h"

namespace oomtriage::daemon {

namespace {
constexpr int kPollSlices = 20;
// A check reads at most this much: more new bytes at once than a few redraws is a burst, read now.
constexpr size_t kCheckBytes = 4096;
// Redraws gathered unread up to this much are read: the analyzer keeps up with the step, and a
// restart reads no more than that again.
constexpr uint64_t kGatherBytes = 4096;
constexpr int kLineChecks = 8;
}  // namespace

ReadScheduler::ReadScheduler(boost::asio::io_context& io, std::chrono::milliseconds interval,
                             Read read, LoopClock& clock)
    : pacer_(interval), read_(std::move(read)), poll_timer_(clock.timer(io)) {}

void ReadScheduler::watch_quietly(Tracked& file) {
  if (!watcher_ || file.watch >= 0) return;
  auto watch = watcher_->watch_file(file.path());
  if (!watch) {
    if (!file_watch_failed_logged_) {
      log_line(kWarning, "{}: {} and others are polled every {} ms", watch.error().message,
               file.path(), pacer_.interval().count());
      file_watch_failed_logged_ = true;
    }
    file.pace.busy = true;
    poll(file);
    return;
  }
  file.watch = *watch;
  by_watch_[file.watch] = &file;
}

void ReadScheduler::written(Tracked& file, MonoTime now) {
  if (!pacer_.on_write(file.pace, now)) return;
  // Its writes come faster than the interval: stop hearing each one, read it once per interval.
  unwatch(file);
  watch_closes(file);
  poll(file);
}

void ReadScheduler::unwatch(Tracked& file) {
  if (file.watch < 0) return;
  by_watch_.erase(file.watch);
  if (watcher_) watcher_->unwatch_file(file.watch);
  file.watch = -1;
}

// No descriptor needed and nothing heard per write; without it (out of watches) the checks and
// the polls still read the log.
void ReadScheduler::watch_closes(Tracked& file) {
  if (!watcher_ || file.close_watch >= 0) return;
  if (auto watch = watcher_->watch_file(file.path(), /*closes_only=*/true)) {
    file.close_watch = *watch;
    by_close_watch_[file.close_watch] = &file;
  }
}

void ReadScheduler::unwatch_closes(Tracked& file) {
  if (file.close_watch < 0) return;
  by_close_watch_.erase(file.close_watch);
  if (watcher_) watcher_->unwatch_file(file.close_watch);
  file.close_watch = -1;
}

void ReadScheduler::poll(Tracked& file) {
  if (!file.polled) {
    file.polled = true;
    busy_.push_back(&file);
  }
  arm_polls();
}

void ReadScheduler::forget(Tracked& file) {
  unwatch(file);
  unwatch_closes(file);
  if (file.polled) {
    file.polled = false;
    std::erase(busy_, &file);
  }
}

Tracked* ReadScheduler::by_watch(int watch) const {
  auto it = by_watch_.find(watch);
  return it == by_watch_.end() ? nullptr : it->second;
}

Tracked* ReadScheduler::by_close_watch(int watch) const {
  auto it = by_close_watch_.find(watch);
  return it == by_close_watch_.end() ? nullptr : it->second;
}

std::chrono::milliseconds ReadScheduler::slice() const {
  return std::max(pacer_.interval() / kPollSlices, std::chrono::milliseconds(10));
}

void ReadScheduler::arm_polls() {
  if (polls_armed_ || busy_.empty()) return;
  polls_armed_ = true;
  poll_timer_->expires_after(slice());
  poll_timer_->async_wait([this](const boost::system::error_code& ec) {
    polls_armed_ = false;
    if (ec) return;
    poll_slice();
    arm_polls();
  });
}

// A busy log its burst checks look at needs no poll to be read: they read it when a line ends or
// a check's worth has gathered. Its poll only notes whether it grew (read_pacer.h).
bool ReadScheduler::checked(const Tracked& file) const {
  return burst_check_.count() > 0 && file.follower->is_open() && file.line_checks < kLineChecks &&
         file.checked_to >= file.follower->read_pos();
}

uint64_t ReadScheduler::grown_since_poll(const Tracked& file) {
  const uint64_t seen = std::max(file.checked_to, file.follower->read_pos());
  return seen > file.polled_to ? seen - file.polled_to : 0;
}

// The checks of one slice, read in batches (batched_pread.h): the logs whose new bytes hold a line
// end, or more than a check reads, go to `bursting`.
void ReadScheduler::check_bursts(std::span<Tracked* const> due, std::vector<Tracked*>& bursting) {
  if (!check_reads_) {
    check_reads_.emplace();
    check_buffers_.resize(BatchedPread::kMaxBatch * kCheckBytes);
  }
  std::array<BatchedPread::Request, BatchedPread::kMaxBatch> requests;
  std::array<Tracked*, BatchedPread::kMaxBatch> files;
  size_t count = 0;
  auto judge = [&] {
    check_reads_->read(std::span(requests.data(), count));
    for (size_t i = 0; i < count; ++i) {
      const BatchedPread::Request& request = requests[i];
      if (request.result <= 0) continue;
      Tracked& file = *files[i];
      const auto n = static_cast<size_t>(request.result);
      if (n == kCheckBytes) {  // a burst (or more behind it)
        bursting.push_back(&file);
        continue;
      }
      file.checked_to = request.offset + n;
      const bool line_end = std::memchr(request.buffer, '\n', n) != nullptr;
      file.line_checks = line_end ? file.line_checks + 1 : 0;
      if (line_end || file.checked_to - file.follower->read_pos() >= kGatherBytes)
        bursting.push_back(&file);
    }
    count = 0;
  };
  for (Tracked* file : due) {
    if (file->line_checks >= kLineChecks || !file->follower->is_open()) continue;
    requests[count] = {.fd = file->follower->fd(),
                       .offset = std::max(file->checked_to, file->follower->read_pos()),
                       .buffer = check_buffers_.data() + count * kCheckBytes,
                       .size = kCheckBytes};
    files[count] = file;
    if (++count == BatchedPread::kMaxBatch) judge();
  }
  if (count > 0) judge();
}

// A read never ends a followed log (names are the watcher's and the rescan's business), so the
// list is walked by index and pruned after; the quiet ones are watched last.
void ReadScheduler::poll_slice() {
  // Burst checks: as many busy logs each slice as make each one checked every burst_check_.
  const size_t busy = busy_.size();
  if (burst_check_.count() > 0) {
    checks_owed_ += static_cast<double>(busy) * static_cast<double>(slice().count()) /
                    static_cast<double>(burst_check_.count());
    checks_owed_ = std::min(checks_owed_, static_cast<double>(busy));
  }
  std::vector<Tracked*> due;
  for (; checks_owed_ >= 1 && busy > 0; checks_owed_ -= 1) {
    if (check_cursor_ >= busy) check_cursor_ = 0;
    due.push_back(busy_[check_cursor_++]);
  }
  std::vector<Tracked*> bursting;
  if (!due.empty()) check_bursts(due, bursting);
  for (Tracked* file : bursting) read_(*file);
  std::vector<Tracked*> quiet;
  const size_t n = busy_.size();
  const size_t take = (n + kPollSlices - 1) / kPollSlices;
  if (poll_cursor_ >= n) poll_cursor_ = 0;
  const size_t end = std::min(n, poll_cursor_ + take);
  for (size_t i = poll_cursor_; i < end; ++i) {
    Tracked* file = busy_[i];
    const uint64_t bytes = checked(*file) ? grown_since_poll(*file) : read_(*file);
    file->polled_to = std::max(file->checked_to, file->follower->read_pos());
    if (file->pace.busy && pacer_.on_poll(file->pace, bytes)) {
      file->polled = false;
      file->line_checks = 0;  // busy again later, it is looked at afresh
      quiet.push_back(file);
    } else if (!file->pace.busy) {
      // polled for want of a descriptor, until a read gets one
      file->polled = file->waiting_for_descriptor;
    }
  }
  // Only this slice's logs can have left the list; the others are not touched (1,000 Tracked
  // objects walked 20 times a second were a cache miss each, 15% of the loop's CPU).
  const auto first = busy_.begin() + static_cast<std::ptrdiff_t>(poll_cursor_);
  const auto last = busy_.begin() + static_cast<std::ptrdiff_t>(end);
  const auto kept = std::remove_if(first, last, [](const Tracked* file) { return !file->polled; });
  poll_cursor_ = end - static_cast<size_t>(last - kept);
  busy_.erase(kept, last);
  for (Tracked* file : quiet) {
    // Watched, then read once more for what came before the watch: also what its checks left
    // unread, and a truncation they could not see (a check past the new end reads nothing).
    // Out of watches it is busy again, and read all the same.
    unwatch_closes(*file);
    watch_quietly(*file);
    read_(*file);
  }
}

}  // namespace oomtriage::daemon
