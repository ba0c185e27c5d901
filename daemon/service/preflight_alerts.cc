// daemon/service/preflight_alerts.cc: the card size, the once-per-config record, the verdict and
// its alert.
#include "daemon/service/preflight_alerts.h"

#include "daemon/alerts/predicted_alert.h"
#include "daemon/common/clock.h"
#include "daemon/common/journal_log.h"
#include "daemon/service/fleet_memory.h"
#include "daemon/service/store_failures.h"
#include "triage/architectures.h"
#include "triage/spec_from_config.h"

namespace oomtriage::daemon {
namespace {

constexpr int64_t kFleetRefreshSeconds = 600;

}  // namespace

CardSizeProvider unknown_card_size() {
  return [] { return std::optional<uint64_t>(); };
}

Result<PreflightResult> preflight_job(db::Store& store, const PreflightJob& job,
                                      uint64_t card_bytes,
                                      const triage::MemoryCorrection& correction, int64_t now) {
  PreflightResult result;
  if (job.config == nullptr) return result;
  const triage::MemorySpec spec = triage::spec_from_config(*job.config);
  if (triage::find_architecture(spec.model_family) == nullptr) return result;
  result.judged = true;
  const uint64_t usable = triage::usable_bytes(card_bytes);
  result.preflight = job.launch != nullptr
                         ? triage::preflight_config(*job.config, *job.launch, usable, correction)
                         : triage::preflight_config(*job.config, usable, correction);
  const triage::Preflight& p = result.preflight;
  const bool will_not_fit = p.verdict.fit == triage::Fit::kWillNotFit;
  db::PreflightCheck check;
  check.job_id = job.job_id;
  check.config_sha256 = job.config_sha256;
  check.card_bytes = card_bytes;
  check.family = p.estimate.family;
  check.verdict = std::string(triage::to_string(p.verdict.fit));
  check.phase = will_not_fit ? std::string(parsers::to_string(p.verdict.first_failing)) : "";
  check.peak_bytes = p.estimate.peak().peak_bytes;
  check.usable_bytes = p.usable_bytes;
  check.alerted = will_not_fit;
  OOMTRIAGE_ASSIGN_OR_RETURN(const bool recorded, store.record_preflight(check, now));
  if (recorded && will_not_fit) {
    const PredictedJob predicted{job.job_id,   job.name,   job.trainer,
                                 job.log_path, card_bytes, utc_time(now)};
    result.alert = predicted_oom_alert(predicted, *job.config, p);
    // Kept with the job (`alerts`, `jobs`, its page) until a later config is judged to fit.
    db::WarningRow warning;
    warning.job_id = job.job_id;
    warning.kind = "predicted_oom";
    warning.summary = predicted_oom_line(*result.alert);
    warning.created_at = now;
    OOMTRIAGE_ASSIGN_OR_RETURN(const int64_t stored, store.record_warning(warning));
    (void)stored;
  } else if (recorded) {
    OOMTRIAGE_ASSIGN_OR_RETURN(const int64_t resolved,
                               store.resolve_warnings(job.job_id, "predicted_oom", now));
    (void)resolved;
  }
  return result;
}

PreflightAlerts::PreflightAlerts(db::Store& store, Metrics& metrics,
                                 std::function<int64_t()> wall_clock,
                                 std::function<void(AlertContent)> send, CardSizeProvider card_size,
                                 bool verbose)
    : store_(store),
      metrics_(metrics),
      wall_clock_(std::move(wall_clock)),
      send_(std::move(send)),
      card_size_(card_size ? std::move(card_size) : unknown_card_size()),
      verbose_(verbose) {}

void PreflightAlerts::configure(const DaemonConfig& config) {
  enabled_ = config.preflight != "off";
  gpu_memory_ = config.gpu_memory;
}

std::optional<uint64_t> PreflightAlerts::card_bytes() {
  if (gpu_memory_) return gpu_memory_;
  return card_size_();
}

triage::MemoryCorrection PreflightAlerts::correction_for(const std::string& family, uint64_t card) {
  const int64_t now = wall_clock_();
  if (!fleet_ || now - fleet_read_at_ >= kFleetRefreshSeconds) {
    std::vector<std::string> unread;
    auto runs = fleet_runs(store_, kFleetHistoryRuns, &unread);
    count_store_failure(metrics_, "fleet_history", runs);  // uncorrected until the next read
    for (const std::string& line : unread) {
      if (said_unread_.insert(line).second) {
        log_line(kWarning, "fleet history: {}; left out of the fleet correction", line);
      }
    }
    fleet_ = runs ? std::move(*runs) : std::vector<triage::FleetRun>{};
    fleet_read_at_ = now;
  }
  return triage::fleet_correction(*fleet_, family, card);
}

void PreflightAlerts::on_job(const PreflightJob& job) {
  if (!enabled_ || job.config == nullptr || job.config_sha256.empty()) return;
  const std::optional<uint64_t> card = card_bytes();
  if (!card) {
    if (verbose_ && !said_unknown_card_) {
      log_line(kDebug, "pre-flight skipped: GPU size unknown (set gpu_memory)");
    }
    said_unknown_card_ = true;
    return;
  }
  if (!seen_.emplace(job.job_id, job.config_sha256, *card).second) return;
  auto checked = store_.preflight_checked(job.job_id, job.config_sha256, *card);
  count_store_failure(metrics_, "preflight_checked", checked);
  if (!checked) {
    seen_.erase({job.job_id, job.config_sha256, *card});  // asked again at the next sighting
    return;
  }
  if (*checked) return;
  const triage::MemorySpec spec = triage::spec_from_config(*job.config);
  const triage::MemoryCorrection correction =
      triage::find_architecture(spec.model_family)
          ? correction_for(std::string(triage::find_architecture(spec.model_family)->id), *card)
          : triage::MemoryCorrection{};
  auto result = preflight_job(store_, job, *card, correction, wall_clock_());
  count_store_failure(metrics_, "record_preflight", result);
  if (!result) {
    seen_.erase({job.job_id, job.config_sha256, *card});
    return;
  }
  if (!result->judged) {
    ++metrics_.parse_errors["preflight_unknown_family"];
    return;
  }
  ++metrics_.preflight_checks[std::string(triage::to_string(result->preflight.verdict.fit))];
  if (!result->alert) return;
  log_line(kWarning, "{}: {}", job.name, predicted_oom_line(*result->alert));
  send_(std::move(*result->alert));
}

}  // namespace oomtriage::daemon
