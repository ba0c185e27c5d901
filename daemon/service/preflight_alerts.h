// daemon/service/preflight_alerts.h
//
// "Warn before the first step": when the daemon first sees a job (job_registry.h) or `run` is
// about to launch one, its config is judged against the GPU by the pre-flight
// (triage/preflight.h), with the fleet's correction for its family (fleet_memory.h). A job
// predicted not to fit gets one TrainingOOMPredicted warning (daemon/alerts/predicted_alert.h).
// Once per job, config digest and card size: the check is recorded in the store first
// (db/store.h record_preflight), so a config read again — by a restarted daemon too — is not
// alerted twice; the alert goes out once to each receiver, not retried (like a heal verdict).
// A config that does not parse or names a family the model does not know is counted and left.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "daemon/alerts/alert_payload.h"
#include "daemon/common/daemon_config.h"
#include "daemon/common/metrics.h"
#include "db/store.h"
#include "parsers/job_config.h"
#include "parsers/result.h"
#include "triage/fleet_correction.h"
#include "triage/preflight.h"

namespace oomtriage::daemon {

// The GPU's total memory on this machine, when something can tell (NVML, wired in by main).
using CardSizeProvider = std::function<std::optional<uint64_t>()>;
// Knows nothing: the pre-flight then needs `gpu_memory:` (or `run --gpu`).
CardSizeProvider unknown_card_size();

// One job as the pre-flight sees it.
struct PreflightJob {
  int64_t job_id = 0;
  std::string name;
  std::string trainer;
  std::string log_path;
  std::string config_sha256;
  const parsers::JobConfig* config = nullptr;
  // Issue 45: how `run -- accelerate launch ...` spreads the job over GPUs, judged per GPU as
  // `check` judges it; null for one process.
  const parsers::DistributedSetup* launch = nullptr;
};

struct PreflightResult {
  bool judged = false;  // false: the model does not know the family
  triage::Preflight preflight;
  // A will-not-fit verdict this job, config and card were not alerted for before.
  std::optional<AlertContent> alert;
};

// Judges `job` on a card of `card_bytes` with `correction` and records the check. An error is
// the store's (then nothing is alerted: the next sighting tries again).
Result<PreflightResult> preflight_job(db::Store& store, const PreflightJob& job,
                                      uint64_t card_bytes,
                                      const triage::MemoryCorrection& correction, int64_t now);

// The daemon's pre-flight: configured from the daemon config, asked for every job the registry
// registers, sending through the current dispatcher.
class PreflightAlerts {
 public:
  PreflightAlerts(db::Store& store, Metrics& metrics, std::function<int64_t()> wall_clock,
                  std::function<void(AlertContent)> send, CardSizeProvider card_size, bool verbose);

  void configure(const DaemonConfig& config);
  // A job was registered with this config: judged once per job, digest and card.
  void on_job(const PreflightJob& job);

 private:
  std::optional<uint64_t> card_bytes();
  triage::MemoryCorrection correction_for(const std::string& family, uint64_t card);

  db::Store& store_;
  Metrics& metrics_;
  std::function<int64_t()> wall_clock_;
  std::function<void(AlertContent)> send_;
  CardSizeProvider card_size_;
  bool verbose_;
  bool enabled_ = true;
  std::optional<uint64_t> gpu_memory_;
  bool said_unknown_card_ = false;
  std::set<std::string> said_unread_;  // fleet snapshots not read, each logged once
  std::set<std::tuple<int64_t, std::string, uint64_t>> seen_;  // (job, digest, card)
  // The fleet's runs, read again at most every kFleetRefreshSeconds: a start that sees a
  // thousand jobs reads the history once.
  std::optional<std::vector<triage::FleetRun>> fleet_;
  int64_t fleet_read_at_ = 0;
};

}  // namespace oomtriage::daemon
