// daemon/service/event_sink.cc
#include "daemon/service/event_sink.h"

#include <fmt/format.h>

#include <algorithm>

#include "daemon/common/human_units.h"
#include "daemon/common/journal_log.h"
#include "parsers/event_codec.h"
#include "triage/fix_codec.h"

namespace oomtriage::daemon {

EventSink::EventSink(db::Store& store, Metrics& metrics, std::function<void()> new_alerts,
                     std::function<int64_t()> wall_clock)
    : store_(store),
      metrics_(metrics),
      new_alerts_(std::move(new_alerts)),
      wall_clock_(std::move(wall_clock)) {}

Result<Ok> EventSink::commit(const db::Progress& progress) {
  auto result = store_.commit_progress(progress, wall_clock_());
  if (!result) {
    refused(result.error());
    return result.error();
  }
  accepted({&progress}, *result);
  return Ok{};
}

Result<Ok> EventSink::commit(const std::vector<db::Progress>& batch) {
  auto result = store_.commit_progress(batch, wall_clock_());
  if (!result) {
    refused(result.error());
    return result.error();
  }
  std::vector<const db::Progress*> all;
  for (const auto& progress : batch) all.push_back(&progress);
  accepted(all, *result);
  return Ok{};
}

void EventSink::accepted(const std::vector<const db::Progress*>& progress, int64_t new_events) {
  // Events already stored (a file read again after a rewind or a restart) are not counted twice.
  if (new_events > 0) {
    for (const db::Progress* p : progress) {
      for (const auto& row : p->events) {
        if (row.revision == 0) ++metrics_.events[{row.kind, row.phase}];
      }
    }
  }
  for (const db::Progress* p : progress) {
    for (const auto& row : p->events) {
      if (new_events > 0 && !row.journal.empty())
        log_line(row.recovered ? kWarning : kError, "{}", row.journal);
    }
  }
  if (failing_) {
    failing_ = false;
    log_line(kNotice, "store: answering again");
  }
  retry_delay_ = std::chrono::milliseconds(0);
  if (new_events > 0 && new_alerts_) new_alerts_();
}

void EventSink::refused(const Error& error) {
  ++metrics_.store_failures;
  if (error.code == ErrorCode::kDatabaseDamaged && damaged_) {
    // Retrying cannot mend it: the owner recovers the store, once.
    ++metrics_.store_damaged;
    if (!damaged_seen_) {
      damaged_seen_ = true;
      damaged_(error.message);
    }
    return;
  }
  if (!failing_) {
    log_line(
        kError,
        "store: {}; nothing is lost: the logs are read again from the last commit once it answers",
        error.message);
    failing_ = true;
  }
}

void EventSink::keep(db::Progress progress) { kept_.push_back(std::move(progress)); }

Result<Ok> EventSink::retry_kept() {
  while (!kept_.empty()) {
    if (auto stored = commit(kept_.front()); !stored) return stored;
    kept_.pop_front();
  }
  return Ok{};
}

std::chrono::milliseconds EventSink::next_retry_delay() {
  retry_delay_ = std::clamp(retry_delay_ * 2, std::chrono::milliseconds(250),
                            std::chrono::milliseconds(30000));
  return retry_delay_;
}

db::EventRow event_row(const parsers::OomEvent& event, const std::vector<triage::Fix>& fixes,
                       const std::string& model_family) {
  db::EventRow row;
  row.offset = event.offset;
  row.model_family = model_family;
  row.kind = parsers::to_string(event.kind);
  row.phase = parsers::to_string(event.phase);
  row.step = event.step;
  row.recovered = event.recovered;
  row.event_json = parsers::encode_event_text(event);
  row.fixes_json = triage::encode_fixes_text(fixes);
  row.revision = event.revision;
  return row;
}

std::string event_journal_text(const std::string& job, const std::string& path,
                               const parsers::OomEvent& event,
                               const std::vector<triage::Fix>& fixes) {
  return fmt::format("job {}: {}{} OOM{} in {}{} ({}:{}){}", job,
                     event.revision > 0 ? "amended: " : "", parsers::to_string(event.kind),
                     event.recovered ? " (recovered)" : "", parsers::to_string(event.phase),
                     event.step ? " at " + step_text(event.step, event.total_steps) : "", path,
                     event.line, fixes.empty() ? "" : "; top fix: " + fixes.front().id);
}

}  // namespace oomtriage::daemon
