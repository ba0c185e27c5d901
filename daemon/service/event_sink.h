// daemon/service/event_sink.h
//
// Where a log's progress goes: one store transaction per commit holding its new events (each with
// its ranked fixes and an outbox row per receiver), its resume offset, anchor and analyzer state.
// A refused commit (disk full, the store locked by another writer) is counted and logged once;
// the caller rewinds the file and reads it again, or, for a file that is going away and cannot be
// read again, hands its progress here to be kept and retried first. Retries back off from 250 ms
// to 30 s and never block the loop. A store SQLite finds damaged is not retried: `on_damaged`
// hears of it once (the daemon moves the store aside and salvages it, db/store_recovery.h). The
// journal line of each event is written once the store holds it, never per retry. The wall
// clock is injected.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "daemon/common/metrics.h"
#include "db/store.h"
#include "parsers/event.h"
#include "triage/fix.h"

namespace oomtriage::daemon {

class EventSink {
 public:
  // `new_alerts` runs after a commit that stored new events (their alerts are queued); `wall_clock`
  // gives Unix seconds.
  EventSink(db::Store& store, Metrics& metrics, std::function<void()> new_alerts,
            std::function<int64_t()> wall_clock);
  // Called once when SQLite says the store is damaged (its message); nothing is retried after.
  void on_damaged(std::function<void(const std::string&)> damaged) {
    damaged_ = std::move(damaged);
  }

  // The store accepted the progress (or the batch, in one transaction), or its refusal, which
  // is counted and logged here once per spell of refusals.
  Result<Ok> commit(const db::Progress& progress);
  Result<Ok> commit(const std::vector<db::Progress>& batch);
  // A refusal that did not come through commit() (registering a file, say).
  void refused(const Error& error);
  // Keeps the progress of a file that cannot be read again; retry_kept() stores it.
  void keep(db::Progress progress);
  // Stores the kept progress, oldest first; an error when the store refused some of it (kept).
  Result<Ok> retry_kept();

  bool failing() const { return failing_; }
  bool damaged() const { return damaged_seen_; }
  // How long to wait before the next retry: 250 ms, doubling while the store keeps refusing, up
  // to 30 s; back to 250 ms once it answers.
  std::chrono::milliseconds next_retry_delay();

 private:
  void accepted(const std::vector<const db::Progress*>& progress, int64_t new_events);

  db::Store& store_;
  Metrics& metrics_;
  std::function<void()> new_alerts_;
  std::function<int64_t()> wall_clock_;
  std::function<void(const std::string&)> damaged_;
  bool damaged_seen_ = false;
  std::deque<db::Progress> kept_;
  bool failing_ = false;
  std::chrono::milliseconds retry_delay_{0};
};

// The stored row of one event: its JSON (as `scan --json` shows it), its ranked fixes and its
// journal line.
db::EventRow event_row(const parsers::OomEvent& event, const std::vector<triage::Fix>& fixes,
                       const std::string& model_family);
// The journal line for one event: "job J: cuda OOM in sampling at step 500/3000 (path:line);
// top fix: F".
std::string event_journal_text(const std::string& job, const std::string& path,
                               const parsers::OomEvent& event,
                               const std::vector<triage::Fix>& fixes);

}  // namespace oomtriage::daemon
