// daemon/cli/run_preflight.cc: the card, the config, the store's record, the line and the alert.
#include "daemon/cli/run_preflight.h"

#include <fmt/format.h>

#include <filesystem>

#include "daemon/alerts/predicted_alert.h"
#include "daemon/cli/check_input.h"
#include "daemon/common/clock.h"
#include "daemon/common/digest.h"
#include "daemon/service/fleet_memory.h"
#include "daemon/service/job_locator.h"
#include "daemon/service/preflight_alerts.h"
#include "parsers/job_config.h"
#include "parsers/gpu_cards.h"
#include "triage/architectures.h"
#include "triage/spec_from_config.h"

namespace oomtriage::daemon {
namespace {

namespace fs = std::filesystem;

std::optional<uint64_t> card_bytes(const RunOptions& options) {
  if (!options.gpu.empty() && options.gpu != "auto") {
    const Result<uint64_t> card = parsers::parse_card_memory(options.gpu);
    return card ? std::optional<uint64_t>(*card) : std::nullopt;
  }
  if (options.gpu.empty() && options.alerts.gpu_memory) return options.alerts.gpu_memory;
  return options.card_size ? options.card_size() : std::nullopt;
}

void say_no_preflight(const std::string& reason) {
  fmt::print(stderr, "oomtriage run: no pre-flight check: {}\n", reason);
}

// What the once-per-config record keys on: the config files read, else the command line whose
// arguments were read.
std::string digest_of(const CheckInput& read, const RunOptions& options) {
  std::string all;
  for (const parsers::NativeFile& file : read.files) all += file.text + '\0';
  if (read.files.empty()) {
    for (const std::string& word : options.command) all += word + '\0';
  }
  return sha256_hex(read.files.size() == 1 ? read.files.front().text : all);
}

}  // namespace

void warn_before_launch(const RunOptions& options, const std::optional<std::string>& config_path,
                        const std::string& job, const std::string& log_path, RunAlerts& alerts) {
  if (options.alerts.preflight == "off") return;
  const std::optional<uint64_t> card = card_bytes(options);
  if (!card) return;
  // Read as `check` reads its input: a named config through the job registry, by its content;
  // else the command line as `check -- COMMAND` reads it (the config its trainer's flag names,
  // else the arguments it passes). What cannot be read is said once, never passed over.
  const Result<CheckInput> read =
      options.config ? read_config_input(config_path.value_or(*options.config), options.trainer)
                     : read_command_input(options.command, options.trainer);
  if (!read || !read->config) {
    say_no_preflight(read ? "the command names no config to read" : read.error().message);
    return;
  }
  const parsers::JobConfig* config = &*read->config;
  const triage::MemorySpec spec = triage::spec_from_config(*config);
  const triage::Architecture* arch = triage::find_architecture(spec.model_family);
  if (arch == nullptr) {
    say_no_preflight(spec.model_family.empty()
                         ? "the config names no model family"
                         : fmt::format("the model family '{}' is not in the memory model's table",
                                       spec.model_family));
    return;
  }

  // The store keeps the check (once per job, config and card) and the fleet's history; without
  // it the line is still printed, and nothing is sent.
  std::error_code ec;
  fs::create_directories(fs::path(options.store).parent_path(), ec);
  auto store = db::Store::open(options.store);
  triage::MemoryCorrection correction;
  std::optional<AlertContent> first_alert;
  triage::Preflight preflight;
  const std::string trainer(parsers::to_string(config->trainer));
  const int64_t now = unix_now();
  if (store) {
    std::vector<std::string> unread;
    if (auto c = fleet_correction(**store, std::string(arch->id), card, &unread)) correction = *c;
    for (const std::string& line : unread) {
      fmt::print(stderr, "oomtriage run: fleet history: {}; left out of the fleet correction\n",
                 line);
    }
    const std::string folder = fs::path(log_path).parent_path().string();
    auto job_id = (*store)->upsert_job(job, folder, trainer, folder, now);
    if (job_id) {
      const PreflightJob checked{*job_id,
                                 job,
                                 trainer,
                                 log_path,
                                 digest_of(*read, options),
                                 config,
                                 read->launch ? &*read->launch : nullptr};
      auto result = preflight_job(**store, checked, *card, correction, now);
      if (result && result->judged) {
        preflight = result->preflight;
        first_alert = std::move(result->alert);
      }
    }
  }
  if (!store || preflight.estimate.phases.empty()) {
    const uint64_t usable = triage::usable_bytes(*card);
    preflight = read->launch ? triage::preflight_config(*config, *read->launch, usable, correction)
                             : triage::preflight_config(*config, usable, correction);
  }
  if (preflight.verdict.fit != triage::Fit::kWillNotFit) return;
  const AlertContent line =
      first_alert ? *first_alert
                  : predicted_oom_alert({0, job, trainer, log_path, *card, utc_time(now)}, *config,
                                        preflight);
  fmt::print(stderr, "oomtriage run: {}\n", predicted_oom_line(line));
  if (first_alert) alerts.send_verdict(std::move(*first_alert));
}

}  // namespace oomtriage::daemon
