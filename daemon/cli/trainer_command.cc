// daemon/cli/trainer_command.cc: the config file a command line names, found by its name and
// by its being there.
#include "daemon/cli/trainer_command.h"

namespace oomtriage::daemon {

namespace fs = std::filesystem;

bool is_config_name(const fs::path& path) {
  const std::string ext = path.extension().string();
  return ext == ".yaml" || ext == ".yml" || ext == ".json" || ext == ".toml";
}

std::optional<std::string> config_in_command(const std::vector<std::string>& argv) {
  for (size_t i = 1; i < argv.size(); ++i) {
    std::string candidate = argv[i];
    if (const size_t eq = candidate.find('=');
        candidate.rfind("--", 0) == 0 && eq != std::string::npos) {
      candidate = candidate.substr(eq + 1);
    }
    std::error_code ec;
    if (is_config_name(candidate) && fs::is_regular_file(candidate, ec)) return candidate;
  }
  return std::nullopt;
}

}  // namespace oomtriage::daemon
