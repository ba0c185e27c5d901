// daemon/render/json_output.h
//
// The JSON contract of docs/design.md: `scan --json` prints one object for all logs. Its events
// and fixes are written by their codecs (parsers/event_codec.h, triage/fix_codec.h), which the
// store and `report --json` use too. Keys keep the documented order.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "parsers/event.h"
#include "triage/fix.h"
#include "triage/triage_job.h"

namespace oomtriage::daemon {

struct ScannedLog {
  std::string path;
  parsers::LogAnalysis analysis;
  std::optional<triage::JobInfo> job;
  std::vector<triage::Fix> fixes;
};

nlohmann::ordered_json scan_to_json(const std::vector<ScannedLog>& logs);

}  // namespace oomtriage::daemon
