// daemon/cli/run_command.cc: the attempt loop, the store rows of each attempt, the patched config
// copies and the resume check.
#include "daemon/cli/run_command.h"

#include <signal.h>
#include <sys/stat.h>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>

#include "daemon/cli/child_process.h"
#include "daemon/cli/heal_copies.h"
#include "daemon/cli/run_alerts.h"
#include "daemon/cli/trainer_command.h"
#include "daemon/cli/run_gpu.h"
#include "daemon/cli/run_preflight.h"
#include "daemon/alerts/near_oom_alert.h"
#include "daemon/common/clock.h"
#include "daemon/common/digest.h"
#include "daemon/common/exit_codes.h"
#include "daemon/common/user_file.h"
#include "daemon/render/json_output.h"
#include "daemon/service/event_sink.h"
#include "daemon/service/job_locator.h"
#include "db/store.h"
#include "parsers/bar_start.h"
#include "parsers/log_analyzer.h"
#include "parsers/trainer_table.h"
#include "triage/config_patch.h"
#include "triage/fix_codec.h"
#include "triage/heal_plan.h"
#include "triage/triage_job.h"

namespace oomtriage::daemon {
namespace {

namespace fs = std::filesystem;

void say(const std::string& message) { fmt::print(stderr, "oomtriage run: {}\n", message); }

// The spelling in argv of the file at `path` (the command may name it relatively).
std::optional<std::string> spelling_of(const std::vector<std::string>& argv, const fs::path& path) {
  std::error_code ec;
  const fs::path wanted = fs::weakly_canonical(path, ec);
  for (size_t i = 1; i < argv.size(); ++i) {
    std::string candidate = argv[i];
    if (const size_t eq = candidate.find('=');
        candidate.rfind("--", 0) == 0 && eq != std::string::npos) {
      candidate = candidate.substr(eq + 1);
    }
    if (!is_config_name(candidate)) continue;
    if (fs::weakly_canonical(candidate, ec) == wanted) return candidate;
  }
  return std::nullopt;
}

// The trainer's newest saved state (its checkpoint pattern, parsers/trainer_table.h: kohya's
// newest "<name>-state" folder, HF Trainer's highest "checkpoint-N") in the folder its command
// names.
std::optional<std::string> newest_state(parsers::Trainer trainer,
                                        const std::vector<std::string>& argv) {
  using Newest = parsers::CheckpointPattern::Newest;
  const parsers::CheckpointPattern& pattern = parsers::trainer_row(trainer).checkpoint;
  if (pattern.folder_flag.empty()) return std::nullopt;
  const auto dir = triage::argument_value(argv, pattern.folder_flag);
  if (!dir) return std::nullopt;
  // "*-state": a name that ends so (and is more than that); "checkpoint-*": one that starts so.
  const bool suffix = pattern.glob.starts_with('*');
  const std::string_view fixed =
      suffix ? pattern.glob.substr(1) : pattern.glob.substr(0, pattern.glob.size() - 1);
  std::error_code ec;
  std::optional<fs::path> best;
  fs::file_time_type best_time{};
  int64_t best_number = -1;
  for (const auto& entry : fs::directory_iterator(*dir, ec)) {
    if (!entry.is_directory(ec)) continue;
    const std::string name = entry.path().filename().string();
    const bool matches =
        suffix ? name.size() > fixed.size() && name.ends_with(fixed) : name.starts_with(fixed);
    if (!matches) continue;
    if (pattern.newest == Newest::kByTime) {
      const auto time = entry.last_write_time(ec);
      if (!best || time > best_time) {
        best = entry.path();
        best_time = time;
      }
    } else {
      const int64_t number = std::strtoll(name.c_str() + fixed.size(), nullptr, 10);
      if (number > best_number) {
        best = entry.path();
        best_number = number;
      }
    }
  }
  if (!best) return std::nullopt;
  return best->string();
}

struct RunIds {
  int64_t job_id = 0;
  int64_t run_id = 0;
};

// What one attempt wrote into the store; failures are said once, the run goes on.
class RunStore {
 public:
  RunStore(const std::string& path, std::vector<std::string> receivers)
      : receivers_(std::move(receivers)) {
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    if (auto opened = db::Store::open(path)) {
      store_ = std::move(*opened);
    } else {
      say(fmt::format("the store {} cannot be opened ({}); the runs are not recorded", path,
                      opened.error().message));
    }
  }

  std::optional<RunIds> record_attempt(const std::string& job, const parsers::LogAnalysis& analysis,
                                       const std::string& log_path, uint64_t end_offset,
                                       const JobLookup& lookup,
                                       const std::vector<triage::Fix>& fixes) {
    if (!store_) return std::nullopt;
    const int64_t now = unix_now();
    const std::string trainer(parsers::to_string(analysis.trainer));
    const std::string folder = fs::path(log_path).parent_path().string();
    auto job_id = store_->upsert_job(job, folder, trainer, folder, now);
    if (!job_id) return fail(job_id.error().message);
    std::optional<int64_t> snapshot;
    if (lookup.job && lookup.job->config_path && !lookup.config_text.empty()) {
      auto id =
          store_->add_config_snapshot(*job_id, *lookup.job->config_path,
                                      sha256_hex(lookup.config_text), lookup.config_text, now);
      if (id) snapshot = *id;
    }
    auto run_id = store_->start_run(*job_id, log_path, snapshot, now);
    if (!run_id) return fail(run_id.error().message);
    struct stat st {};
    if (::stat(log_path.c_str(), &st) != 0) return fail("cannot stat " + log_path);
    int64_t file_id = 0;
    if (auto found = store_->find_file(st.st_dev, st.st_ino); found && *found) {
      file_id = (*found)->id;
    } else {
      db::FileRow row;
      row.path = log_path;
      row.dev = st.st_dev;
      row.ino = st.st_ino;
      row.job_id = *job_id;
      row.run_id = *run_id;
      auto inserted = store_->insert_file(row, now);
      if (!inserted) return fail(inserted.error().message);
      file_id = *inserted;
    }
    db::Progress progress;
    progress.file_id = file_id;
    progress.job_id = *job_id;
    progress.run_id = *run_id;
    progress.snapshot_id = snapshot;
    progress.offset = end_offset;
    progress.analyzer_state = "{}";
    progress.outcome = std::string(parsers::to_string(analysis.outcome));
    progress.receivers = receivers_;
    const std::string family =
        lookup.config ? std::string(parsers::to_string(lookup.config->family)) : "unknown";
    for (const parsers::OomEvent& event : analysis.events) {
      progress.events.push_back(
          event_row(event, event.recovered ? std::vector<triage::Fix>{} : fixes, family));
    }
    if (auto committed = store_->commit_progress(progress, now); !committed) {
      return fail(committed.error().message);
    }
    return RunIds{*job_id, *run_id};
  }

  void record_gpu(const std::vector<db::GpuMemoryRow>& rows) {
    if (!store_) return;
    for (const db::GpuMemoryRow& row : rows) {
      if (auto recorded = store_->record_gpu_memory(row); !recorded) {
        fail(recorded.error().message);
        return;
      }
    }
  }

  void record_heal(const RunIds& ids, db::HealAttempt attempt) {
    if (!store_) return;
    attempt.run_id = ids.run_id;
    if (auto recorded = store_->record_heal_attempt(ids.job_id, attempt); !recorded) {
      fail(recorded.error().message);
    }
  }

  void record_fix(const std::string& log_path, uint64_t event_offset, const triage::Fix& fix,
                  const std::string& config_path, const std::string& before,
                  const std::string& after) {
    if (!store_) return;
    const db::AppliedFix record{
        log_path,
        event_offset,
        fix.id,
        config_path,
        sha256_hex(before),
        sha256_hex(after),
        triage::encode_fix(fix).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
        unix_now()};
    if (auto recorded = store_->record_applied_fix(record); !recorded) {
      fail(recorded.error().message);
    }
  }

 private:
  std::nullopt_t fail(const std::string& message) {
    if (!failed_) say("could not record the run in the store: " + message);
    failed_ = true;
    return std::nullopt;
  }

  std::unique_ptr<db::Store> store_;
  std::vector<std::string> receivers_;  // an outbox row per event and receiver
  bool failed_ = false;
};

std::string default_log_path(const std::string& store, const std::string& job) {
  char stamp[32];
  // Local time: the name is for the person who started the run.
  const std::time_t now = static_cast<std::time_t>(unix_now());
  std::tm local{};
  localtime_r(&now, &local);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  return (fs::path(store).parent_path() / "runs" / fmt::format("{}-{}.log", job, stamp)).string();
}

// Waits `delay`, or less when SIGINT or SIGTERM comes (returns false then).
bool wait_or_interrupted(std::chrono::seconds delay) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  const timespec timeout{static_cast<time_t>(delay.count()), 0};
  return ::sigtimedwait(&set, nullptr, &timeout) < 0;
}

// Where the run starts: the command line, the trainer, the config, the job's name and its log.
struct Launch {
  std::vector<std::string> argv;
  parsers::Trainer trainer = parsers::Trainer::kUnknown;
  std::optional<std::string> config;
  std::string job;
  std::string log_path;
};

Launch plan_launch(const RunOptions& options) {
  Launch launch;
  launch.argv = options.command;
  launch.trainer = options.trainer;
  launch.config = options.config ? options.config : config_in_command(launch.argv);
  // Stored and sent absolute: "job.yaml" means nothing in a report or a Slack message.
  if (launch.config) launch.config = fs::absolute(*launch.config).lexically_normal().string();
  if (options.heal) launch.argv = triage::prepare_first_attempt(launch.trainer, launch.argv);
  launch.job = options.job.value_or(launch.config ? fs::path(*launch.config).stem().string()
                                                  : fs::path(launch.argv[0]).stem().string());
  launch.log_path =
      fs::absolute(options.log.value_or(default_log_path(options.store, launch.job))).string();
  return launch;
}

// One attempt: what the child did and what was made of it. Never copied or moved: `triage`
// points into `analysis`.
struct Attempt {
  explicit Attempt(int n) : number(n) {}
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;

  int number;
  uint64_t base_offset = 0;  // where its output starts in the log
  int64_t base_line = 0;     // and the log's lines before it
  int64_t started_at = 0;
  ChildExit exit;
  std::optional<int64_t> resumed_at;  // the step its training bar started at
  bool did_not_resume = false;        // it started before the last save: it was stopped
  uint64_t end_offset = 0;
  std::optional<int64_t> saved_step;  // the step of the newest save its log named
  parsers::LogAnalysis analysis;      // offsets and lines in the whole log
  JobLookup lookup;
  triage::Triage triage;
  std::optional<RunIds> ids;      // its job and run in the store
  std::optional<AttemptGpu> gpu;  // its GPU memory, when NVML is there
  db::HealAttempt record;         // completed by Supervisor::finish()
  std::string outcome;            // the analysis's outcome in words
  int failed_code = 1;            // the exit code when the run ends with this attempt
};

// The attempt loop of one `oomtriage run`, one step per method, in the order run() calls them.
class Supervisor {
 public:
  Supervisor(const RunOptions& options, Launch launch, std::ofstream log)
      : options_(options),
        argv_(std::move(launch.argv)),
        trainer_(launch.trainer),
        config_(std::move(launch.config)),
        job_(std::move(launch.job)),
        log_path_(std::move(launch.log_path)),
        log_(std::move(log)),
        alerts_(options.alerts, options.store),
        store_(options.store, alerts_.receivers()),
        env_{{"PYTHONUNBUFFERED", "1"}, {"COLUMNS", "4096"}},
        backoff_(options.backoff),
        color_(color_enabled(options.color)) {}

  int run();

 private:
  std::optional<int> run_child(Attempt& a);
  void triage_and_record(Attempt& a);
  std::optional<int> end_without_healing(Attempt& a);
  std::optional<int> apply_fix(Attempt& a, const triage::Fix& fix);
  std::optional<int> patch_config_files(Attempt& a, const triage::Fix& fix,
                                        uint64_t incident_offset);
  bool wait_for_next_attempt(const Attempt& a, const triage::Fix& fix);
  std::optional<int> follow_user_edits(Attempt& a);
  void finish(Attempt& a, const std::string& outcome, const std::string& verdict);
  int give_up(Attempt& a, const std::string& verdict, const std::string& message);
  std::string attempt_suffix(const Attempt& a) const;

  const RunOptions& options_;
  std::vector<std::string> argv_;  // the next attempt's command line
  parsers::Trainer trainer_;
  std::optional<std::string> config_;
  std::string job_;
  const std::string log_path_;
  std::ofstream log_;
  RunAlerts alerts_;
  RunStore store_;
  std::map<std::string, std::string> env_;
  std::vector<std::string> tried_;
  HealCopies copies_;           // the patched copies this run made, and the user's files behind
  std::string started_with_;    // the bytes of the config the first attempt was started with
  std::string applied_fix_;     // the fix applied before the coming attempt
  std::string applied_change_;  // and its changes in words
  int64_t lines_written_ = 0;
  std::optional<int64_t> expected_step_;  // where the next attempt must resume
  std::chrono::seconds backoff_;
  const bool color_;
  // NVML, opened once for every attempt; none without it (then `run` says nothing of it: the
  // trainer's output is what its terminal is for, and the daemon logs the missing library).
  // Opened on its own thread: a wedged driver holds neither the launch nor the pass-through.
  std::unique_ptr<GpuSampleWorker> nvml_;
  GpuHealth gpu_health_{[](const std::string& line) { say(line); }};
};

int Supervisor::run() {
  warn_before_launch(options_, config_, job_, log_path_, alerts_);  // never blocks the launch
  if (options_.alerts.gpu_sample_ms > 0) {
    nvml_ = std::make_unique<GpuSampleWorker>();
  }
  for (int number = 1;; ++number) {
    Attempt attempt(number);
    if (const std::optional<int> code = run_child(attempt)) return *code;
    triage_and_record(attempt);
    if (const std::optional<int> code = end_without_healing(attempt)) return *code;
    const triage::HealStep step =
        triage::next_heal_step(attempt.analysis, attempt.triage.fixes, tried_);
    if (step.fix == nullptr) {
      return give_up(attempt, "stopped: " + step.stop_reason,
                     fmt::format("not healed{}: {}", attempt_suffix(attempt), step.stop_reason));
    }
    if (number >= options_.max_attempts) {
      return give_up(
          attempt, "exhausted",
          fmt::format(
              "exhausted: {} attempt(s) spent ({}); the next fix would be {}", number,
              tried_.empty() ? "no fix applied" : fmt::format("{}", fmt::join(tried_, ", ")),
              step.fix->id));
    }
    if (const std::optional<int> code = apply_fix(attempt, *step.fix)) return *code;
    if (!wait_for_next_attempt(attempt, *step.fix)) return 130;
    if (const std::optional<int> code = follow_user_edits(attempt)) return *code;
  }
}

// Starts the child and passes its output through into the log, analysed as it comes. A restart
// whose training bar starts before the step of the last save is stopped. An exit code when the
// child cannot start.
std::optional<int> Supervisor::run_child(Attempt& a) {
  log_.seekp(0, std::ios::end);
  a.base_offset = static_cast<uint64_t>(log_.tellp());
  a.base_line = lines_written_;  // the attempt's lines follow the earlier ones
  parsers::AnalyzerOptions analyzer_options;
  analyzer_options.trainer = trainer_;
  parsers::LogAnalyzer analyzer(analyzer_options);
  a.started_at = unix_now();
  // What the user's config held when the job started: an edit while it runs is then told apart.
  if (a.number == 1 && config_) {
    if (auto bytes = read_user_file(*config_)) started_with_ = std::move(*bytes);
  }
  auto child = ChildProcess::start(argv_, env_);
  if (!child) {
    say(child.error().message);
    return exit_code_for(child.error());
  }
  if (nvml_ && nvml_->opened().error.empty()) {
    a.gpu.emplace(*nvml_, gpu_health_, child->pid(), options_.alerts.near_oom_share);
  }
  // The child leads its own process group: the GPU processes in it are the job's.
  const auto sample_gpu = [&] {
    if (!a.gpu) return;
    const auto warned =
        a.gpu->sample(unix_now(), analyzer.training_step(), analyzer.current_phase());
    if (!warned) return;
    NearOomRun about;
    about.run_id = a.started_at;  // the run is stored when the attempt ends: its start is its id
    about.warning = static_cast<int>(warned->warning.peak_bytes >> 20);
    about.job = job_;
    about.trainer = std::string(parsers::to_string(analyzer.trainer()));
    about.log_path = log_path_;
    about.gpu = warned->gpu;
    about.card_bytes = warned->card_bytes;
    about.total_steps = analyzer.training_total();
    about.starts_at = utc_time(unix_now());
    const triage::MemoryPressure near =
        triage::pressure_of_near_oom(warned->warning.phase, warned->warning.step,
                                     warned->warning.peak_bytes, warned->card_bytes);
    const auto fixes = triage::triage_pressure(near, analyzer.trainer(), analyzer.arguments(),
                                               triage::JobView{}, {std::nullopt, tried_});
    AlertContent alert = near_oom_alert(about, warned->warning, fixes);
    say("warning: " + near_oom_line(alert));
    alerts_.send_verdict(std::move(alert));
  };
  a.exit = child->pass_through(
      [&](int, std::string_view bytes) {
        log_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        lines_written_ += std::count(bytes.begin(), bytes.end(), '\n');
        log_.flush();
        const bool known = a.resumed_at.has_value();
        parsers::feed_until_bar_start(analyzer, bytes, a.resumed_at);
        if (known) return;
        // AI Toolkit's bar starts at the resumed step; one step of slack for a bar drawn
        // before its first update.
        if (a.resumed_at && expected_step_ && *a.resumed_at + 1 < *expected_step_) {
          a.did_not_resume = true;
          child->stop();
        }
      },
      options_.grace, std::chrono::milliseconds(std::max(options_.alerts.gpu_sample_ms, 0)),
      sample_gpu);
  log_.flush();
  a.end_offset = static_cast<uint64_t>(log_.tellp());
  a.saved_step = analyzer.last_saved_step();
  a.analysis = analyzer.finish();
  for (parsers::OomEvent& event : a.analysis.events) {
    event.offset += a.base_offset;
    event.line += a.base_line;
    if (event.phase_evidence) event.phase_evidence->line += a.base_line;
    if (event.step_evidence) event.step_evidence->line += a.base_line;
  }
  return std::nullopt;
}

// What the attempt's log says (the trainer and, at the first attempt, the job's name when they
// were not given), the job's files, the fixes for its incident; the attempt stored as a run with
// its events, and its heal_attempts row begun.
void Supervisor::triage_and_record(Attempt& a) {
  if (trainer_ == parsers::Trainer::kUnknown) trainer_ = a.analysis.trainer;
  if (!options_.job && a.analysis.job_name && a.number == 1) job_ = *a.analysis.job_name;

  std::optional<fs::path> explicit_config;
  if (config_) explicit_config = *config_;
  auto located = locate_job(log_path_, explicit_config, trainer_, a.analysis);
  a.lookup = located ? std::move(*located) : JobLookup{};
  const triage::JobView job_view{a.lookup.config ? &*a.lookup.config : nullptr,
                                 a.lookup.config_problem, &a.lookup.files};
  a.triage = triage::triage_log(a.analysis, job_view, {std::nullopt, tried_});
  a.ids =
      store_.record_attempt(job_, a.analysis, log_path_, a.end_offset, a.lookup, a.triage.fixes);
  if (a.ids && a.gpu) store_.record_gpu(a.gpu->rows(a.ids->run_id, unix_now()));
  alerts_.poke();
  a.record.attempt = a.number;
  a.record.max_attempts = options_.heal ? options_.max_attempts : 1;
  a.record.fix_id = applied_fix_;
  a.record.change = applied_change_;
  a.record.argv_json =
      nlohmann::json(argv_).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  a.record.resumed_step = a.resumed_at;
  a.record.started_at = a.started_at;
  a.outcome = std::string(parsers::to_string(a.analysis.outcome));
  a.failed_code = a.exit.exit_code == 0 ? 1 : a.exit.exit_code;
}

// The ends that need no fix: a signal, a restart that did not resume, a job that completed, a
// crash without --heal (its scan block printed first). nullopt: the attempt is to be healed.
std::optional<int> Supervisor::end_without_healing(Attempt& a) {
  if (a.exit.interrupted) {
    say(fmt::format("stopped by a signal{}; the child exited with {}", attempt_suffix(a),
                    a.exit.exit_code));
    finish(a, "interrupted", "stopped: by a signal");
    return a.exit.exit_code == 0 ? 130 : a.exit.exit_code;
  }
  if (a.did_not_resume) {
    say(
        fmt::format("attempt {} did not resume: its training bar started at step {}, the last "
                    "save was at step {}; stopped so that it does not overwrite its saves",
                    a.number, a.resumed_at.value_or(0), expected_step_.value_or(0)));
    finish(a, "did_not_resume",
           fmt::format("stopped: restarted at step {}, not at its save at {}",
                       a.resumed_at.value_or(0), expected_step_.value_or(0)));
    return a.exit.exit_code == 0 ? 1 : a.exit.exit_code;
  }
  const bool completed =
      a.exit.exit_code == 0 && a.analysis.outcome != parsers::Outcome::kCrashedOom;
  if (completed) {
    if (a.number > 1) {
      say(fmt::format("healed: the job completed at attempt {}/{} after {}", a.number,
                      options_.max_attempts, fmt::join(tried_, ", ")));
    }
    finish(a, a.outcome, a.number > 1 ? "healed" : "");
    return 0;
  }
  ScannedLog scanned;
  scanned.path = log_path_;
  scanned.analysis = a.analysis;
  scanned.job = a.lookup.job;
  scanned.fixes = a.triage.fixes;
  fmt::print(stderr, "{}", render_scan_text(scanned, color_));
  if (!options_.heal) {
    finish(a, a.outcome, "");
    return a.exit.exit_code;
  }
  return std::nullopt;
}

// The fix, in the trainer's own channel (its config files, its flags, its environment), with
// the trainer's resume option; the attempt's row finished. An exit code when it cannot be done.
std::optional<int> Supervisor::apply_fix(Attempt& a, const triage::Fix& fix) {
  const uint64_t incident_offset = a.triage.incident ? a.triage.incident->offset : a.base_offset;
  if (const std::optional<int> code = patch_config_files(a, fix, incident_offset)) return code;
  argv_ = triage::apply_argument_changes(argv_, fix.changes);
  for (const auto& change : fix.changes) {
    if (change.kind != parsers::TargetKind::kEnv) continue;
    std::string name = change.path;
    if (name.rfind("env.", 0) == 0) name = name.substr(4);
    env_[name] =
        change.to.is_string() ? change.to.get<std::string>() : triage::value_text(change.to);
  }
  if (!fix.changes_config()) store_.record_fix(log_path_, incident_offset, fix, "", "", "");
  const triage::ResumeArguments resume =
      triage::with_resume(trainer_, argv_, newest_state(trainer_, argv_));
  if (!resume.missing.empty()) {
    return give_up(a, "stopped: " + resume.missing,
                   fmt::format("not healed: cannot resume the job: {}", resume.missing));
  }
  argv_ = resume.argv;
  tried_.push_back(fix.id);
  finish(a, a.outcome, "");
  applied_fix_ = fix.id;
  applied_change_ = fmt::format("{}: {}", fix.title, triage::describe_changes(fix));
  if (a.saved_step) expected_step_ = a.saved_step;  // else the save before still is the newest
  return std::nullopt;
}

// A patched copy of each config file the fix edits (a new file: daemon/cli/heal_copies.h), its
// diff printed, named in the command line instead of the original. An exit code when one cannot
// be patched or written.
std::optional<int> Supervisor::patch_config_files(Attempt& a, const triage::Fix& fix,
                                                  uint64_t incident_offset) {
  for (const parsers::NativeFile& file : a.lookup.files) {
    std::vector<triage::ConfigChange> mine;
    for (const auto& change : fix.changes) {
      const bool in_file = change.kind == parsers::TargetKind::kYaml ||
                           change.kind == parsers::TargetKind::kJson ||
                           change.kind == parsers::TargetKind::kToml;
      if (in_file && change.file == file.path) mine.push_back(change);
    }
    if (mine.empty()) continue;
    const auto patched = triage::patch_file(file.kind, file.text, mine);
    if (!patched) {
      return give_up(a, "stopped: the config cannot be patched",
                     fmt::format("not healed: {} cannot be patched for {}: {}", file.path, fix.id,
                                 patched.error().message));
    }
    const fs::path original(file.path);
    // Never the original, nor any file that was there before: a new file under a free name.
    const auto made = copies_.write(file, *patched, fix.id, mine, a.number + 1);
    if (!made) {
      return give_up(a, "stopped: cannot write a patched copy of " + file.path,
                     "not healed: " + made.error().message);
    }
    const fs::path copy(*made);
    fmt::print(stderr, "{}",
               triage::unified_diff(file.text, *patched, "a/" + file.path, "b/" + copy.string()));
    if (const auto spelled = spelling_of(argv_, original)) {
      argv_ = triage::replace_path_argument(argv_, *spelled, copy.string());
    }
    std::error_code ec;
    if (config_ && fs::weakly_canonical(*config_, ec) == fs::weakly_canonical(original, ec)) {
      if (a.number == 1 && !started_with_.empty() && file.text != started_with_) {
        say(fmt::format("{} changed during attempt 1: attempt 2 uses your edit with {} applied",
                        shown_path(file.path), fix.id));
      }
      config_ = copy.string();
    }
    store_.record_fix(log_path_, incident_offset, fix, file.path, file.text, *patched);
  }
  return std::nullopt;
}

// Says what the next attempt runs and waits the backoff (doubled for the one after, at most
// 5 min). False when a signal came first.
bool Supervisor::wait_for_next_attempt(const Attempt& a, const triage::Fix& fix) {
  say(fmt::format(
      "attempt {}/{} in {} s: {} ({}){}; command: {}", a.number + 1, options_.max_attempts,
      backoff_.count(), fix.title, triage::describe_changes(fix),
      expected_step_ ? fmt::format(", resuming from the save at step {}", *expected_step_) : "",
      fmt::join(argv_, " ")));
  if (!wait_or_interrupted(backoff_)) {
    say("stopped by a signal before the next attempt");
    return false;
  }
  backoff_ = std::min(std::chrono::seconds(300), backoff_ * 2);
  return true;
}

// After the back-off: a user's config edited since its copy was made (copies_.follow_edits())
// gives the next attempt a new copy, the user's edit with the run's fixes on top; one line says
// so. An edit that no longer parses stops the run (an exit code): it is not healed from a broken
// file, nor run from a copy that ignores the edit.
std::optional<int> Supervisor::follow_user_edits(Attempt& a) {
  const int next = a.number + 1;
  auto followed = copies_.follow_edits(next);
  if (!followed) {
    return give_up(a, "stopped: " + followed.error().message,
                   "not healed: " + followed.error().message);
  }
  for (const HealCopies::Followed& edit : *followed) {
    if (!edit.problem.empty()) {
      return give_up(a, "stopped: the edited config does not parse", followed_line(edit, next));
    }
    argv_ = triage::replace_path_argument(argv_, edit.stale_copy, edit.copy);
    if (config_ && *config_ == edit.stale_copy) config_ = edit.copy;
    say(fmt::format("{}; command: {}", followed_line(edit, next), fmt::join(argv_, " ")));
    fmt::print(
        stderr, "{}",
        triage::unified_diff(edit.edited, edit.text, "a/" + edit.original, "b/" + edit.copy));
  }
  return std::nullopt;
}

// Every way out of an attempt says how it ended, and the last one the verdict: its
// heal_attempts row, and for a healing run the verdict alert (none for a first attempt that
// completed).
void Supervisor::finish(Attempt& a, const std::string& outcome, const std::string& verdict) {
  a.record.outcome = outcome;
  a.record.verdict = verdict;
  a.record.ended_at = unix_now();
  if (a.ids) store_.record_heal(*a.ids, a.record);
  if (!options_.heal || verdict.empty() || (verdict == "healed" && a.number == 1)) return;
  AlertContent content;
  content.event_id = a.ids ? a.ids->run_id : 0;
  content.heal = verdict == "healed" ? "healed" : verdict == "exhausted" ? "exhausted" : "stopped";
  content.job = job_;
  content.trainer = std::string(parsers::to_string(trainer_));
  content.model_family =
      a.lookup.config ? std::string(parsers::to_string(a.lookup.config->family)) : "unknown";
  content.step = a.resumed_at ? std::to_string(*a.resumed_at) : "unknown";
  content.message =
      fmt::format("attempt {}/{}: {}; fixes applied: {}", a.number, options_.max_attempts, verdict,
                  tried_.empty() ? "none" : fmt::format("{}", fmt::join(tried_, ", ")));
  content.log_path = log_path_;
  alerts_.send_verdict(std::move(content));
}

// Ends the run: says why, records the verdict, returns the exit code.
int Supervisor::give_up(Attempt& a, const std::string& verdict, const std::string& message) {
  say(message);
  finish(a, a.outcome, verdict);
  return a.failed_code;
}

// " (attempt 2/3)" for a healing run, "" otherwise.
std::string Supervisor::attempt_suffix(const Attempt& a) const {
  return options_.heal ? fmt::format(" (attempt {}/{})", a.number, options_.max_attempts) : "";
}

}  // namespace

int run_supervised(const RunOptions& options) {
  if (options.command.empty()) {
    say("no command given (oomtriage run [options] -- COMMAND [ARG...])");
    return kExitBadInput;
  }
  take_over_signals();
  Launch launch = plan_launch(options);
  std::error_code ec;
  fs::create_directories(fs::path(launch.log_path).parent_path(), ec);
  std::ofstream log(launch.log_path, std::ios::binary | std::ios::app);
  if (!log) {
    say("cannot write " + launch.log_path);
    return kExitEnvironment;
  }
  Supervisor supervisor(options, std::move(launch), std::move(log));
  return supervisor.run();
}

}  // namespace oomtriage::daemon
