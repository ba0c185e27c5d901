// daemon/fix_command.cc: pick one ranked fix, patch the config text, print the diff.
#include "daemon/fix_command.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "daemon/job_locator.h"
#include "daemon/log_reader.h"
#include "triage/config_patch.h"
#include "triage/ranker.h"

namespace oomtriage::daemon {
namespace {

int fail(int code, const std::string& message) {
  fmt::print(stderr, "oomtriage: {}\n", message);
  return code;
}

std::string describe(const triage::Fix& fix) {
  return fmt::format("{} ({}, rank {})", fix.title, fix.id, fix.rank);
}

}  // namespace

int run_fix(const FixOptions& options) {
  parsers::LogAnalyzer analyzer;
  std::string error;
  if (const int rc = read_log_into(options.log, analyzer, error); rc != kExitOk) {
    return fail(rc, error);
  }
  const parsers::LogAnalysis analysis = analyzer.finish();
  std::optional<std::filesystem::path> explicit_config;
  if (options.config) explicit_config = *options.config;
  JobLookup lookup = locate_job(options.log, explicit_config, analysis);
  if (!lookup.error.empty()) return fail(kExitEnvironment, lookup.error);
  if (!lookup.job || !lookup.job->config_path) {
    return fail(kExitBadInput, fmt::format("{}: no job config file beside the log (.job_config.json "
                                           "or config.yaml); pass --config FILE",
                                           options.log));
  }
  if (!lookup.config) return fail(kExitBadInput, lookup.warning);

  const triage::TriageInput input{&analysis, &*lookup.config, ""};
  const std::vector<triage::Fix> fixes = triage::rank_fixes(input);
  if (fixes.empty()) {
    fmt::print(stderr, "oomtriage: {}: no out-of-memory incident, nothing to fix\n", options.log);
    return kExitOk;
  }
  const triage::Fix* chosen = &fixes.front();
  if (options.fix_id) {
    chosen = nullptr;
    for (const auto& fix : fixes) {
      if (fix.id == *options.fix_id) chosen = &fix;
    }
    if (chosen == nullptr) {
      std::vector<std::string> ids;
      for (const auto& fix : fixes) ids.push_back(fix.id);
      return fail(kExitBadInput,
                  fmt::format("fix {} is {} for this job; proposed: {}", *options.fix_id,
                              triage::is_known_fix_id(*options.fix_id) ? "not proposed"
                                                                       : "not a known fix id",
                              fmt::join(ids, ", ")));
    }
  } else if (options.rank) {
    if (*options.rank < 1 || *options.rank > static_cast<int>(fixes.size())) {
      return fail(kExitBadInput, fmt::format("--rank {} is out of range: {} fix(es) proposed",
                                             *options.rank, fixes.size()));
    }
    chosen = &fixes[static_cast<size_t>(*options.rank - 1)];
  }
  if (!chosen->changes_config()) {
    std::string action = chosen->why;
    for (const auto& change : chosen->changes) {
      action += fmt::format("; set {} to {}", change.path, change.to_json);
    }
    return fail(kExitBadInput,
                fmt::format("{} is not a config change: {}. Pick another with --fix ID or --rank N",
                            describe(*chosen), action));
  }

  const std::string& path = *lookup.job->config_path;
  const bool json = lookup.config->format == parsers::ConfigFormat::kJson;
  const triage::PatchResult patched = json ? triage::patch_json(lookup.config_text, chosen->changes)
                                           : triage::patch_yaml(lookup.config_text, chosen->changes);
  if (!patched.text) return fail(kExitBadInput, fmt::format("{}: {}", path, patched.error));

  fmt::print(stderr, "oomtriage: applying {}\n", describe(*chosen));
  for (const auto& change : chosen->changes) {
    if (change.path.rfind("config.", 0) != 0) {
      fmt::print(stderr, "oomtriage: also set {} to {} (not part of the config)\n", change.path,
                 change.to_json);
    }
  }
  fmt::print("{}", triage::unified_diff(lookup.config_text, *patched.text, "a/" + path, "b/" + path));
  if (options.write_to) {
    std::ofstream out(*options.write_to, std::ios::binary | std::ios::trunc);
    out << *patched.text;
    out.close();
    if (!out) {
      return fail(kExitEnvironment, fmt::format("cannot write {}", *options.write_to));
    }
  }
  return kExitOk;
}

}  // namespace oomtriage::daemon
