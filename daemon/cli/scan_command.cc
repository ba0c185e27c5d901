// daemon/cli/scan_command.cc: file reading, the progress bar on stderr, exit codes, output.
#include "daemon/cli/scan_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include "daemon/service/job_history.h"
#include "daemon/service/job_locator.h"
#include "daemon/cli/log_reader.h"
#include "daemon/render/json_output.h"
#include "daemon/render/text_output.h"
#include "parsers/log_analyzer.h"
#include "triage/ranker.h"

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

}  // namespace

int run_scan(const ScanOptions& options) {
  int exit_code = kExitOk;
  std::vector<ScannedLog> scanned;
  std::optional<std::filesystem::path> explicit_config;
  if (options.config) explicit_config = *options.config;

  for (const std::string& path : options.logs) {
    parsers::AnalyzerOptions analyzer_options;
    analyzer_options.trainer = options.trainer;
    parsers::LogAnalyzer analyzer(analyzer_options);
    if (auto read = read_log_into(path, analyzer); !read) {
      report(read.error().message);
      exit_code = std::max(exit_code, exit_code_for(read.error()));
      continue;
    }
    ScannedLog log;
    log.path = path;
    log.analysis = analyzer.finish();
    const auto& a = log.analysis;
    if (a.bytes == 0) {
      report(fmt::format("{}: empty file, nothing to analyse", path));
    } else if (a.binary_bytes * 10 > std::min<uint64_t>(a.bytes, 64 * 1024)) {
      report(fmt::format("{}: does not look like a text log ({} control bytes in the first {}); "
                         "scanned anyway",
                         path, a.binary_bytes, std::min<uint64_t>(a.bytes, 64 * 1024)));
    }
    if (a.truncated_records > 0) {
      report(fmt::format("{}: {} record(s) longer than {} bytes were cut", path,
                         a.truncated_records, parsers::kMaxRecordBytes));
    }
    auto located = locate_job(path, explicit_config, a.trainer, a);
    if (!located) {
      report(located.error().message);
      return kExitEnvironment;
    }
    JobLookup& lookup = *located;
    if (!lookup.warning.empty()) report(lookup.warning);
    triage::TriageInput input{&log.analysis, lookup.config ? &*lookup.config : nullptr,
                              lookup.config_problem, {}};
    if (const parsers::OomEvent* incident = triage::incident_to_fix(log.analysis)) {
      input.tried_and_failed = tried_and_failed_for_log(options.store, path, *incident, lookup.files);
    }
    log.fixes = triage::rank_fixes(input);
    log.job = std::move(lookup.job);
    scanned.push_back(std::move(log));
  }

  if (options.fail_on_oom && exit_code == kExitOk) {
    for (const ScannedLog& log : scanned) {
      for (const parsers::OomEvent& event : log.analysis.events) {
        if (!event.recovered) exit_code = kExitFatalOom;
      }
    }
  }
  if (options.json) {
    fmt::print("{}\n", scan_to_json(scanned).dump(2, ' ', false,
                                                   nlohmann::json::error_handler_t::replace));
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

}  // namespace oomtriage::daemon
