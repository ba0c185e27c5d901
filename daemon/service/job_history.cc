// daemon/service/job_history.cc: the previous run's last fatal crash and its stored fixes.
#include "daemon/service/job_history.h"

#include <nlohmann/json.hpp>

#include <filesystem>

#include "daemon/render/json_output.h"

namespace oomtriage::daemon {

std::optional<triage::StoredCrash> previous_crash(const db::JobStory& story, int64_t run_id) {
  const db::StoredEvent* previous = nullptr;
  for (const auto& stored : story.events) {
    if (stored.run_id == 0 || stored.run_id >= run_id) continue;
    const auto json = nlohmann::json::parse(stored.event_json, nullptr, false);
    if (json.is_object() && !json.value("recovered", false)) previous = &stored;
  }
  if (previous == nullptr) return std::nullopt;
  const auto json = nlohmann::json::parse(previous->event_json, nullptr, false);
  return triage::StoredCrash{json.value("phase", ""), fixes_from_json(previous->fixes_json)};
}

triage::History history_of_log(const std::string& store_path, const std::string& log,
                               const parsers::LogAnalysis& analysis,
                               const std::vector<parsers::NativeFile>& files) {
  std::error_code ec;
  if (analysis.events.empty() || files.empty() || store_path.empty() || log == "-" ||
      !std::filesystem::exists(store_path, ec)) {
    return {};
  }
  // Read only: a user who may read the daemon's store but not write it gets the history, and the
  // store is left as it was.
  auto store = db::Store::open_read_only(store_path, db::ReadOnly::kOneCommand);
  if (!store) return {};  // a store that cannot be read has no history to add
  const std::string absolute = std::filesystem::absolute(log).lexically_normal().string();
  auto story = (*store)->job_story_of_log(absolute);
  if (!story || !*story) return {};
  int64_t run_id = 0;
  for (const auto& run : (*story)->runs) {
    if (run.log_path == absolute) run_id = run.id;
  }
  return {previous_crash(**story, run_id), {}};
}

}  // namespace oomtriage::daemon
