// daemon/service/fleet_memory.cc: a store's finished runs as the fleet correction's history.
#include "daemon/service/fleet_memory.h"

#include <filesystem>

#include "parsers/job_config.h"
#include "triage/architectures.h"
#include "triage/spec_from_config.h"

namespace oomtriage::daemon {
namespace {

std::optional<triage::FleetRun> fleet_run(const db::FleetHistoryRow& row) {
  const std::string ext = std::filesystem::path(row.config_path).extension().string();
  const auto format = ext == ".json" ? parsers::ConfigFormat::kJson : parsers::ConfigFormat::kYaml;
  const auto config = parsers::parse_job_config(row.config_content, format, row.config_path);
  if (!config) return std::nullopt;
  const triage::MemorySpec spec = triage::spec_from_config(*config);
  if (triage::find_architecture(spec.model_family) == nullptr) return std::nullopt;
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
    const auto event = nlohmann::json::parse(row.oom_event_json, nullptr, false);
    if (event.is_object()) {
      // A store edited by hand must not throw: a phase that is not a string matches none.
      const auto named = event.find("phase");
      const std::string phase =
          named != event.end() && named->is_string() ? named->get<std::string>() : "unknown";
      for (const triage::PhaseEstimate& p : estimate.phases) {
        if (parsers::to_string(p.phase) == phase) {
          run.oom_phase = p.phase;
          run.predicted_peak = p.peak_bytes;
        }
      }
      run.need_bytes = triage::oom_need_bytes(event);
      if (const auto total = event.find("total_capacity_bytes");
          total != event.end() && total->is_number_unsigned()) {
        run.card_bytes = total->get<uint64_t>();
      }
    }
  }
  return run;
}

}  // namespace

Result<std::vector<triage::FleetRun>> fleet_runs(db::Store& store, int limit) {
  OOMTRIAGE_ASSIGN_OR_RETURN(auto rows, store.fleet_history(limit));
  std::vector<triage::FleetRun> runs;
  for (const db::FleetHistoryRow& row : rows) {
    if (auto run = fleet_run(row)) runs.push_back(std::move(*run));
  }
  return runs;
}

Result<triage::MemoryCorrection> fleet_correction(db::Store& store, const std::string& family,
                                                  std::optional<uint64_t> card_bytes) {
  OOMTRIAGE_ASSIGN_OR_RETURN(auto runs, fleet_runs(store));
  return triage::fleet_correction(runs, family, card_bytes);
}

Result<triage::MemoryCorrection> fleet_correction(const std::string& store_path,
                                                  const std::string& family,
                                                  std::optional<uint64_t> card_bytes) {
  OOMTRIAGE_ASSIGN_OR_RETURN(auto store,
                             db::Store::open_read_only(store_path, db::ReadOnly::kOneCommand));
  return fleet_correction(*store, family, card_bytes);
}

}  // namespace oomtriage::daemon
