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
#include "daemon/cli/run_alerts.h"
#include "daemon/common/digest.h"
#include "daemon/common/exit_codes.h"
#include "daemon/render/json_output.h"
#include "daemon/service/event_sink.h"
#include "daemon/service/job_locator.h"
#include "db/store.h"
#include "parsers/bar_start.h"
#include "parsers/log_analyzer.h"
#include "triage/config_patch.h"
#include "triage/heal_plan.h"
#include "triage/triage_job.h"

namespace oomtriage::daemon {
namespace {

namespace fs = std::filesystem;

void say(const std::string& message) { fmt::print(stderr, "oomtriage run: {}\n", message); }

int64_t unix_now() { return static_cast<int64_t>(std::time(nullptr)); }

bool is_config_name(const fs::path& path) {
  const std::string ext = path.extension().string();
  return ext == ".yaml" || ext == ".yml" || ext == ".json" || ext == ".toml";
}

// The config the command names: --config, else the first argument that is a config file
// ("run.py job.yaml", "--config_file x.toml", "--config=x.json").
std::optional<std::string> config_in_command(const std::vector<std::string>& argv) {
  for (size_t i = 1; i < argv.size(); ++i) {
    std::string candidate = argv[i];
    if (const size_t eq = candidate.find('=');
        candidate.rfind("--", 0) == 0 && eq != std::string::npos) {
      candidate = candidate.substr(eq + 1);
    }
    std::error_code ec;
    if (is_config_name(candidate) && fs::is_regular_file(candidate, ec)) return candidate;
  }
  return std::nullopt;
}

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

// kohya's newest "<name>-state" folder, or HF Trainer's highest "checkpoint-N", in the output
// folder the command names.
std::optional<std::string> newest_state(parsers::Trainer trainer,
                                        const std::vector<std::string>& argv) {
  const auto dir = triage::argument_value(argv, "--output_dir");
  if (!dir) return std::nullopt;
  std::error_code ec;
  std::optional<fs::path> best;
  fs::file_time_type best_time{};
  int64_t best_step = -1;
  for (const auto& entry : fs::directory_iterator(*dir, ec)) {
    if (!entry.is_directory(ec)) continue;
    const std::string name = entry.path().filename().string();
    if (trainer == parsers::Trainer::kSdScripts && name.size() > 6 &&
        name.compare(name.size() - 6, 6, "-state") == 0) {
      const auto time = entry.last_write_time(ec);
      if (!best || time > best_time) {
        best = entry.path();
        best_time = time;
      }
    } else if (trainer == parsers::Trainer::kTransformers && name.rfind("checkpoint-", 0) == 0) {
      const int64_t step = std::strtoll(name.c_str() + 11, nullptr, 10);
      if (step > best_step) {
        best = entry.path();
        best_step = step;
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
        fix_to_json(fix).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
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
  const std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
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

}  // namespace

int run_supervised(const RunOptions& options) {
  if (options.command.empty()) {
    say("no command given (oomtriage run [options] -- COMMAND [ARG...])");
    return kExitBadInput;
  }
  take_over_signals();
  std::vector<std::string> argv = options.command;
  parsers::Trainer trainer = options.trainer;
  std::optional<std::string> config = options.config ? options.config : config_in_command(argv);
  // Stored and sent absolute: "job.yaml" means nothing in a report or a Slack message.
  if (config) config = fs::absolute(*config).lexically_normal().string();
  if (options.heal) argv = triage::prepare_first_attempt(trainer, argv);
  std::string job = options.job.value_or(config ? fs::path(*config).stem().string()
                                                : fs::path(argv[0]).stem().string());
  const std::string log_path =
      fs::absolute(options.log.value_or(default_log_path(options.store, job))).string();
  std::error_code ec;
  fs::create_directories(fs::path(log_path).parent_path(), ec);
  std::ofstream log(log_path, std::ios::binary | std::ios::app);
  if (!log) {
    say("cannot write " + log_path);
    return kExitEnvironment;
  }
  RunAlerts alerts(options.alerts, options.store);
  RunStore store(options.store, alerts.receivers());
  const std::map<std::string, std::string> base_env = {{"PYTHONUNBUFFERED", "1"},
                                                       {"COLUMNS", "4096"}};
  std::map<std::string, std::string> env = base_env;
  std::vector<std::string> tried;
  std::string applied_fix;     // the fix applied before the coming attempt
  std::string applied_change;  // and its changes in words
  int64_t lines_written = 0;
  std::optional<int64_t> expected_step;  // where the next attempt must resume
  std::chrono::seconds backoff = options.backoff;
  const bool color = color_enabled(options.color);

  for (int attempt = 1;; ++attempt) {
    log.seekp(0, std::ios::end);
    const uint64_t base_offset = static_cast<uint64_t>(log.tellp());
    const int64_t base_line = lines_written;  // the attempt's lines follow the earlier ones
    parsers::AnalyzerOptions analyzer_options;
    analyzer_options.trainer = trainer;
    parsers::LogAnalyzer analyzer(analyzer_options);
    const int64_t started_at = unix_now();
    auto child = ChildProcess::start(argv, env);
    if (!child) {
      say(child.error().message);
      return exit_code_for(child.error());
    }
    std::optional<int64_t> resumed_at;
    bool did_not_resume = false;
    const ChildExit exit = child->pass_through(
        [&](int, std::string_view bytes) {
          log.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
          lines_written += std::count(bytes.begin(), bytes.end(), '\n');
          log.flush();
          const bool known = resumed_at.has_value();
          parsers::feed_until_bar_start(analyzer, bytes, resumed_at);
          if (known) return;
          // AI Toolkit's bar starts at the resumed step; one step of slack for a bar drawn
          // before its first update.
          if (resumed_at && expected_step && *resumed_at + 1 < *expected_step) {
            did_not_resume = true;
            child->stop();
          }
        },
        options.grace);
    log.flush();
    const uint64_t end_offset = static_cast<uint64_t>(log.tellp());
    const std::optional<int64_t> saved_step = analyzer.last_saved_step();
    parsers::LogAnalysis analysis = analyzer.finish();
    for (parsers::OomEvent& event : analysis.events) {
      event.offset += base_offset;
      event.line += base_line;
      if (event.phase_evidence) event.phase_evidence->line += base_line;
      if (event.step_evidence) event.step_evidence->line += base_line;
    }
    if (trainer == parsers::Trainer::kUnknown) trainer = analysis.trainer;
    if (!options.job && analysis.job_name && attempt == 1) job = *analysis.job_name;

    std::optional<fs::path> explicit_config;
    if (config) explicit_config = *config;
    auto located = locate_job(log_path, explicit_config, trainer, analysis);
    JobLookup lookup = located ? std::move(*located) : JobLookup{};
    const triage::JobView job_view{lookup.config ? &*lookup.config : nullptr, lookup.config_problem,
                                   &lookup.files};
    const triage::Triage triage = triage::triage_log(analysis, job_view, {std::nullopt, tried});
    const std::vector<triage::Fix>& fixes = triage.fixes;
    const std::optional<RunIds> ids =
        store.record_attempt(job, analysis, log_path, end_offset, lookup, fixes);
    alerts.poke();
    db::HealAttempt record;
    record.attempt = attempt;
    record.max_attempts = options.heal ? options.max_attempts : 1;
    record.fix_id = applied_fix;
    record.change = applied_change;
    record.argv_json =
        nlohmann::json(argv).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    record.resumed_step = resumed_at;
    record.started_at = started_at;
    // Every way out of this attempt says how it ended, and the last one the verdict.
    const auto finish = [&](const std::string& outcome, const std::string& verdict) {
      record.outcome = outcome;
      record.verdict = verdict;
      record.ended_at = unix_now();
      if (ids) store.record_heal(*ids, record);
      if (!options.heal || verdict.empty() || (verdict == "healed" && attempt == 1)) return;
      AlertContent content;
      content.event_id = ids ? ids->run_id : 0;
      content.heal = verdict == "healed"      ? "healed"
                     : verdict == "exhausted" ? "exhausted"
                                              : "stopped";
      content.job = job;
      content.trainer = std::string(parsers::to_string(trainer));
      content.model_family =
          lookup.config ? std::string(parsers::to_string(lookup.config->family)) : "unknown";
      content.step = resumed_at ? std::to_string(*resumed_at) : "unknown";
      content.message =
          fmt::format("attempt {}/{}: {}; fixes applied: {}", attempt, options.max_attempts,
                      verdict, tried.empty() ? "none" : fmt::format("{}", fmt::join(tried, ", ")));
      content.log_path = log_path;
      alerts.send_verdict(std::move(content));
    };
    const std::string outcome(parsers::to_string(analysis.outcome));
    const int failed_code = exit.exit_code == 0 ? 1 : exit.exit_code;
    // Ends the run: says why, records the verdict, returns the exit code.
    const auto give_up = [&](const std::string& verdict, const std::string& message) {
      say(message);
      finish(outcome, verdict);
      return failed_code;
    };

    ScannedLog scanned;
    scanned.path = log_path;
    scanned.analysis = analysis;
    scanned.job = lookup.job;
    scanned.fixes = fixes;
    const std::string attempt_text =
        options.heal ? fmt::format(" (attempt {}/{})", attempt, options.max_attempts) : "";
    if (exit.interrupted) {
      say(fmt::format("stopped by a signal{}; the child exited with {}", attempt_text,
                      exit.exit_code));
      finish("interrupted", "stopped: by a signal");
      return exit.exit_code == 0 ? 130 : exit.exit_code;
    }
    if (did_not_resume) {
      say(
          fmt::format("attempt {} did not resume: its training bar started at step {}, the last "
                      "save was at step {}; stopped so that it does not overwrite its saves",
                      attempt, resumed_at.value_or(0), expected_step.value_or(0)));
      finish("did_not_resume", fmt::format("stopped: restarted at step {}, not at its save at {}",
                                           resumed_at.value_or(0), expected_step.value_or(0)));
      return exit.exit_code == 0 ? 1 : exit.exit_code;
    }
    const bool completed = exit.exit_code == 0 && analysis.outcome != parsers::Outcome::kCrashedOom;
    if (completed) {
      if (attempt > 1) {
        say(fmt::format("healed: the job completed at attempt {}/{} after {}", attempt,
                        options.max_attempts, fmt::join(tried, ", ")));
      }
      finish(outcome, attempt > 1 ? "healed" : "");
      return 0;
    }
    fmt::print(stderr, "{}", render_scan_text(scanned, color));
    if (!options.heal) {
      finish(outcome, "");
      return exit.exit_code;
    }

    const triage::HealStep step = triage::next_heal_step(analysis, fixes, tried);
    if (step.fix == nullptr) {
      return give_up("stopped: " + step.stop_reason,
                     fmt::format("not healed{}: {}", attempt_text, step.stop_reason));
    }
    if (attempt >= options.max_attempts) {
      return give_up(
          "exhausted",
          fmt::format("exhausted: {} attempt(s) spent ({}); the next fix would be {}", attempt,
                      tried.empty() ? "no fix applied" : fmt::format("{}", fmt::join(tried, ", ")),
                      step.fix->id));
    }
    const triage::Fix& fix = *step.fix;
    const uint64_t incident_offset = triage.incident ? triage.incident->offset : base_offset;

    // The fix, in the trainer's own channel: a patched copy of each config file it edits (beside
    // the original, so that relative paths inside it still hold), its flags, its environment.
    for (const parsers::NativeFile& file : lookup.files) {
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
        return give_up("stopped: the config cannot be patched",
                       fmt::format("not healed: {} cannot be patched for {}: {}", file.path, fix.id,
                                   patched.error().message));
      }
      const fs::path original(file.path);
      std::string stem = original.stem().string();
      if (const size_t mark = stem.find(".oomtriage-"); mark != std::string::npos)
        stem.resize(mark);
      const fs::path copy =
          original.parent_path() /
          fmt::format("{}.oomtriage-{}{}", stem, attempt + 1, original.extension().string());
      std::ofstream out(copy, std::ios::binary | std::ios::trunc);
      out << *patched;
      out.close();
      if (!out) {
        return give_up("stopped: cannot write " + copy.string(),
                       "not healed: cannot write " + copy.string());
      }
      fmt::print(stderr, "{}",
                 triage::unified_diff(file.text, *patched, "a/" + file.path, "b/" + copy.string()));
      if (const auto spelled = spelling_of(argv, original)) {
        argv = triage::replace_path_argument(argv, *spelled, copy.string());
      }
      if (config && fs::weakly_canonical(*config, ec) == fs::weakly_canonical(original, ec)) {
        config = copy.string();
      }
      store.record_fix(log_path, incident_offset, fix, file.path, file.text, *patched);
    }
    argv = triage::apply_argument_changes(argv, fix.changes);
    for (const auto& change : fix.changes) {
      if (change.kind != parsers::TargetKind::kEnv) continue;
      const auto value = nlohmann::json::parse(change.to_json, nullptr, false);
      std::string name = change.path;
      if (name.rfind("env.", 0) == 0) name = name.substr(4);
      env[name] = value.is_string() ? value.get<std::string>() : value.dump();
    }
    if (!fix.changes_config()) store.record_fix(log_path, incident_offset, fix, "", "", "");
    const triage::ResumeArguments resume =
        triage::with_resume(trainer, argv, newest_state(trainer, argv));
    if (!resume.missing.empty()) {
      return give_up("stopped: " + resume.missing,
                     fmt::format("not healed: cannot resume the job: {}", resume.missing));
    }
    argv = resume.argv;
    tried.push_back(fix.id);
    finish(outcome, "");
    applied_fix = fix.id;
    applied_change = fmt::format("{}: {}", fix.title, triage::describe_changes(fix));
    if (saved_step) expected_step = saved_step;  // else the save before still is the newest
    say(fmt::format(
        "attempt {}/{} in {} s: {} ({}){}; command: {}", attempt + 1, options.max_attempts,
        backoff.count(), fix.title, triage::describe_changes(fix),
        expected_step ? fmt::format(", resuming from the save at step {}", *expected_step) : "",
        fmt::join(argv, " ")));
    if (!wait_or_interrupted(backoff)) {
      say("stopped by a signal before the next attempt");
      return 130;
    }
    backoff = std::min(std::chrono::seconds(300), backoff * 2);
  }
}

}  // namespace oomtriage::daemon
