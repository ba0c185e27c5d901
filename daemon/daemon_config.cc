// daemon/daemon_config.cc: YAML in, validated config out (line numbers from yaml-cpp marks).
#include "daemon/daemon_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace oomtriage::daemon {
namespace fs = std::filesystem;
namespace {

Error bad(const std::string& source, const YAML::Node& node, const std::string& reason) {
  return make_error(ErrorCode::kBadInput,
                    fmt::format("{}:{}: {}", source, node.Mark().line + 1, reason));
}

}  // namespace

Result<DaemonConfig> parse_daemon_config(const std::string& text, const std::string& source) {
  DaemonConfig config;
  config.source = source;
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kBadInput, fmt::format("{}:{}: {}", source, e.mark.line + 1, e.msg));
  }
  if (!root.IsMap()) return bad(source, root, "expected a mapping with a `watch:` list");
  try {
    for (const auto& item : root) {
      const std::string key = item.first.as<std::string>();
      const YAML::Node& value = item.second;
      if (key == "state_dir") {
        config.state_dir = value.as<std::string>();
      } else if (key == "rescan_seconds") {
        config.rescan_seconds = value.as<int>();
        if (config.rescan_seconds < 1) return bad(source, value, "rescan_seconds must be >= 1");
      } else if (key == "settle_ms") {
        config.settle_ms = value.as<int>();
        if (config.settle_ms < 0) return bad(source, value, "settle_ms must be >= 0");
      } else if (key == "read_interval_ms") {
        config.read_interval_ms = value.as<int>();
        if (config.read_interval_ms < 0) return bad(source, value, "read_interval_ms must be >= 0");
      } else if (key == "watch") {
        if (!value.IsSequence()) return bad(source, value, "watch must be a list");
        for (const auto& w : value) {
          if (!w.IsMap() || !w["logs"]) return bad(source, w, "each watch entry needs `logs:`");
          WatchRule rule;
          rule.logs = w["logs"].as<std::string>();
          if (w["trainer"]) {
            const auto trainer = parsers::trainer_from_string(w["trainer"].as<std::string>());
            if (!trainer) {
              return bad(source, w["trainer"],
                         "unknown trainer `" + w["trainer"].as<std::string>() + "`");
            }
            rule.trainer = *trainer;
          }
          if (w["job"]) rule.job = w["job"].as<std::string>();
          if (w["config"]) rule.config = w["config"].as<std::string>();
          config.watch.push_back(std::move(rule));
        }
      } else if (key == "alerts") {
        if (!value.IsSequence()) return bad(source, value, "alerts must be a list");
        int index = 0;
        for (const auto& a : value) {
          if (!a.IsMap() || !a["type"]) return bad(source, a, "each alert needs `type:`");
          const std::string type = a["type"].as<std::string>();
          if (type != "slack" && type != "discord" && type != "webhook" && type != "alertmanager") {
            return bad(source, a["type"], "unknown alert type `" + type + "`");
          }
          if (a["url"] && type == "slack") {
            return bad(source, a["url"], "a Slack webhook URL is a secret: use url_file");
          }
          ++index;
          config.alerts.push_back(
              {a["name"] ? a["name"].as<std::string>() : fmt::format("{}-{}", type, index), type});
        }
      } else if (key == "metrics") {
        if (value["listen"]) config.metrics_listen = value["listen"].as<std::string>();
      } else {
        return bad(source, item.first, "unknown key `" + key + "`");
      }
    }
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kBadInput, fmt::format("{}:{}: {}", source, e.mark.line + 1, e.msg));
  }
  if (config.watch.empty()) return bad(source, root, "no `watch:` entries: nothing to do");
  return config;
}

Result<DaemonConfig> load_daemon_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kIo, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  return parse_daemon_config(text.str(), path);
}

DaemonConfig inline_watch_config(const std::vector<std::string>& dirs) {
  DaemonConfig config;
  config.source = "inline";
  for (const std::string& dir : dirs) {
    WatchRule rule;
    rule.logs = (fs::path(dir) / "*" / "log.txt").string();
    config.watch.push_back(rule);
  }
  return config;
}

std::string expand_template(const std::string& pattern, const std::string& log_path) {
  const fs::path path(log_path);
  std::string out = pattern;
  const std::pair<std::string, std::string> vars[] = {
      {"{parent}", path.parent_path().filename().string()},
      {"{dir}", path.parent_path().string()},
      {"{stem}", path.stem().string()},
  };
  for (const auto& [name, value] : vars) {
    for (size_t at = out.find(name); at != std::string::npos; at = out.find(name, at + value.size())) {
      out.replace(at, name.size(), value);
    }
  }
  return out;
}

}  // namespace oomtriage::daemon
