// daemon/render/json_output.cc: the logs of a scan as JSON; absent values are null, never 0.
#include "daemon/render/json_output.h"

#include "parsers/event_codec.h"
#include "triage/fix_codec.h"

namespace oomtriage::daemon {
namespace {

using nlohmann::ordered_json;

template <class T>
ordered_json or_null(const std::optional<T>& value) {
  return value ? ordered_json(*value) : ordered_json(nullptr);
}

}  // namespace

ordered_json scan_to_json(const std::vector<ScannedLog>& logs) {
  ordered_json out_logs = ordered_json::array();
  for (const ScannedLog& log : logs) {
    ordered_json events = ordered_json::array();
    for (const auto& event : log.analysis.events) events.push_back(parsers::encode_event(event));
    ordered_json fixes = ordered_json::array();
    for (const auto& fix : log.fixes) fixes.push_back(triage::encode_fix(fix));
    ordered_json job = nullptr;
    if (log.job) {
      job = {{"name", log.job->name},
             {"config_path", or_null(log.job->config_path)},
             {"config_sha256", or_null(log.job->config_sha256)}};
    }
    out_logs.push_back({{"path", log.path},
                        {"trainer", parsers::to_string(log.analysis.trainer)},
                        {"outcome", parsers::to_string(log.analysis.outcome)},
                        {"job", job},
                        {"events", events},
                        {"fixes", fixes}});
  }
  return {{"oomtriage", 1}, {"logs", out_logs}};
}

}  // namespace oomtriage::daemon
