// daemon/cli/alerts_command.cc
#include "daemon/cli/alerts_command.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "daemon/alerts/alert_payload.h"
#include "daemon/cli/log_reader.h"
#include "daemon/common/clock.h"
#include "db/store.h"
#include "parsers/event_codec.h"

namespace oomtriage::daemon {
namespace {

using nlohmann::ordered_json;

std::string when(int64_t unix_seconds) { return utc_time(unix_seconds, "%Y-%m-%dT%H:%M:%SZ"); }

// "cuda in sampling, step 500": the event the alert is about.
std::string event_text(const std::string& event_json) {
  const auto event = parsers::decode_event(event_json);
  if (!event) return "?";
  std::string text =
      fmt::format("{} in {}", parsers::to_string(event->kind), parsers::to_string(event->phase));
  if (event->step) text += fmt::format(", step {}", *event->step);
  return text;
}

// The warnings that stay with their jobs (predicted OOM, near OOM, stalled), newest first; each
// went to every receiver once when raised.
void print_warnings(const std::vector<db::WarningRow>& warnings) {
  if (warnings.empty()) return;
  fmt::print("warnings kept with their jobs (sent once when raised):\n");
  fmt::print("{:>6}  {:<24} {:<14} {:<20} {:<20} {}\n", "ID", "JOB", "KIND", "RAISED", "RESOLVED",
             "SUMMARY");
  for (const auto& w : warnings) {
    fmt::print("{:>6}  {:<24} {:<14} {:<20} {:<20} {}\n", w.id, w.job, w.kind, when(w.created_at),
               w.resolved_at ? when(*w.resolved_at) : "-", w.summary);
  }
  fmt::print("\n");
}

}  // namespace

int run_alerts_list(const std::string& store_path, const std::string& state, bool json,
                    ColorMode color) {
  std::vector<db::AlertRow> rows;
  std::vector<db::WarningRow> warnings;  // listed with every state, not with a filter
  if (std::filesystem::exists(store_path)) {
    auto store = db::Store::open_read_only(store_path, db::ReadOnly::kOneCommand);
    if (!store) {
      fmt::print(stderr, "oomtriage: store {}: {}\n", store_path, store.error().message);
      return kExitEnvironment;
    }
    auto listed = (*store)->list_alerts(state, 1000);
    if (!listed) {
      fmt::print(stderr, "oomtriage: {}\n", listed.error().message);
      return kExitEnvironment;
    }
    rows = std::move(*listed);
    if (state.empty()) {
      auto kept = (*store)->list_warnings(std::nullopt, 1000);
      if (!kept) {
        fmt::print(stderr, "oomtriage: {}\n", kept.error().message);
        return kExitEnvironment;
      }
      warnings = std::move(*kept);
    }
  }
  if (json) {
    ordered_json out = ordered_json::array();
    for (const auto& row : rows) {
      out.push_back(
          {{"id", row.id},
           {"receiver", row.receiver},
           {"state", row.state},
           {"attempts", row.attempts},
           {"next_attempt_at", row.state == "pending" ? ordered_json(when(row.next_attempt_at))
                                                      : ordered_json(nullptr)},
           {"last_error",
            row.last_error.empty() ? ordered_json(nullptr) : ordered_json(row.last_error)},
           {"job", row.job},
           {"event", event_text(row.event_json)},
           {"stored_at", when(row.created_at)}});
    }
    ordered_json kept = ordered_json::array();
    for (const auto& w : warnings) {
      kept.push_back({{"id", w.id},
                      {"job", w.job},
                      {"kind", w.kind},
                      {"summary", w.summary},
                      {"raised_at", when(w.created_at)},
                      {"resolved_at", w.resolved_at ? ordered_json(when(*w.resolved_at))
                                                    : ordered_json(nullptr)}});
    }
    fmt::print("{}\n", ordered_json{{"oomtriage", 1}, {"alerts", out}, {"warnings", kept}}.dump(2));
    return kExitOk;
  }
  print_warnings(warnings);
  if (rows.empty()) {
    fmt::print("no {}alerts (store: {})\n", state.empty() ? "" : state + " ", store_path);
    return kExitOk;
  }
  const bool c = color_enabled(color);
  fmt::print("{:>6}  {:<16} {:<10} {:>8}  {:<24} {:<32} {}\n", "ID", "RECEIVER", "STATE",
             "ATTEMPTS", "JOB", "EVENT", "LAST ERROR");
  for (const auto& row : rows) {
    const std::string state_text =
        paint(c && row.state == "failed", fmt::fg(fmt::terminal_color::red),
              fmt::format("{:<10}", row.state));
    fmt::print("{:>6}  {:<16} {} {:>8}  {:<24} {:<32} {}\n", row.id, row.receiver, state_text,
               row.attempts, row.job, event_text(row.event_json),
               row.last_error.empty() ? "-" : row.last_error);
  }
  return kExitOk;
}

int run_alerts_resend(const std::string& store_path, int64_t id) {
  if (!std::filesystem::exists(store_path)) {
    fmt::print(stderr, "oomtriage: no store at {}\n", store_path);
    return kExitBadInput;
  }
  auto store = db::Store::open(store_path);
  if (!store) {
    fmt::print(stderr, "oomtriage: store {}: {}\n", store_path, store.error().message);
    return kExitEnvironment;
  }
  auto resent = (*store)->resend_alert(id, unix_now());
  if (!resent) {
    fmt::print(stderr, "oomtriage: {}\n", resent.error().message);
    return kExitEnvironment;
  }
  if (!*resent) {
    fmt::print(stderr, "oomtriage: no alert {} (see `oomtriage alerts`)\n", id);
    return kExitBadInput;
  }
  fmt::print("alert {} is pending again: the daemon sends it within its rescan interval\n", id);
  return kExitOk;
}

}  // namespace oomtriage::daemon
