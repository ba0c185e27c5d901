// daemon/cli/fix_command.cc: pick one ranked fix, patch the config text, print the diff.
#include "daemon/cli/fix_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "daemon/cli/log_reader.h"
#include "daemon/common/clock.h"
#include "daemon/common/digest.h"
#include "daemon/render/text_output.h"
#include "daemon/service/job_history.h"
#include "daemon/service/job_locator.h"
#include "db/store.h"
#include "parsers/event_codec.h"
#include "triage/config_patch.h"
#include "triage/fix_codec.h"
#include "triage/history.h"
#include "triage/triage_job.h"

namespace oomtriage::daemon {
namespace {

int fail(int code, const std::string& message) {
  fmt::print(stderr, "oomtriage: {}\n", message);
  return code;
}

std::string describe(const triage::Fix& fix) {
  return fmt::format("{} ({}, rank {})", fix.title, fix.id, fix.rank);
}

// The fixes of this crash the job's config already carries: applied with `fix --write` (kept in
// the store), or by hand after the daemon took the config's snapshot at the crash. Reading an
// absent store creates nothing.
struct AlreadyApplied {
  std::vector<std::string> ids;
  std::string how;  // "with `oomtriage fix --write`" / "since the daemon's snapshot at the crash"
};

AlreadyApplied already_applied(const FixOptions& options, const JobLookup& lookup,
                               uint64_t incident_offset) {
  AlreadyApplied out;
  std::error_code ec;
  if (options.store.empty() || lookup.files.empty() ||
      !std::filesystem::exists(options.store, ec)) {
    return out;
  }
  auto store = db::Store::open(options.store);
  if (!store) return out;
  const std::string log = std::filesystem::absolute(options.log).lexically_normal().string();
  if (auto records = (*store)->applied_fixes(log, incident_offset)) {
    for (const db::AppliedFix& record : *records) {
      const auto fix = triage::decode_fix(record.fix_json);
      if (fix && !triage::carried_fixes({*fix}, lookup.files).empty()) {
        out.ids.push_back(record.fix_id);
        out.how = "with `oomtriage fix --write`";
      }
    }
  }
  if (auto story = (*store)->job_story_of_log(log); story && *story) {
    for (const db::StoredEvent& event : (*story)->events) {
      const auto decoded = parsers::decode_event(event.event_json);
      if (!decoded || decoded->offset != incident_offset) continue;
      const auto fixes = triage::decode_fixes(event.fixes_json);
      if (!fixes) continue;
      std::string crash_sha;
      for (const auto& snapshot : (*story)->snapshots) {
        if (event.snapshot_id && snapshot.id == *event.snapshot_id) crash_sha = snapshot.sha256;
      }
      if (crash_sha.empty() || !lookup.job || crash_sha == lookup.job->config_sha256) continue;
      for (const std::string& id : triage::carried_fixes(*fixes, lookup.files)) {
        if (std::find(out.ids.begin(), out.ids.end(), id) == out.ids.end()) {
          out.ids.push_back(id);
          if (out.how.empty()) out.how = "since the daemon's snapshot of the config at the crash";
        }
      }
    }
  }
  return out;
}

void record_applied(const FixOptions& options, uint64_t incident_offset, const triage::Fix& fix,
                    const std::string& config_path, const std::string& before,
                    const std::string& after) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(options.store).parent_path(), ec);
  auto store = db::Store::open(options.store);
  const db::AppliedFix record{
      std::filesystem::absolute(options.log).lexically_normal().string(),
      incident_offset,
      fix.id,
      config_path,
      sha256_hex(before),
      sha256_hex(after),
      triage::encode_fix(fix).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
      unix_now()};
  if (!store || !(*store)->record_applied_fix(record)) {
    fmt::print(stderr, "oomtriage: note: could not record the applied fix in {}\n", options.store);
  }
}

}  // namespace

int run_fix(const FixOptions& options) {
  parsers::LogAnalyzer analyzer;
  if (auto read = read_log_into(options.log, analyzer); !read) {
    return fail(exit_code_for(read.error()), read.error().message);
  }
  const parsers::LogAnalysis analysis = analyzer.finish();
  std::optional<std::filesystem::path> explicit_config;
  if (options.config) explicit_config = *options.config;
  auto located = locate_job(options.log, explicit_config, analysis.trainer, analysis);
  if (!located) return fail(exit_code_for(located.error()), located.error().message);
  JobLookup& lookup = *located;
  if (!lookup.warning.empty()) fmt::print(stderr, "oomtriage: {}\n", lookup.warning);

  const triage::JobView job{lookup.config ? &*lookup.config : nullptr, lookup.config_problem,
                            &lookup.files, lookup.run_config ? &*lookup.run_config : nullptr};
  const triage::Triage triage = triage::triage_log(
      analysis, job, history_of_log(options.store, options.log, analysis, lookup.files));
  const std::vector<triage::Fix>& fixes = triage.fixes;
  if (fixes.empty()) {
    fmt::print(stderr, "oomtriage: {}: no out-of-memory incident, nothing to fix\n", options.log);
    return kExitOk;
  }
  const uint64_t incident_offset = triage.incident->offset;
  const AlreadyApplied applied = already_applied(options, lookup, incident_offset);
  if (!applied.ids.empty() && !options.fix_id && !options.rank) {
    fmt::print(stderr,
               "oomtriage: {}: the config changed after this crash and already carries {} ({}); "
               "nothing more is proposed for it. Run the job again: if it crashes the same way, "
               "the next lever comes first (or pick one now with --fix ID or --rank N)\n",
               options.log, fmt::join(applied.ids, ", "), applied.how);
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
  if (std::find(applied.ids.begin(), applied.ids.end(), chosen->id) != applied.ids.end()) {
    return fail(kExitBadInput,
                fmt::format("{} is already applied to the config after this crash ({})",
                            describe(*chosen), applied.how));
  }
  // The first fix is a plan when no single one fits; a first fix the model says does not fit
  // means no plan of up to three fits either: writing it would promise what it cannot keep.
  if (!options.fix_id && !options.rank && chosen->fits == false) {
    const std::string short_of = fmt::format(
        "no fix, alone or combined in a plan, makes every phase fit by the memory model (the "
        "first, {}, leaves the peak at {:.2f} GiB)",
        chosen->id, chosen->predicted_peak_bytes.value_or(0) / double(1ull << 30));
    if (options.write_to) {
      return fail(kExitBadInput,
                  fmt::format("{}: {}; nothing written. Apply one anyway with --fix ID or --rank "
                              "N, or run on a larger card",
                              options.log, short_of));
    }
    fmt::print(stderr, "oomtriage: note: {}: this change alone is not enough\n", short_of);
  }
  if (!chosen->check.empty()) fmt::print(stderr, "oomtriage: check first: {}\n", chosen->check);

  using parsers::TargetKind;
  std::vector<std::string> argument_lines;
  for (const auto& change : chosen->changes) {
    if (change.kind == TargetKind::kArgs) argument_lines.push_back(argument_line(change));
    if (change.kind == TargetKind::kEnv) {
      fmt::print(stderr, "oomtriage: also set {} to {} (not part of the config)\n", change.path,
                 triage::value_text(change.to));
    }
  }
  if (!chosen->changes_config()) {
    if (!argument_lines.empty()) {
      if (options.write_to) {
        return fail(kExitBadInput, fmt::format("{} changes the trainer's command line, not a file; "
                                               "nothing to --write",
                                               describe(*chosen)));
      }
      fmt::print(stderr, "oomtriage: applying {} to the command line the log shows\n",
                 describe(*chosen));
      for (const auto& line : argument_lines) fmt::print("{}\n", line);
      return kExitOk;
    }
    if (!lookup.config) {
      return fail(kExitBadInput,
                  fmt::format("{}: no job config found (beside the log, named by it or printed "
                              "in it) and {} is not a command-line change; pass --config FILE",
                              options.log, chosen->id));
    }
    std::string action = chosen->check.empty() ? chosen->why : chosen->check;
    for (const auto& change : chosen->changes) {
      action += fmt::format("; set {} to {}", change.path, triage::value_text(change.to));
    }
    return fail(kExitBadInput,
                fmt::format("{} is not a config change: {}. Pick another with --fix ID or --rank N",
                            describe(*chosen), action));
  }

  // The files the fix touches, in the order its changes name them.
  std::vector<std::string> files;
  for (const auto& change : chosen->changes) {
    const bool in_file = change.kind == TargetKind::kYaml || change.kind == TargetKind::kJson ||
                         change.kind == TargetKind::kToml;
    if (in_file && std::find(files.begin(), files.end(), change.file) == files.end()) {
      files.push_back(change.file);
    }
  }
  if (options.write_to && files.size() > 1) {
    return fail(kExitBadInput,
                fmt::format("{} changes {} files ({}); --write takes one", describe(*chosen),
                            files.size(), fmt::join(files, ", ")));
  }
  for (const std::string& path : files) {
    if (path.empty() ||
        std::none_of(lookup.files.begin(), lookup.files.end(),
                     [&](const parsers::NativeFile& f) { return f.path == path; })) {
      return fail(kExitBadInput,
                  fmt::format("{}: the job's config was only printed in the log; pass the file "
                              "it came from with --config FILE",
                              options.log));
    }
  }
  fmt::print(stderr, "oomtriage: applying {}\n", describe(*chosen));
  for (const std::string& path : files) {
    const auto file = std::find_if(lookup.files.begin(), lookup.files.end(),
                                   [&](const parsers::NativeFile& f) { return f.path == path; });
    std::vector<triage::ConfigChange> mine;
    for (const auto& change : chosen->changes) {
      if (change.file == path) mine.push_back(change);
    }
    const auto patched = triage::patch_file(file->kind, file->text, mine);
    if (!patched) return fail(kExitBadInput, fmt::format("{}: {}", path, patched.error().message));
    fmt::print("{}", triage::unified_diff(file->text, *patched, "a/" + path, "b/" + path));
    if (options.write_to) {
      std::ofstream out(*options.write_to, std::ios::binary | std::ios::trunc);
      out << *patched;
      out.close();
      if (!out) return fail(kExitEnvironment, fmt::format("cannot write {}", *options.write_to));
      record_applied(options, incident_offset, *chosen, path, file->text, *patched);
    }
  }
  for (const auto& line : argument_lines) fmt::print("{}\n", line);
  return kExitOk;
}

}  // namespace oomtriage::daemon
