// daemon/render/json_output.h
//
// The JSON contract of docs/design.md: `scan --json` prints one object for all logs, and
// `report --json` reuses the event shape. Keys keep the documented order.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "parsers/event.h"
#include "triage/fix.h"

namespace oomtriage::daemon {

// The job a log belongs to, as the job registry (service/job_locator.h) names it.
struct JobInfo {
  std::string name;
  std::optional<std::string> config_path;
  std::optional<std::string> config_sha256;
};

struct ScannedLog {
  std::string path;
  parsers::LogAnalysis analysis;
  std::optional<JobInfo> job;
  std::vector<triage::Fix> fixes;
};

nlohmann::ordered_json event_to_json(const parsers::OomEvent& event);
nlohmann::ordered_json fix_to_json(const triage::Fix& fix);
nlohmann::ordered_json scan_to_json(const std::vector<ScannedLog>& logs);

// The fixes a stored fixes_json holds, back as Fix values (id, rank, changes with their
// targets); what does not parse is left out.
std::vector<triage::Fix> fixes_from_json(const std::string& fixes_json);

}  // namespace oomtriage::daemon
