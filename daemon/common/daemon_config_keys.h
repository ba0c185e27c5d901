// daemon/common/daemon_config_keys.h
//
// The daemon config's keys as tables (ccache's config-key table): one row per key with its name,
// the type of its value in words, a value it takes (for docs and tests) and the function that
// reads and checks it. parse_daemon_config() (daemon/common/daemon_config.h) reads every key
// through its table, and the "did you mean" of an unknown top-level key comes from the same
// rows, so a new key is a row plus its field in DaemonConfig.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "daemon/common/daemon_config.h"
#include "parsers/result.h"

namespace YAML {
class Node;
}  // namespace YAML

namespace oomtriage::daemon {

// A key of a mapping whose values land in a `Config` (DaemonConfig, HealConfig).
template <class Config>
struct ConfigKey {
  std::string_view name;
  std::string_view type;     // "integer >= 1", "list of watch rules"
  std::string_view example;  // a value it takes, as YAML
  // Reads `value` into `config` and checks it; an error says "<source>:<line>: why".
  Result<Ok> (*read)(const YAML::Node& value, const std::string& source, Config& config);
};

// The top level, in the order a "did you mean" prefers among equally close names.
const std::vector<ConfigKey<DaemonConfig>>& daemon_config_keys();
// `heal:`'s keys (docs/self-healing-and-fleet.md).
const std::vector<ConfigKey<HealConfig>>& heal_config_keys();
// `fleet:`'s and `metrics:`'s keys.
const std::vector<ConfigKey<DaemonConfig>>& fleet_config_keys();
const std::vector<ConfigKey<DaemonConfig>>& metrics_config_keys();

}  // namespace oomtriage::daemon
