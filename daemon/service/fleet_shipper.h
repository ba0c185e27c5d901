// daemon/service/fleet_shipper.h
//
// Ships this node's store into the fleet store (`store: postgresql://...`) on a thread of its
// own: libpq blocks, and the daemon's loop must never wait on a database across the network.
// It reads the node's fleet outbox through its own SQLite connection, ships a batch in one
// PostgreSQL transaction, and only then forgets it; a database that is down or unreachable is
// logged once, retried with a backoff (1 s doubling to 30 s), and the node goes on storing and
// alerting on its own until it is back. Nothing is lost or doubled: an unacknowledged batch is
// shipped again, and the fleet store's keys make the second copy change nothing.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace oomtriage::daemon {

class FleetShipper {
 public:
  struct Options {
    std::string url;                           // postgresql://...
    std::string store_path;                    // the node's SQLite store
    std::string host;                          // written on every row
    std::chrono::milliseconds interval{2000};  // between looks at the outbox when idle
    std::chrono::milliseconds max_backoff{30000};
    int batch_rows = 500;
    int keep_days = 0;  // retention: prune jobs not seen for this long, once a day; 0: never
  };
  explicit FleetShipper(Options options);
  ~FleetShipper();  // ships nothing more; a batch in flight is finished or rolled back
  FleetShipper(const FleetShipper&) = delete;
  FleetShipper& operator=(const FleetShipper&) = delete;

  // New rows were stored: look now rather than at the next interval.
  void poke();

  const std::string& url() const { return options_.url; }
  const std::string& host() const { return options_.host; }
  int keep_days() const { return options_.keep_days; }
  uint64_t backlog() const { return backlog_.load(); }  // outbox entries not yet shipped
  uint64_t shipped() const { return shipped_.load(); }  // entries shipped since start
  bool up() const { return up_.load(); }                // the last attempt reached it

 private:
  void loop();

  Options options_;
  std::atomic<uint64_t> backlog_{0};
  std::atomic<uint64_t> shipped_{0};
  std::atomic<bool> up_{false};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool poked_ = false;
  std::thread thread_;
};

}  // namespace oomtriage::daemon
