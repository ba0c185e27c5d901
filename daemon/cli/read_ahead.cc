// daemon/cli/read_ahead.cc: one reader thread, a mutex and a condition variable.
#include "daemon/cli/read_ahead.h"

#include <unistd.h>

#include <cerrno>

namespace oomtriage::daemon {

ReadAhead::ReadAhead(int fd, size_t chunk, size_t buffers) : fd_(fd) {
  slots_.reserve(buffers);
  for (size_t i = 0; i < buffers; ++i) slots_.emplace_back(chunk);
  reader_ = std::thread([this] { produce(); });
}

ReadAhead::~ReadAhead() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  reader_.join();
}

void ReadAhead::produce() {
  for (size_t i = 0;; ++i) {
    Slot& slot = slots_[i % slots_.size()];
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !slot.filled; });
      if (stopping_) return;
    }
    ssize_t n;
    do {
      n = ::read(fd_, slot.buffer.data(), slot.buffer.size());
    } while (n < 0 && errno == EINTR);
    const int error = n < 0 ? errno : 0;
    {
      std::lock_guard lock(mutex_);
      slot.size = n > 0 ? static_cast<size_t>(n) : 0;
      slot.last = n <= 0;
      slot.filled = true;
      if (error) error_ = error;
    }
    changed_.notify_all();
    if (n <= 0) return;
  }
}

std::string_view ReadAhead::next() {
  std::unique_lock lock(mutex_);
  if (holding_) {
    // The caller is done with the previous slot: the reader may fill it again.
    Slot& previous = slots_[(consumed_ - 1) % slots_.size()];
    if (previous.last) return {};
    previous.filled = false;
    holding_ = false;
    changed_.notify_all();
  }
  Slot& slot = slots_[consumed_ % slots_.size()];
  changed_.wait(lock, [&] { return slot.filled; });
  ++consumed_;
  holding_ = true;
  if (slot.last) return {};
  return {slot.buffer.data(), slot.size};
}

}  // namespace oomtriage::daemon
