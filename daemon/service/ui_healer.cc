// daemon/service/ui_healer.cc: the healing episode of an AI Toolkit UI job, from its crash to
// the verdict.
#include "daemon/service/ui_healer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fnmatch.h>

#include <algorithm>
#include <fstream>

#include "daemon/common/clock.h"
#include "daemon/common/journal_log.h"
#include "parsers/bar_start.h"
#include "triage/config_patch.h"
#include "triage/heal_plan.h"

namespace oomtriage::daemon {
namespace {

constexpr auto kPollInterval = std::chrono::seconds(1);

bool is_end(parsers::Outcome outcome) {
  return outcome == parsers::Outcome::kCompleted || outcome == parsers::Outcome::kStopped ||
         outcome == parsers::Outcome::kCrashedOom || outcome == parsers::Outcome::kCrashedOther;
}

// The UI keeps the whole job config in one JSON document: only fixes whose every change is a
// config key can be written there (not an environment variable such as the allocator's).
bool fits_the_ui(const triage::Fix& fix) {
  return std::all_of(fix.changes.begin(), fix.changes.end(), [](const triage::ConfigChange& c) {
    return c.kind == parsers::TargetKind::kJson || c.kind == parsers::TargetKind::kYaml;
  });
}

// Where the training bar of the log at `path` started (its first frame), from the log's head.
std::optional<int64_t> bar_start(const std::string& path) {
  constexpr size_t kHeadLimit = 16 << 20;
  std::ifstream in(path, std::ios::binary);
  parsers::AnalyzerOptions options;
  options.trainer = parsers::Trainer::kAiToolkit;
  parsers::LogAnalyzer analyzer(options);
  std::optional<int64_t> start;
  std::vector<char> chunk(64 << 10);
  for (size_t read = 0; in && !start && read < kHeadLimit; read += chunk.size()) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    parsers::feed_until_bar_start(
        analyzer, std::string_view(chunk.data(), static_cast<size_t>(in.gcount())), start);
  }
  return start;
}

}  // namespace

UiHealer::UiHealer(boost::asio::io_context& io, db::Store& store, HealConfig config, SendAlert send,
                   LoopClock& clock)
    : io_(io), store_(store), send_(std::move(send)), clock_(clock), timer_(clock.timer(io)) {
  set_config(std::move(config));
}

bool UiHealer::matches(const std::string& job) const {
  if (config_.jobs.empty()) return true;
  return std::any_of(config_.jobs.begin(), config_.jobs.end(), [&](const std::string& glob) {
    return ::fnmatch(glob.c_str(), job.c_str(), 0) == 0;
  });
}

bool UiHealer::awaits_step(const std::string& job) const {
  const auto it = episodes_.find(job);
  return it != episodes_.end() && it->second.state == State::kQueued;
}

void UiHealer::run_ended(const RunEnded& run) {
  if (!is_end(run.outcome)) return;
  // The outcome turns as soon as the error line is read; the event follows once it settled.
  if (run.outcome == parsers::Outcome::kCrashedOom && !run.fatal) return;
  const auto it = episodes_.find(run.job);
  if (it != episodes_.end()) {
    Episode& episode = it->second;
    // The re-queued attempt ended before its training bar showed (an OOM while loading or
    // quantizing, a stop): this run is the attempt's.
    if (episode.state == State::kQueued && run.run_id != episode.crashed_run_id) {
      episode.state = State::kRunning;
      episode.run_id = run.run_id;
      record(episode, run.run_id, "running", "");
    }
    // Another run of the job ended meanwhile (a stale log finishing): not the attempt's.
    if (episode.state != State::kRunning || episode.run_id != run.run_id) return;
    episode.last = run;
    if (run.outcome == parsers::Outcome::kCompleted) {
      conclude(run.job, episode, run.run_id, "completed", "healed",
               fmt::format("the job completed at attempt {}/{} after {}", episode.attempt,
                           config_.max_attempts, fmt::join(episode.tried, ", ")));
      return;
    }
    if (run.outcome != parsers::Outcome::kCrashedOom || !run.fatal) {
      const std::string outcome(parsers::to_string(run.outcome));
      conclude(run.job, episode, run.run_id, outcome, "stopped: not an OOM",
               fmt::format("attempt {}/{} ended {}, not with an out-of-memory crash; not retried",
                           episode.attempt, config_.max_attempts, outcome));
      return;
    }
    Episode next = std::move(episode);
    episodes_.erase(it);
    crashed(std::move(next), run);
    return;
  }
  // A new episode starts with a fatal OOM this daemon saw happen, never with an old crash read
  // again at start.
  if (!config_.enabled() || run.outcome != parsers::Outcome::kCrashedOom || !run.fatal ||
      !matches(run.job)) {
    return;
  }
  Episode episode;
  episode.job_id = run.job_id;
  episode.attempt = 1;
  episode.last = run;
  if (!resume_from_store(episode, run)) return;
  if (episode.attempt == 1) record(episode, run.run_id, "crashed_oom", "");
  crashed(std::move(episode), run);
}

// The store remembers what a daemon before this one did: a run that already has its verdict is
// not healed again, and an episode under way when the daemon restarted goes on with its budget
// and the fixes it tried. False: nothing to do for this run.
bool UiHealer::resume_from_store(Episode& episode, const RunEnded& run) {
  auto story = store_.job_story_by_id(run.job_id);
  if (!story || !*story) return true;
  const std::vector<db::HealAttempt>& rows = (*story)->attempts;
  size_t chain = rows.size();  // the latest episode's first row
  for (size_t i = rows.size(); i-- > 0;) {
    if (rows[i].run_id == run.run_id && !rows[i].verdict.empty()) return false;
    if (rows[i].attempt == 1) {
      chain = i;
      break;
    }
  }
  if (chain == rows.size() || !rows.back().verdict.empty()) return true;  // none open
  for (size_t i = chain; i < rows.size(); ++i) {
    if (!rows[i].fix_id.empty()) episode.tried.push_back(rows[i].fix_id);
    episode.attempt = std::max(episode.attempt, rows[i].attempt);
    if (rows[i].resumed_step) episode.expected_step = rows[i].resumed_step;
  }
  if (!rows.empty() && rows.back().run_id != run.run_id) {
    episode.attempt = std::min(episode.attempt + 1, config_.max_attempts);
  }
  if (episode.attempt > 1 && !episode.tried.empty()) {
    // The fix the crashed attempt carried, for its row.
    for (const triage::Fix& fix : run.fixes) {
      if (fix.id == episode.tried.back()) episode.fix = fix;
    }
  }
  log_line(kNotice, "heal {}: goes on with attempt {}/{} from the store (tried: {})", run.job,
           episode.attempt, config_.max_attempts, fmt::join(episode.tried, ", "));
  return true;
}

void UiHealer::crashed(Episode episode, const RunEnded& run) {
  episode.last = run;
  episode.crashed_run_id = run.run_id;
  // A restart that crashed before its first save resumes from the save the one before it did.
  if (run.last_saved_step) episode.expected_step = run.last_saved_step;
  if (episode.attempt > 1) record(episode, run.run_id, "crashed_oom", "");
  if (episode.attempt >= config_.max_attempts) {
    conclude(
        run.job, episode, run.run_id, "crashed_oom", "exhausted",
        fmt::format(
            "{} attempt(s) spent; fixes applied: {}", episode.attempt,
            episode.tried.empty() ? "none" : fmt::format("{}", fmt::join(episode.tried, ", "))));
    return;
  }
  std::vector<triage::Fix> usable;
  for (const triage::Fix& fix : run.fixes) {
    const bool allowed =
        config_.fixes.empty() ||
        std::find(config_.fixes.begin(), config_.fixes.end(), fix.id) != config_.fixes.end();
    if (allowed && fits_the_ui(fix)) usable.push_back(fix);
  }
  parsers::LogAnalysis analysis;
  analysis.outcome = run.outcome;
  analysis.events = {*run.fatal};
  const triage::HealStep step = triage::next_heal_step(analysis, usable, episode.tried);
  if (step.fix == nullptr) {
    conclude(run.job, episode, run.run_id, "crashed_oom", "stopped: " + step.stop_reason,
             "not healed: " + step.stop_reason);
    return;
  }
  episode.fix = *step.fix;
  episode.change = fmt::format("{}: {}", step.fix->title, triage::describe_changes(*step.fix));
  episode.state = State::kWaitingForFailure;
  episode.deadline = clock_.now() + std::chrono::seconds(config_.wait_seconds);
  log_line(kNotice, "heal {}: attempt {}/{} crashed; next: {} once the UI marks it failed", run.job,
           episode.attempt, config_.max_attempts, episode.change);
  episodes_[run.job] = std::move(episode);
  arm();
}

void UiHealer::arm() {
  if (armed_) return;
  armed_ = true;
  timer_->expires_after(kPollInterval);
  timer_->async_wait([this](const boost::system::error_code& ec) {
    armed_ = false;
    if (ec) return;
    poll();
  });
}

void UiHealer::set_config(HealConfig config) {
  config_ = std::move(config);
  // Disabled, the episodes under way keep the UI they were using (a restart that did not resume
  // must still be stopped); a request under way keeps the old one until it answers.
  if (config_.enabled() || !ui_) ui_ = std::make_shared<AitkUi>(io_, config_);
}

void UiHealer::ui_trouble(const std::string& job, const Error& error) {
  if (error.message == ui_error_) return;
  ui_error_ = error.message;
  log_line(kWarning, "heal {}: {}; asking again", job, error.message);
}

void UiHealer::poll() {
  for (auto& [job, episode] : episodes_) {
    if (episode.state != State::kWaitingForFailure || episode.asking) continue;
    episode.asking = true;
    ui_->job_named(job, [this, job = job](Result<std::optional<db::AitkJob>> row) {
      ui_answered(job, std::move(row));
    });
  }
  if (std::any_of(episodes_.begin(), episodes_.end(), [](const auto& entry) {
        return entry.second.state == State::kWaitingForFailure;
      })) {
    arm();
  }
}

// One job waiting for the UI to mark it failed: re-queued once it is, left alone when someone
// else acted on it, given up at the deadline.
void UiHealer::ui_answered(const std::string& job, Result<std::optional<db::AitkJob>> row) {
  const auto it = episodes_.find(job);
  if (it == episodes_.end() || it->second.state != State::kWaitingForFailure) return;
  Episode& episode = it->second;
  episode.asking = false;
  std::string status;
  if (!row) {
    ui_trouble(job, row.error());
  } else if (!*row) {
    let_go(job, episode,
           fmt::format("no job of that name in {}: not a UI job", ui_->last_channel()));
    return;
  } else if ((*row)->status == "error") {
    ui_error_.clear();
    requeue(job, episode, **row);
    return;
  } else {
    ui_error_.clear();
    status = (*row)->status;
  }
  if (status == "queued" || status == "completed" || status == "stopped") {
    // Someone acted on the job meanwhile: theirs is the last word.
    let_go(job, episode, fmt::format("the job is {} in the UI: someone acted on it", status));
    return;
  }
  if (clock_.now() < episode.deadline) return;
  const std::string why = status.empty() ? "AI Toolkit's UI could not be read"
                                         : fmt::format("the UI still shows the job {}", status);
  conclude(job, episode, episode.crashed_run_id, "crashed_oom", "stopped: " + why,
           fmt::format("not healed: {} {} s after its crash", why, config_.wait_seconds));
}

void UiHealer::requeue(const std::string& job, Episode& episode, const db::AitkJob& row) {
  std::vector<triage::ConfigChange> changes = episode.fix->changes;
  for (auto& change : changes) change.kind = parsers::TargetKind::kJson;
  const auto patched = triage::patch_json(row.job_config, changes);
  if (!patched) {
    conclude(job, episode, episode.crashed_run_id, "crashed_oom",
             "stopped: the config cannot be patched",
             fmt::format("not healed: the UI's config of {} cannot be patched for {}: {}", job,
                         episode.fix->id, patched.error().message));
    return;
  }
  const std::string info = fmt::format("Job queued (oomtriage: {}, attempt {}/{})", episode.fix->id,
                                       episode.attempt + 1, config_.max_attempts);
  episode.asking = true;
  episode.ui_job = row;
  ui_->requeue(row, *patched, info,
               [this, job](Result<bool> queued) { requeued(job, std::move(queued)); });
}

void UiHealer::requeued(const std::string& job, Result<bool> queued) {
  const auto it = episodes_.find(job);
  if (it == episodes_.end() || it->second.state != State::kWaitingForFailure) return;
  Episode& episode = it->second;
  episode.asking = false;
  if (!queued) {
    if (clock_.now() >= episode.deadline) {
      conclude(job, episode, episode.crashed_run_id, "crashed_oom",
               "stopped: the UI did not take the re-queue",
               fmt::format("not healed: the re-queue failed for {} s: {}", config_.wait_seconds,
                           queued.error().message));
      return;
    }
    ui_trouble(job, queued.error());
    arm();
    return;
  }
  if (!*queued) {
    let_go(job, episode, "the job left the error state before it was re-queued");
    return;
  }
  episode.attempt += 1;
  episode.tried.push_back(episode.fix->id);
  episode.state = State::kQueued;
  log_line(kNotice, "heal {}: attempt {}/{} queued through {} with {}{}", job, episode.attempt,
           config_.max_attempts, ui_->last_channel(), episode.change,
           episode.expected_step
               ? fmt::format(", to resume from the save at step {}", *episode.expected_step)
               : "");
}

void UiHealer::training_step(const std::string& job, int64_t run_id, int64_t step,
                             const std::string& log_path) {
  const auto it = episodes_.find(job);
  if (it == episodes_.end() || it->second.state != State::kQueued) return;
  Episode& episode = it->second;
  if (run_id == episode.crashed_run_id) return;
  episode.state = State::kRunning;
  episode.run_id = run_id;
  if (const auto start = bar_start(log_path)) step = *start;
  record(episode, run_id, "running", "", step);
  // AI Toolkit's bar starts at the resumed step; one step of slack for a bar drawn before its
  // first update.
  if (episode.expected_step && step + 1 < *episode.expected_step) {
    episode.state = State::kStopping;
    const std::string why = fmt::format("restarted at step {}, not at its save at step {}", step,
                                        *episode.expected_step);
    ui_->stop(episode.ui_job, "Stopped by oomtriage: " + why,
              [this, job, run_id, step](Result<bool> stopped) {
                const auto found = episodes_.find(job);
                if (found == episodes_.end() || found->second.state != State::kStopping) return;
                Episode& stopping = found->second;
                const std::string how = stopped && *stopped ? "stopped it" : "could NOT stop it";
                if (!stopped) log_line(kWarning, "heal {}: {}", job, stopped.error().message);
                conclude(job, stopping, run_id, "did_not_resume", "stopped: did not resume",
                         fmt::format("attempt {} did not resume: its training started at step "
                                     "{}, its last save was at step {}; oomtriage {} before it "
                                     "overwrites its saves",
                                     stopping.attempt, step, *stopping.expected_step, how));
              });
  }
}

void UiHealer::record(const Episode& episode, int64_t run_id, const std::string& outcome,
                      const std::string& verdict, std::optional<int64_t> resumed_step) {
  db::HealAttempt row;
  row.run_id = run_id;
  row.attempt = episode.attempt;
  row.max_attempts = config_.max_attempts;
  if (episode.attempt > 1 && episode.fix) {
    row.fix_id = episode.fix->id;
    row.change = episode.change;
  }
  row.argv_json = "[]";  // the UI starts the trainer: no command line of ours
  row.outcome = outcome;
  row.verdict = verdict;
  row.started_at = clock_.unix_now();
  row.ended_at = row.started_at;
  if (resumed_step) {
    row.resumed_step = resumed_step;
  } else if (auto story = store_.job_story_by_id(episode.last.job_id); story && *story) {
    // An update keeps the step the run resumed at.
    for (const db::HealAttempt& known : (*story)->attempts) {
      if (known.run_id == run_id) {
        row.resumed_step = known.resumed_step;
        row.started_at = known.started_at;
      }
    }
  }
  if (auto written = store_.record_heal_attempt(episode.job_id, row); !written) {
    log_line(kWarning, "heal {}: store: {}", episode.last.job, written.error().message);
  }
}

// Not this healer's to heal (any more): the episode is closed in the store, without an alert, so
// that a later crash starts a new one.
void UiHealer::let_go(const std::string& job, Episode& episode, const std::string& why) {
  log_line(kNotice, "heal {}: {}: left alone", job, why);
  record(episode, episode.crashed_run_id, "crashed_oom", "left alone: " + why);
  episodes_.erase(job);
}

void UiHealer::conclude(std::string job, Episode& episode, int64_t run_id,
                        const std::string& outcome, const std::string& verdict,
                        const std::string& message) {
  record(episode, run_id, outcome, verdict);
  log_line(verdict == "healed" ? kNotice : kWarning, "heal {}: {}: {}", job,
           verdict.substr(0, verdict.find(':')), message);
  const bool healed = verdict == "healed";
  if (!(healed && episode.attempt == 1)) {
    AlertContent content;
    content.event_id = run_id;
    content.heal = healed ? "healed" : verdict == "exhausted" ? "exhausted" : "stopped";
    content.job = job;
    content.trainer = episode.last.trainer;
    content.model_family = episode.last.family;
    content.step = "unknown";
    content.message =
        fmt::format("attempt {}/{}: {}", episode.attempt, config_.max_attempts, message);
    content.log_path = episode.last.log_path;
    content.starts_at = utc_time(clock_.unix_now());
    send_(std::move(content));
  }
  episodes_.erase(job);
}

}  // namespace oomtriage::daemon
