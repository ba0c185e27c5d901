// daemon/service/ui_healer.h
//
// Self-healing of AI Toolkit UI jobs, the daemon's opt-in `heal:` section. After a fatal OOM of
// a matching job the healer takes the next resume-safe fix (the same choice as `run --heal`),
// waits for the UI to mark the job failed, writes the fix into the job's config in the UI's
// database (not `.job_config.json`, which the worker rewrites at every start), queues the job
// again and sets its queue running. The UI's worker starts it within a second; the restart's
// first training step must be at the last save, or the job is stopped before it overwrites
// its saves. Each attempt is a row in the store's heal history, and the verdict (healed,
// exhausted, stopped) goes out as an alert. The UI is reached through its HTTP routes or its
// database (aitk_ui.h). Runs on the daemon's loop; never blocks it longer than the UI
// database's short busy timeout.
#pragma once

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "daemon/alerts/alert_payload.h"
#include "daemon/common/clock.h"
#include "daemon/common/daemon_config.h"
#include "daemon/service/aitk_ui.h"
#include "db/store.h"
#include "parsers/event.h"
#include "triage/fix.h"

namespace oomtriage::daemon {

// A run of a watched job that reached an end (its outcome changed to one while the daemon
// watched it).
struct RunEnded {
  std::string job;
  int64_t job_id = 0;
  int64_t run_id = 0;
  parsers::Outcome outcome = parsers::Outcome::kUnknown;
  std::optional<parsers::OomEvent> fatal;  // its fatal OOM, seen by this daemon
  std::vector<triage::Fix> fixes;          // ranked for it
  std::optional<int64_t> last_saved_step;  // the newest save the log named
  std::string trainer;
  std::string family;
  std::string log_path;
};

class UiHealer {
 public:
  using SendAlert = std::function<void(AlertContent)>;
  using Clock = std::chrono::steady_clock;

  // Its episodes wait on `clock`.
  UiHealer(boost::asio::io_context& io, db::Store& store, HealConfig config, SendAlert send,
           LoopClock& clock = real_clock());
  // A new `heal:` section (SIGHUP); a disabled one ends nothing under way, it starts nothing new.
  void set_config(HealConfig config);

  void run_ended(const RunEnded& run);
  // Whether a restart of `job` is awaited: its training bar's first step is wanted.
  bool awaits_step(const std::string& job) const;
  // The run's training bar is at `step` now; where it started is read from the head of its log.
  void training_step(const std::string& job, int64_t run_id, int64_t step,
                     const std::string& log_path);

 private:
  enum class State { kWaitingForFailure, kQueued, kRunning, kStopping };
  struct Episode {
    State state = State::kWaitingForFailure;
    int64_t job_id = 0;
    int attempt = 1;  // the attempt that crashed, then the one under way
    std::vector<std::string> tried;
    std::optional<triage::Fix> fix;  // applied before the attempt under way
    std::string change;              // its title and changes in words
    int64_t crashed_run_id = 0;
    int64_t run_id = 0;  // the attempt under way, once its log shows its first step
    std::optional<int64_t> expected_step;
    db::AitkJob ui_job;   // the UI's row, as re-queued
    bool asking = false;  // a question to the UI is under way
    Clock::time_point deadline;
    RunEnded last;  // for the alerts: trainer, family, log
  };

  bool matches(const std::string& job) const;
  bool resume_from_store(Episode& episode, const RunEnded& run);
  void crashed(Episode episode, const RunEnded& run);
  void poll();
  void poll_one(const std::string& job);
  void arm();
  void ui_answered(const std::string& job, Result<std::optional<db::AitkJob>> row);
  void requeue(const std::string& job, Episode& episode, const db::AitkJob& row);
  void requeued(const std::string& job, Result<bool> queued);
  // A UI that cannot be reached or refuses is logged once until its answer changes.
  void ui_trouble(const std::string& job, const Error& error);
  void record(const Episode& episode, int64_t run_id, const std::string& outcome,
              const std::string& verdict, std::optional<int64_t> resumed_step = std::nullopt);
  void let_go(const std::string& job, Episode& episode, const std::string& why);
  // Records the verdict, sends its alert and ends the episode.
  void conclude(std::string job, Episode& episode, int64_t run_id, const std::string& outcome,
                const std::string& verdict, const std::string& message);

  boost::asio::io_context& io_;
  db::Store& store_;
  HealConfig config_;
  SendAlert send_;
  LoopClock& clock_;
  std::unique_ptr<LoopTimer> timer_;
  bool armed_ = false;
  std::shared_ptr<AitkUi> ui_;
  std::string ui_error_;  // logged once until it changes
  std::map<std::string, Episode> episodes_;
};

}  // namespace oomtriage::daemon
