// daemon/service/wal_checkpointer.h
//
// Checkpoints the store's write-ahead log on a thread of its own, with its own connection, so
// that the fsyncs a checkpoint costs (tens of milliseconds on a slow disk) never hold the event
// loop while an alert is on its way. The loop's connection keeps SQLite's own checkpoint only as
// a safety net for a WAL this thread cannot keep small.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "db/store.h"

namespace oomtriage::daemon {

class WalCheckpointer {
 public:
  // The loop's own connection should call Store::set_auto_checkpoint(kLoopAutoCheckpointPages).
  static constexpr int kLoopAutoCheckpointPages = 16384;  // 64 MiB of WAL

  // Opens its connection here, on the caller's thread: its descriptors are taken before the
  // logs' budget is counted (service_manager.h), not later from the reserve.
  WalCheckpointer(std::string store_path, std::chrono::milliseconds interval);
  ~WalCheckpointer();  // a last checkpoint, then the thread ends
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

 private:
  void loop();

  std::string store_path_;
  std::chrono::milliseconds interval_;
  std::unique_ptr<db::Store> store_;  // the thread's; opened again by it after a failure
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace oomtriage::daemon
