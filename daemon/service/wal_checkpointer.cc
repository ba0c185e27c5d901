// daemon/service/wal_checkpointer.cc: a passive WAL checkpoint every interval, off the loop.
#include "daemon/service/wal_checkpointer.h"

namespace oomtriage::daemon {

WalCheckpointer::WalCheckpointer(std::string store_path, std::chrono::milliseconds interval)
    : store_path_(std::move(store_path)),
      interval_(interval),
      store_([this]() -> std::unique_ptr<db::Store> {
        auto opened = db::Store::open(store_path_);
        return opened ? std::move(*opened) : nullptr;
      }()),
      thread_([this] { loop(); }) {}

WalCheckpointer::~WalCheckpointer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void WalCheckpointer::loop() {
  // Its own connection: a checkpoint on it takes none of the loop's locks but the checkpointer's.
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    const bool stopping = wake_.wait_for(lock, interval_, [this] { return stopping_; });
    lock.unlock();
    if (!store_) {
      if (auto opened = db::Store::open(store_path_)) store_ = std::move(*opened);
    }
    // A failure leaves the WAL to grow until the next one, or the loop's safety net.
    if (store_) (void)store_->checkpoint_wal();
    lock.lock();
    if (stopping) return;
  }
}

}  // namespace oomtriage::daemon
