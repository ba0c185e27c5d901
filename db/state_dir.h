// db/state_dir.h
//
// Where the store lives when --state-dir is not given (docs/design.md): $STATE_DIRECTORY under
// systemd, /var/lib/oomtriage for root, else $XDG_STATE_HOME/oomtriage or
// ~/.local/state/oomtriage. Pure: the caller passes the environment in.
#pragma once

#include <optional>
#include <string>

namespace oomtriage::db {

struct StateDirEnvironment {
  std::optional<std::string> state_directory;  // $STATE_DIRECTORY (systemd StateDirectory=)
  std::optional<std::string> xdg_state_home;
  std::optional<std::string> home;
  bool is_root = false;
};

std::string default_state_dir(const StateDirEnvironment& env);

}  // namespace oomtriage::db
