// daemon/service/job_history.cc: the previous run's last fatal crash, its stored fixes, and which of
// them the config now carries.
#include "daemon/service/job_history.h"

#include <nlohmann/json.hpp>

#include <filesystem>

#include "daemon/render/json_output.h"
#include "triage/history.h"

namespace oomtriage::daemon {

std::vector<std::string> tried_and_failed(const db::JobStory& story, int64_t run_id,
                                          const parsers::OomEvent& event,
                                          const std::vector<parsers::NativeFile>& files) {
  if (event.recovered || files.empty()) return {};
  const db::StoredEvent* previous = nullptr;
  for (const auto& stored : story.events) {
    if (stored.run_id == 0 || stored.run_id >= run_id) continue;
    const auto json = nlohmann::json::parse(stored.event_json, nullptr, false);
    if (json.is_object() && !json.value("recovered", false)) previous = &stored;
  }
  if (previous == nullptr) return {};
  const auto json = nlohmann::json::parse(previous->event_json, nullptr, false);
  if (json.value("phase", "") != parsers::to_string(event.phase)) return {};
  return triage::carried_fixes(fixes_from_json(previous->fixes_json), files);
}

std::vector<std::string> tried_and_failed_for_log(const std::string& store_path,
                                                  const std::string& log,
                                                  const parsers::OomEvent& event,
                                                  const std::vector<parsers::NativeFile>& files) {
  std::error_code ec;
  if (store_path.empty() || files.empty() || log == "-" || !std::filesystem::exists(store_path, ec)) {
    return {};
  }
  auto store = db::Store::open(store_path);
  if (!store) return {};
  const std::string absolute = std::filesystem::absolute(log).lexically_normal().string();
  auto story = (*store)->job_story_of_log(absolute);
  if (!story || !*story) return {};
  int64_t run_id = 0;
  for (const auto& run : (*story)->runs) {
    if (run.log_path == absolute) run_id = run.id;
  }
  return tried_and_failed(**story, run_id, event, files);
}

}  // namespace oomtriage::daemon
