// daemon/cli/read_ahead.h
//
// Sequential reads of one file on a second thread, into a ring of page-aligned buffers, while
// the caller works on the previous ones: the kernel's copy of the page cache (a fifth to a
// quarter of a scan) overlaps the analyzer instead of adding to it. The reader never gets more
// than the ring ahead, so memory stays at buffers x chunk.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "daemon/common/read_buffer.h"

namespace oomtriage::daemon {

class ReadAhead {
 public:
  // Starts reading `fd` (which stays the caller's) from its current offset.
  ReadAhead(int fd, size_t chunk, size_t buffers);
  ~ReadAhead();
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // The next chunk, valid until the next call; empty at the end of the file or on an error
  // (then error() is its errno).
  std::string_view next();
  int error() const { return error_; }

 private:
  struct Slot {
    explicit Slot(size_t chunk) : buffer(chunk) {}
    ReadBuffer buffer;
    size_t size = 0;
    bool filled = false;
    bool last = false;  // the end of the file or an error
  };
  void produce();

  int fd_;
  std::vector<Slot> slots_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  size_t consumed_ = 0;   // slots handed out by next()
  bool holding_ = false;  // the slot handed out last is still the caller's
  int error_ = 0;
  std::thread reader_;
};

}  // namespace oomtriage::daemon
