// daemon/service/fleet_shipper.cc: the shipping loop. One attempt = open what is not open, read
// a batch, ship it, forget it; a failure drops the connection (the next attempt opens anew).
#include "daemon/service/fleet_shipper.h"

#include <optional>

#include <algorithm>
#include <memory>

#include "daemon/common/clock.h"
#include "daemon/common/journal_log.h"
#include "db/fleet_store.h"
#include "db/store.h"

namespace oomtriage::daemon {

FleetShipper::FleetShipper(Options options)
    : options_(std::move(options)), thread_([this] { loop(); }) {}

FleetShipper::~FleetShipper() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void FleetShipper::poke() {
  {
    std::lock_guard lock(mutex_);
    poked_ = true;
  }
  wake_.notify_all();
}

void FleetShipper::loop() {
  std::unique_ptr<db::Store> local;
  std::unique_ptr<db::FleetStore> fleet;
  std::string store_id;
  bool failing = false;
  std::chrono::milliseconds backoff{1000};
  std::optional<std::chrono::steady_clock::time_point> pruned_at;
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    poked_ = false;
    lock.unlock();
    bool more = false;  // a full batch went: the next one may be waiting
    std::string error;
    if (!local) {
      // Its own connection: the daemon's is its loop's. A write lock held by the daemon is
      // waited for, here on this thread.
      if (auto opened = db::Store::open(options_.store_path, 5000)) {
        local = std::move(*opened);
        if (auto id = local->store_id()) {
          store_id = *id;
        } else {
          error = id.error().message;
          local.reset();
        }
      } else {
        error = opened.error().message;
      }
    }
    if (local && !fleet) {
      if (auto opened = db::FleetStore::open(options_.url)) {
        fleet = std::move(*opened);
      } else {
        error = opened.error().message;
      }
    }
    if (local && fleet) {
      auto batch = local->fleet_batch(options_.batch_rows);
      if (!batch) {
        error = batch.error().message;
      } else if (!batch->empty()) {
        const size_t rows = batch->jobs.size() + batch->snapshots.size() + batch->runs.size() +
                            batch->events.size() + batch->attempts.size();
        if (auto shipped = fleet->ship(*batch, store_id, options_.host); !shipped) {
          error = shipped.error().message;
          fleet.reset();  // whatever broke, the next attempt starts on a fresh connection
        } else if (auto forgot = local->fleet_shipped(batch->last_seq); !forgot) {
          // Shipped but not forgotten: it goes again, and changes nothing there.
          error = forgot.error().message;
        } else {
          shipped_ += rows;
          more = rows >= static_cast<size_t>(options_.batch_rows);
        }
      }
      if (auto backlog = local->fleet_backlog()) backlog_ = static_cast<uint64_t>(*backlog);
      // Retention once a day, when caught up: every node may do it, and the batches skip the
      // jobs another is deleting.
      const auto now = std::chrono::steady_clock::now();
      if (options_.keep_days > 0 && error.empty() && !more && fleet &&
          (!pruned_at || now - *pruned_at >= std::chrono::hours(24))) {
        pruned_at = now;
        const int64_t before = unix_now() - static_cast<int64_t>(options_.keep_days) * 86400;
        if (auto pruned = fleet->prune(before); !pruned) {
          log_line(kWarning, "fleet retention: {}", pruned.error().message);
        } else if (*pruned > 0) {
          log_line(kNotice, "fleet retention: {} job(s) not seen for {} days removed", *pruned,
                   options_.keep_days);
        }
      }
    } else if (local) {
      if (auto backlog = local->fleet_backlog()) backlog_ = static_cast<uint64_t>(*backlog);
    }
    // Said once when shipping stops working and once when it works again, not at each retry
    // (the reason may change on the way: a dropped connection, then a refused one).
    if (!error.empty() && !failing) {
      log_line(kWarning, "{} (rows stay in the local store; retrying)", error);
    } else if (error.empty() && failing) {
      log_line(kNotice, "fleet store reachable again ({} row(s) still to ship)", backlog_.load());
    }
    failing = !error.empty();
    up_ = !failing;
    lock.lock();
    if (more && error.empty()) continue;
    std::chrono::milliseconds wait = options_.interval;
    if (!error.empty()) {
      wait = backoff;
      backoff = std::min(backoff * 2, options_.max_backoff);
    } else {
      backoff = std::chrono::milliseconds(1000);
    }
    // A poke shortens an idle wait, not a backoff: a database that is down is not asked again
    // at every event.
    wake_.wait_for(lock, wait, [&] { return stopping_ || (poked_ && error.empty()); });
  }
}

}  // namespace oomtriage::daemon
