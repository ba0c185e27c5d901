// daemon/cli/part_reader.cc: the ring of parts, the helper thread, and the hand-over.
#include "daemon/cli/part_reader.h"

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "daemon/common/read_buffer.h"
#include "parsers/frame_runs.h"

namespace oomtriage::daemon {
namespace {

// Small enough to stay in the cache between the read and the analyzer, large enough that the
// hand-over costs nothing (bench/scan_vs_rg.sh).
constexpr size_t kPartBytes = 256 << 10;
// Parts read ahead of the analyzer, plus the one it is working on.
constexpr size_t kRingParts = 12;
// A helper that found the ring full sleeps until this many parts are free again.
constexpr size_t kRefillParts = kRingParts / 2;
// Fewer frames in a row are left to the analyzer's own loop.
constexpr int64_t kMinRunRecords = 4;

struct Part {
  explicit Part(size_t bytes) : buffer(bytes) {}
  ReadBuffer buffer;
  size_t size = 0;
  int error = 0;
  std::vector<parsers::FrameRun> runs;
  bool ready = false;
};

class PartRing {
 public:
  PartRing(int fd, uint64_t size) : fd_(fd), parts_total_((size + kPartBytes - 1) / kPartBytes) {
    ring_.reserve(kRingParts);
    for (size_t i = 0; i < kRingParts; ++i) ring_.emplace_back(kPartBytes);
  }

  size_t parts() const { return parts_total_; }

  // Helper thread: prepares parts until none is left or the analyzer is done.
  void prepare_ahead() {
    std::unique_lock lock(mutex_);
    while (true) {
      if (stopping_ || next_ == parts_total_) return;
      if (claimable()) {
        prepare(next_++, lock);
        continue;
      }
      // A full ring: sleep until a few parts are free, not at every release, so that the two
      // threads trade one wake-up per kRefillParts parts, not one per part.
      helper_sleeping_ = true;
      space_.wait(lock, [&] { return stopping_ || free_parts() >= kRefillParts; });
      helper_sleeping_ = false;
    }
  }

  // Analyzer thread: part `k`, prepared by whichever thread was free; valid until release(k).
  Part& wait_for(size_t k) {
    std::unique_lock lock(mutex_);
    Part& part = ring_[k % kRingParts];
    while (!part.ready) {
      if (claimable()) {
        prepare(next_++, lock);
      } else {
        awaited_ = k;
        ready_.wait(lock);
        awaited_ = kNone;
      }
    }
    return part;
  }

  void release(size_t k) {
    std::lock_guard lock(mutex_);
    ring_[k % kRingParts].ready = false;
    released_ = k + 1;
    if (helper_sleeping_ && free_parts() >= kRefillParts) space_.notify_one();
  }

  void stop() {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    space_.notify_one();
  }

 private:
  static constexpr size_t kNone = SIZE_MAX;

  size_t free_parts() const { return released_ + kRingParts - next_; }
  bool claimable() const { return next_ < parts_total_ && free_parts() > 0; }

  void prepare(size_t k, std::unique_lock<std::mutex>& lock) {
    Part& part = ring_[k % kRingParts];
    lock.unlock();
    const off_t offset = static_cast<off_t>(k * kPartBytes);
    part.size = 0;
    part.error = 0;
    part.runs.clear();
    while (part.size < kPartBytes) {
      const ssize_t n = ::pread(fd_, part.buffer.data() + part.size, kPartBytes - part.size,
                                offset + static_cast<off_t>(part.size));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) part.error = errno;
      if (n <= 0) break;
      part.size += static_cast<size_t>(n);
    }
    // A part may start inside a record: its runs start at its first record boundary.
    const std::string_view bytes(part.buffer.data(), part.size);
    const size_t first = k == 0 ? 0 : parsers::record_boundary_after(bytes, 0);
    parsers::find_frame_runs(bytes.substr(first), offset + first, kMinRunRecords, part.runs);
    lock.lock();
    part.ready = true;
    if (awaited_ == k) ready_.notify_one();
  }

  int fd_;
  size_t parts_total_;
  std::vector<Part> ring_;
  std::mutex mutex_;
  std::condition_variable space_;  // the helper waits for free parts
  std::condition_variable ready_;  // the analyzer waits for part awaited_
  bool helper_sleeping_ = false;
  size_t awaited_ = kNone;
  size_t next_ = 0;      // the first part no thread has claimed
  size_t released_ = 0;  // parts the analyzer is done with
  bool stopping_ = false;
};

}  // namespace

int feed_parts(int fd, uint64_t size, parsers::LogAnalyzer& analyzer,
               const std::function<void(uint64_t)>& on_progress) {
  PartRing ring(fd, size);
  std::thread helper;
  if (ring.parts() > 1) helper = std::thread([&] { ring.prepare_ahead(); });
  int error = 0;
  uint64_t done = 0;
  for (size_t k = 0; k < ring.parts(); ++k) {
    Part& part = ring.wait_for(k);
    error = part.error;
    const bool short_part = part.size < kPartBytes;
    analyzer.feed(std::string_view(part.buffer.data(), part.size), part.runs);
    done += part.size;
    ring.release(k);
    on_progress(done);
    if (error != 0 || short_part) break;  // a failed read, or the file shrank
  }
  ring.stop();
  if (helper.joinable()) helper.join();
  return error;
}

}  // namespace oomtriage::daemon
