// daemon/service/fleet_memory.h
//
// The memory model's correction from this fleet's history (triage/fleet_correction.h), read from
// a store: its finished runs with their config snapshots and first fatal OOM (db/store.h
// fleet_history) become FleetRuns — each config parsed again and estimated with the uncorrected
// model, an OOM's need taken from its figures, a completed run's peak from its sampled GPU
// memory (db/store.h GpuMemoryRow), the card from the OOM, the pre-flight check or the samples.
// `oomtriage check`, `run` and the daemon's pre-flight (preflight_alerts.h) ask here. A snapshot
// that does not parse, or whose family the model does not know, is left out, and said so in
// `unread` ("PATH: reason", one line per snapshot) for the caller to print once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "db/store.h"
#include "parsers/result.h"
#include "triage/fleet_correction.h"
#include "triage/memory_model.h"

namespace oomtriage::daemon {

// How many of the newest finished runs are read: enough for a median, bounded in time.
inline constexpr int kFleetHistoryRuns = 500;

Result<std::vector<triage::FleetRun>> fleet_runs(db::Store& store, int limit = kFleetHistoryRuns,
                                                 std::vector<std::string>* unread = nullptr);

Result<triage::MemoryCorrection> fleet_correction(db::Store& store, const std::string& family,
                                                  std::optional<uint64_t> card_bytes,
                                                  std::vector<std::string>* unread = nullptr);
// Opens the store at `store_path` read-only for the question (`oomtriage check`).
Result<triage::MemoryCorrection> fleet_correction(const std::string& store_path,
                                                  const std::string& family,
                                                  std::optional<uint64_t> card_bytes);

// What the store's crashed runs of this very config say (issue 45): each run whose snapshot
// reads to the same spec and crashed of GPU memory with figures gives its phase's need and the
// phases it came through (triage::PhaseEvidence). `check` applies it over the model.
Result<std::vector<triage::PhaseEvidence>> job_evidence(const std::string& store_path,
                                                        const triage::MemorySpec& spec);

}  // namespace oomtriage::daemon
