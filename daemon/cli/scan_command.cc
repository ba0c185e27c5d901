// daemon/cli/scan_command.cc: file reading, the progress bar on stderr, exit codes, output.
#include "daemon/cli/scan_command.h"

#include <fnmatch.h>
#include <signal.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <cstdio>
#include <filesystem>
#include <map>
#include <vector>

#include "daemon/common/daemon_config.h"
#include "daemon/service/job_history.h"
#include "daemon/service/job_locator.h"
#include "daemon/service/log_tail.h"
#include "daemon/cli/log_reader.h"
#include "daemon/render/json_output.h"
#include "daemon/render/text_output.h"
#include "parsers/log_analyzer.h"
#include "triage/triage_job.h"

namespace oomtriage::daemon {
namespace {

void report(const std::string& message) { fmt::print(stderr, "oomtriage: {}\n", message); }

// "20 logs: 3 crashed_oom, 1 crashed_other, 16 completed; 5 OOM incidents (2 recovered)".
std::string scan_summary(const std::vector<ScannedLog>& scanned) {
  std::map<std::string, int> outcomes;
  int incidents = 0;
  int recovered = 0;
  for (const ScannedLog& log : scanned) {
    ++outcomes[std::string(parsers::to_string(log.analysis.outcome))];
    for (const auto& event : log.analysis.events) {
      ++incidents;
      recovered += event.recovered;
    }
  }
  std::vector<std::string> parts;
  // Crashes first: what the reader is looking for.
  for (const char* outcome :
       {"crashed_oom", "crashed_other", "running", "stopped", "completed", "unknown"}) {
    if (auto it = outcomes.find(outcome); it != outcomes.end()) {
      parts.push_back(fmt::format("{} {}", it->second, outcome));
    }
  }
  return fmt::format("{} logs: {}; {} OOM incident{}{}", scanned.size(), fmt::join(parts, ", "),
                     incidents, incidents == 1 ? "" : "s",
                     recovered ? fmt::format(" ({} recovered)", recovered) : "");
}

bool matches_any(const std::vector<std::string>& globs, const std::string& name,
                 const std::string& relative) {
  for (const std::string& glob : globs) {
    const bool by_path = glob.find('/') != std::string::npos;
    if (::fnmatch(glob.c_str(), by_path ? relative.c_str() : name.c_str(), 0) == 0) return true;
  }
  return false;
}

std::atomic<bool> follow_stop{false};
void on_stop_signal(int) { follow_stop = true; }

}  // namespace

std::vector<std::string> logs_under(const std::string& dir, const std::vector<std::string>& globs) {
  // What trainers write (AI Toolkit's log.txt, kohya's and Slurm's *.log/*.out/*.err) and what
  // logrotate makes of it; not *.txt, which a dataset's captions also are.
  static const std::vector<std::string> kKnown = {"log.txt",      "log.txt.[0-9]*", "*.log",
                                                  "*.log.[0-9]*", "*.out",          "*.err"};
  const std::vector<std::string>& wanted = globs.empty() ? kKnown : globs;
  namespace fs = std::filesystem;
  std::vector<std::string> found;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (it->is_directory(ec)) {
      if (name.starts_with(".")) it.disable_recursion_pending();  // .git, .cache, ...
      continue;
    }
    if (!it->is_regular_file(ec)) continue;
    const std::string relative = it->path().lexically_relative(dir).string();
    if (matches_any(wanted, name, relative)) found.push_back(it->path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

Result<ScannedLog> analyse_log(const std::string& path, parsers::Trainer trainer) {
  parsers::AnalyzerOptions analyzer_options;
  analyzer_options.trainer = trainer;
  parsers::LogAnalyzer analyzer(analyzer_options);
  OOMTRIAGE_TRY(read_log_into(path, analyzer));
  ScannedLog log;
  log.path = path;
  log.analysis = analyzer.finish();
  const auto& a = log.analysis;
  if (a.bytes == 0) {
    report(fmt::format("{}: empty file, nothing to analyse", path));
  } else if (a.binary_bytes * 10 > std::min<uint64_t>(a.bytes, 64 * 1024)) {
    report(
        fmt::format("{}: does not look like a text log ({} control bytes in the first {}); "
                    "scanned anyway",
                    path, a.binary_bytes, std::min<uint64_t>(a.bytes, 64 * 1024)));
  }
  if (a.truncated_records > 0) {
    report(fmt::format("{}: {} record(s) longer than {} bytes were cut", path, a.truncated_records,
                       parsers::kMaxRecordBytes));
  }
  return log;
}

Result<JobLookup> rank_log(ScannedLog& log, const std::optional<std::filesystem::path>& config,
                           const std::string& store) {
  OOMTRIAGE_ASSIGN_OR_RETURN(JobLookup lookup,
                             locate_job(log.path, config, log.analysis.trainer, log.analysis));
  if (!lookup.warning.empty()) report(lookup.warning);
  const triage::JobView job{lookup.config ? &*lookup.config : nullptr, lookup.config_problem,
                            &lookup.files, lookup.run_config ? &*lookup.run_config : nullptr};
  log.fixes = triage::triage_log(log.analysis, job,
                                 history_of_log(store, log.path, log.analysis, lookup.files))
                  .fixes;
  log.job = std::move(lookup.job);
  return lookup;
}

int run_scan(const ScanOptions& options) {
  int exit_code = kExitOk;
  std::vector<ScannedLog> scanned;
  std::optional<std::filesystem::path> explicit_config;
  if (options.config) explicit_config = *options.config;

  // Folders are walked, like rg: each log under it in turn.
  std::vector<std::string> logs;
  for (const std::string& path : options.logs) {
    std::error_code ec;
    if (path == "-" || !std::filesystem::is_directory(path, ec)) {
      logs.push_back(path);
      continue;
    }
    std::vector<std::string> found = logs_under(path, options.globs);
    if (found.empty()) {
      report(fmt::format("{}: no logs in this folder (looked for {}; --glob to choose)", path,
                         options.globs.empty()
                             ? "log.txt, *.log, *.out, *.err"
                             : fmt::format("{}", fmt::join(options.globs, ", "))));
      exit_code = std::max<int>(exit_code, kExitBadInput);
    }
    logs.insert(logs.end(), found.begin(), found.end());
  }

  for (const std::string& path : logs) {
    auto log = analyse_log(path, options.trainer);
    if (!log) {
      report(log.error().message);
      exit_code = std::max(exit_code, exit_code_for(log.error()));
      continue;
    }
    if (auto ranked = rank_log(*log, explicit_config, options.store); !ranked) {
      report(ranked.error().message);
      return exit_code_for(ranked.error());  // 1 for a config refused, 2 for one not readable
    }
    scanned.push_back(std::move(*log));
  }

  if (options.fail_on_oom && exit_code == kExitOk) {
    for (const ScannedLog& log : scanned) {
      for (const parsers::OomEvent& event : log.analysis.events) {
        if (!event.recovered) exit_code = kExitFatalOom;
      }
    }
  }
  if (options.json) {
    fmt::print("{}\n",
               scan_to_json(scanned).dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  } else {
    const bool color = color_enabled(options.color);
    for (size_t i = 0; i < scanned.size(); ++i) {
      if (i > 0) fmt::print("\n");
      fmt::print("{}", render_scan_text(scanned[i], color));
    }
    if (scanned.size() > 1) fmt::print("\n{}\n", scan_summary(scanned));
  }
  return exit_code;
}

int run_follow(const std::string& path, const ScanOptions& options) {
  using Clock = LogTail::Clock;
  const bool color = color_enabled(options.color);
  // The daemon's settle time: an incident is printed once its log has been quiet this long.
  const auto settle = std::chrono::milliseconds(DaemonConfig{}.settle_ms);
  // The job is located at the first incident, when the log has shown its trainer and arguments.
  std::optional<JobLookup> lookup;
  const auto fixes_for = [&](const parsers::LogAnalyzer& analyzer, const parsers::OomEvent& event) {
    if (!lookup) {
      parsers::LogAnalysis facts;
      facts.trainer = analyzer.trainer();
      facts.arguments = analyzer.arguments();
      std::optional<std::filesystem::path> explicit_config;
      if (options.config) explicit_config = *options.config;
      auto located = locate_job(path, explicit_config, facts.trainer, facts);
      if (!located) report(located.error().message);
      lookup = located ? std::move(*located) : JobLookup{};
      if (!lookup->warning.empty()) report(lookup->warning);
    }
    const triage::JobView job{lookup->config ? &*lookup->config : nullptr, lookup->config_problem,
                              &lookup->files};
    // The store's history is not read here: each incident is ranked as the log alone shows it.
    return triage::triage_event(event, analyzer.trainer(), analyzer.arguments(), job, {});
  };
  // Whether each incident's latest revision is fatal, by its file under the name and offset: an
  // amendment replaces it.
  std::map<std::pair<int, uint64_t>, bool> fatal_at;
  // Each incident once it settled: the traceback after an OOM line names its phase, in one burst;
  // an amendment when more of it arrived later and changed the verdict.
  const auto print = [&](LogTail::Found found) {
    for (parsers::OomEvent& event : found.events) {
      fatal_at[{found.file_number, event.offset}] = !event.recovered;
      ScannedLog log;
      log.path = path;
      log.analysis.trainer = found.analyzer.trainer();
      log.analysis.outcome = found.analyzer.outcome_so_far();
      log.fixes = fixes_for(found.analyzer, event);
      log.analysis.events.push_back(std::move(event));
      if (options.json) {
        auto json = scan_to_json({log})["logs"][0];
        fmt::print("{}\n", json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      } else {
        fmt::print("{}", render_scan_text(log, color));
      }
      std::fflush(stdout);
    }
  };
  // Read through the daemon's follower: a truncated log is read again from its start, a rotated
  // one to its end while the new file under the name is read from its start.
  LogTail tail(path, options.trainer, settle, print, report);
  if (auto opened = tail.open(Clock::now()); !opened) {
    report(opened.error().message);
    return kExitEnvironment;
  }
  ::signal(SIGINT, on_stop_signal);
  ::signal(SIGTERM, on_stop_signal);
  while (!follow_stop) {
    const LogTail::Turn turn = tail.turn(Clock::now());
    if (turn == LogTail::Turn::kFailed) break;
    if (turn == LogTail::Turn::kRead) continue;
    std::this_thread::sleep_for(tail.incident_open() ? settle : std::chrono::milliseconds(100));
  }
  tail.stop();
  const bool any_fatal =
      std::any_of(fatal_at.begin(), fatal_at.end(), [](const auto& at) { return at.second; });
  return options.fail_on_oom && any_fatal ? kExitFatalOom : kExitOk;
}

}  // namespace oomtriage::daemon
