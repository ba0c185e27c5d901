// db/state_dir.cc: the default state directory, in the order docs/design.md gives.
#include "db/state_dir.h"

namespace oomtriage::db {

std::string default_state_dir(const StateDirEnvironment& env) {
  if (env.state_directory && !env.state_directory->empty()) {
    // systemd may pass several colon-separated directories; the first is ours.
    return env.state_directory->substr(0, env.state_directory->find(':'));
  }
  if (env.is_root) return "/var/lib/oomtriage";
  if (env.xdg_state_home && !env.xdg_state_home->empty()) return *env.xdg_state_home + "/oomtriage";
  if (env.home && !env.home->empty()) return *env.home + "/.local/state/oomtriage";
  return ".oomtriage";
}

}  // namespace oomtriage::db
