// daemon/service/daemon_live.cc: each running job's live state and its stalls (Daemon,
// daemon_loop.h). Once a second the logs that grew have their live state stored (the training
// bar's step, rate and loss, the phase, the time of the last write, the last line) in one
// transaction; a running job whose log has been silent past stalled_after_seconds (or 20 times
// its step time) is stalled: one TrainingStalled warning, stored and sent, and a resolve when the
// log grows again. Only a log that grew while this daemon followed it can stall; a stall stored
// before a restart is taken up again, so its resolve still goes out.
#include <fmt/format.h>

#include <chrono>

#include "daemon/alerts/alert_payload.h"
#include "daemon/common/clock.h"
#include "daemon/common/human_units.h"
#include "daemon/common/journal_log.h"
#include "daemon/service/daemon_loop.h"
#include "daemon/service/live_state.h"
#include "daemon/service/store_failures.h"

namespace oomtriage::daemon {
namespace {

constexpr auto kLiveInterval = std::chrono::seconds(1);

bool running(Tracked& file) {
  return file.storable_outcome().value_or(parsers::Outcome::kRunning) == parsers::Outcome::kRunning;
}

AlertContent stall_alert(const Tracked& file, const db::LiveState& live, int64_t since, int64_t now,
                         bool resolved) {
  AlertContent alert;
  alert.event_id = file.job.run_id;
  alert.job = valid_utf8(file.job.name);
  alert.trainer = parsers::to_string(file.follower->analyzer().trainer());
  alert.model_family =
      file.job.config ? std::string(parsers::to_string(file.job.config->family)) : "unknown";
  alert.log_path = valid_utf8(file.path());
  alert.phase = live.phase.empty() ? "unknown" : live.phase;
  alert.step = live.step ? std::to_string(*live.step) : "unknown";
  if (live.step && live.total_steps) alert.step += " of " + std::to_string(*live.total_steps);
  alert.message = resolved
                      ? "The log grows again after " + duration_words(now - since) + " of silence."
                      : "Last line: " + live.last_line;
  alert.starts_at = utc_time(since);
  if (resolved) alert.ends_at = utc_time(now);
  alert.stalled = AlertContent::Stall{since, duration_words(now - since), live.last_line, resolved};
  return alert;
}

}  // namespace

void Daemon::arm_live() {
  if (live_armed_) return;
  live_armed_ = true;
  live_timer_->expires_after(kLiveInterval);
  live_timer_->async_wait([this](const boost::system::error_code& ec) {
    live_armed_ = false;
    if (ec) return;
    keep_identity();  // the files found since (their events already kept it)
    write_live();
  });
}

void Daemon::write_live() {
  const auto now = clock_.now();
  const int64_t wall = clock_.unix_now();
  std::vector<std::pair<int64_t, db::LiveState>> batch;
  bool watching = false;
  for (auto& [path, entry] : logs_.by_path()) {
    Tracked& file = *entry;
    if (file.job.run_id == 0) continue;
    if (!file.live_loaded) {
      // A stall stored before a restart: taken up again, so that its resolve goes out.
      file.live_loaded = true;
      auto stored = store_.live_of_run(file.job.run_id);
      count_store_failure(metrics_, "read_live_state", stored);
      if (stored && *stored && (*stored)->stalled_since) {
        file.stalled_since = (*stored)->stalled_since;
        file.grew_here = true;
        ++metrics_.stalled_jobs[file.job.name];
      }
    }
    const auto state = [&] {
      const int fd = file.follower->is_open() ? file.follower->fd() : -1;
      db::LiveState live = live_state_of(file.analyzer().live(), read_log_tail(fd, file.path()));
      live.stalled_since = file.stalled_since;
      return live;
    };
    if (file.live_dirty) {
      file.live_dirty = false;
      db::LiveState live = state();
      if (file.stalled_since) {
        unstall(file);
        live.stalled_since.reset();
      }
      batch.emplace_back(file.job.run_id, std::move(live));
    } else if (config_.stalled_after_seconds > 0 && file.grew_here && !file.stalled_since &&
               running(file)) {
      const auto silent = std::chrono::duration_cast<std::chrono::seconds>(now - file.last_growth);
      const auto after = stall_after(config_.stalled_after_seconds,
                                     file.analyzer().live().vitals.steps_per_second);
      if (silent >= after) {
        db::LiveState live = state();
        stall(file, wall - silent.count(), live);
        batch.emplace_back(file.job.run_id, std::move(live));
      }
    }
    if (file.grew_here && !file.stalled_since && running(file)) watching = true;
  }
  if (!batch.empty()) {
    count_store_failure(metrics_, "record_live_state", store_.record_live(batch, wall));
  }
  if (watching && config_.stalled_after_seconds > 0) arm_live();
}

void Daemon::stall(Tracked& file, int64_t since, db::LiveState& live) {
  const int64_t wall = clock_.unix_now();
  file.stalled_since = since;
  live.stalled_since = since;
  ++metrics_.stalled_jobs[file.job.name];
  ++metrics_.stalled_warnings;
  const AlertContent alert = stall_alert(file, live, since, wall, /*resolved=*/false);
  log_line(kWarning, "{}: stalled: {} has not grown for {} (last line: {})", file.job.name,
           file.path(), alert.stalled->silent_for, live.last_line);
  db::WarningRow warning;
  warning.job_id = file.job.job_id;
  warning.run_id = file.job.run_id;
  warning.kind = "stalled";
  warning.summary = fmt::format("{}; last line: {}", alert.title(), live.last_line);
  warning.created_at = wall;
  count_store_failure(metrics_, "record_warning", store_.record_warning(warning));
  if (dispatcher_) dispatcher_->send_once(alert);
}

void Daemon::unstall(Tracked& file) {
  const int64_t wall = clock_.unix_now();
  const int64_t since = *file.stalled_since;
  file.stalled_since.reset();
  if (auto it = metrics_.stalled_jobs.find(file.job.name); it != metrics_.stalled_jobs.end()) {
    if (--it->second == 0) metrics_.stalled_jobs.erase(it);
  }
  db::LiveState live;
  live.last_line =
      read_log_tail(file.follower->is_open() ? file.follower->fd() : -1, file.path()).last_line;
  const AlertContent alert = stall_alert(file, live, since, wall, /*resolved=*/true);
  log_line(kNotice, "{}: going on again after {} of silence", file.job.name,
           alert.stalled->silent_for);
  count_store_failure(metrics_, "resolve_warning",
                      store_.resolve_warnings(file.job.job_id, "stalled", wall));
  if (dispatcher_) dispatcher_->send_once(alert);
}

}  // namespace oomtriage::daemon
