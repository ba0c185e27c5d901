// daemon/service/fleet_memory.cc: a store's finished runs as the fleet correction's history.
#include "daemon/service/fleet_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "daemon/service/job_locator.h"
#include "parsers/event_codec.h"
#include "parsers/job_config.h"
#include "triage/architectures.h"
#include "triage/model_phase.h"
#include "triage/spec_from_config.h"

namespace oomtriage::daemon {
namespace {

// Many runs share one snapshot: its reason is said once.
void say_once(std::vector<std::string>* unread, std::string line) {
  if (unread == nullptr) return;
  if (std::find(unread->begin(), unread->end(), line) == unread->end()) {
    unread->push_back(std::move(line));
  }
}

// The run as the fleet correction reads it; nullopt, and why in `unread`, when its config
// snapshot cannot be read through the job registry or names a family the model does not know.
std::optional<triage::FleetRun> fleet_run(const db::FleetHistoryRow& row,
                                          std::vector<std::string>* unread) {
  const auto read = read_config_text(row.config_path, row.config_content,
                                     parsers::Trainer::kUnknown, std::nullopt);
  if (!read) {
    say_once(unread, read.error().message);
    return std::nullopt;
  }
  const parsers::JobConfig* config = &read->config;
  const triage::MemorySpec spec = triage::spec_from_config(*config);
  if (triage::find_architecture(spec.model_family) == nullptr) {
    say_once(unread, spec.model_family.empty()
                         ? fmt::format("{}: names no model family", row.config_path)
                         : fmt::format("{}: the model family '{}' is not in the memory model's "
                                       "table",
                                       row.config_path, spec.model_family));
    return std::nullopt;
  }
  const triage::MemoryEstimate estimate = triage::estimate_memory(spec);
  triage::FleetRun run;
  run.family = estimate.family;
  run.card_bytes = row.card_bytes;
  run.predicted_peak = estimate.peak().peak_bytes;
  // A completed run's sampled peak is what it needed; a crashed run's stops short of its need
  // (the request that failed was never granted), which its figures tell instead.
  if (row.outcome == "completed") run.measured_peak = row.measured_peak;
  if (row.outcome == "crashed_oom") {
    run.oom = true;
    // A row that does not decode (a store edited by hand) tells nothing of the crash.
    if (const auto event = parsers::decode_event(row.oom_event_json)) {
      for (const triage::PhaseEstimate& p : estimate.phases) {
        if (p.phase == event->phase) {
          run.oom_phase = p.phase;
          run.predicted_peak = p.peak_bytes;
        }
      }
      run.need_bytes = triage::oom_need_bytes(*event);
      if (event->figures.total_capacity_bytes) run.card_bytes = event->figures.total_capacity_bytes;
    }
  }
  return run;
}

}  // namespace

Result<std::vector<triage::FleetRun>> fleet_runs(db::Store& store, int limit,
                                                 std::vector<std::string>* unread) {
  OOMTRIAGE_ASSIGN_OR_RETURN(auto rows, store.fleet_history(limit));
  std::vector<triage::FleetRun> runs;
  for (const db::FleetHistoryRow& row : rows) {
    if (auto run = fleet_run(row, unread)) runs.push_back(std::move(*run));
  }
  return runs;
}

Result<triage::MemoryCorrection> fleet_correction(db::Store& store, const std::string& family,
                                                  std::optional<uint64_t> card_bytes,
                                                  std::vector<std::string>* unread) {
  OOMTRIAGE_ASSIGN_OR_RETURN(auto runs, fleet_runs(store, kFleetHistoryRuns, unread));
  return triage::fleet_correction(runs, family, card_bytes);
}

Result<std::vector<triage::PhaseEvidence>> job_evidence(const std::string& store_path,
                                                        const triage::MemorySpec& spec) {
  OOMTRIAGE_ASSIGN_OR_RETURN(auto store,
                             db::Store::open_read_only(store_path, db::ReadOnly::kOneCommand));
  OOMTRIAGE_ASSIGN_OR_RETURN(auto rows, store->fleet_history(kFleetHistoryRuns));
  const auto text = [](const triage::MemorySpec& s) {
    return triage::to_json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  const std::string wanted = text(spec);
  std::vector<triage::PhaseEvidence> evidence;
  for (const db::FleetHistoryRow& row : rows) {
    if (row.outcome != "crashed_oom") continue;
    const auto read = read_config_text(row.config_path, row.config_content,
                                       parsers::Trainer::kUnknown, std::nullopt);
    if (!read || text(triage::spec_from_config(read->config)) != wanted) continue;
    const auto event = parsers::decode_event(row.oom_event_json);
    if (!event) continue;
    const parsers::OomKind kind = event->kind;
    if (kind == parsers::OomKind::kHostKilled || kind == parsers::OomKind::kHostMemoryError ||
        kind == parsers::OomKind::kShm) {
      continue;
    }
    const auto need = triage::oom_need_bytes(*event);
    if (!need) continue;
    using parsers::Phase;
    triage::PhaseEvidence e;
    e.phase = triage::model_phase_of(event->phase);
    e.need_bytes = *need;
    if (e.phase != Phase::kModelLoad) e.came_through.push_back(Phase::kModelLoad);
    if (e.phase == Phase::kSampling && event->step && *event->step > 0) {
      e.came_through.push_back(Phase::kTrainStep);
    }
    if (const auto card = event->figures.total_capacity_bytes) {
      uint64_t others = 0;
      for (const auto& other : event->figures.other_processes) others += other.bytes;
      e.room_bytes = *card > others ? *card - others : 0;
    }
    e.source = fmt::format("run {} of this config crashed there{}", row.run_id,
                           event->step ? fmt::format(" at step {}", *event->step) : "");
    evidence.push_back(std::move(e));
  }
  return evidence;
}

Result<triage::MemoryCorrection> fleet_correction(const std::string& store_path,
                                                  const std::string& family,
                                                  std::optional<uint64_t> card_bytes) {
  OOMTRIAGE_ASSIGN_OR_RETURN(auto store,
                             db::Store::open_read_only(store_path, db::ReadOnly::kOneCommand));
  return fleet_correction(*store, family, card_bytes);
}

}  // namespace oomtriage::daemon
