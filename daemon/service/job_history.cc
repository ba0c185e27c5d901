// daemon/service/job_history.cc: the previous run's last fatal crash and its stored fixes.
#include "daemon/service/job_history.h"

#include <filesystem>

#include "parsers/event_codec.h"
#include "triage/fix_codec.h"

namespace oomtriage::daemon {

std::optional<triage::StoredCrash> previous_crash(const db::JobStory& story, int64_t run_id) {
  const db::StoredEvent* previous = nullptr;
  parsers::Phase phase = parsers::Phase::kUnknown;
  for (const auto& stored : story.events) {
    if (stored.run_id == 0 || stored.run_id >= run_id) continue;
    // A row that does not decode (edited by hand) is no crash to learn from.
    const auto event = parsers::decode_event(stored.event_json);
    if (event && !event->recovered) {
      previous = &stored;
      phase = event->phase;
    }
  }
  if (previous == nullptr) return std::nullopt;
  auto fixes = triage::decode_fixes(previous->fixes_json);
  return triage::StoredCrash{std::string(parsers::to_string(phase)),
                             fixes ? std::move(*fixes) : std::vector<triage::Fix>()};
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
