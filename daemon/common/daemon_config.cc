// daemon/common/daemon_config.cc: YAML in, validated config out (line numbers from yaml-cpp marks).
#include "daemon/common/daemon_config.h"

#include "daemon/common/daemon_config_keys.h"
#include "daemon/common/did_you_mean.h"
#include "daemon/common/receiver_kinds.h"
#include "daemon/common/user_file.h"
#include "db/fleet_store.h"

#include "parsers/bounded_document.h"
#include "parsers/gpu_cards.h"
#include "triage/heal_plan.h"

#include <unistd.h>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace oomtriage::daemon {
namespace fs = std::filesystem;
namespace {

Error bad(const std::string& source, const YAML::Node& node, const std::string& reason) {
  return make_error(ErrorCode::kBadInput,
                    fmt::format("{}:{}: {}", source, node.Mark().line + 1, reason));
}

constexpr const char* kPlaceholders[] = {"{parent}", "{dir}",       "{stem}",     "{namespace}",
                                         "{pod}",    "{pod_owner}", "{container}"};

// A `{name}` expand_template() does not know would stay in every job name as typed.
std::optional<Error> unknown_placeholder(const std::string& source, const YAML::Node& node,
                                         const std::string& key, const std::string& pattern) {
  for (size_t open = pattern.find('{'); open != std::string::npos;
       open = pattern.find('{', open + 1)) {
    const size_t close = pattern.find('}', open);
    if (close == std::string::npos) break;
    const std::string name = pattern.substr(open, close - open + 1);
    if (std::find(std::begin(kPlaceholders), std::end(kPlaceholders), name) !=
        std::end(kPlaceholders)) {
      continue;
    }
    const auto close_names = close_matches(
        name, std::vector<std::string>(std::begin(kPlaceholders), std::end(kPlaceholders)), 1);
    return bad(source, node,
               fmt::format("unknown placeholder {} in `{}:`{} (known: {{parent}}, {{dir}}, "
                           "{{stem}}, {{namespace}}, {{pod}}, {{pod_owner}}, {{container}})",
                           name, key,
                           close_names.empty() ? "" : "; did you mean " + close_names[0] + "?"));
  }
  return std::nullopt;
}

// The folder a glob's files are under, up to its first wildcard: what must exist for it to find
// anything ("/srv/ai-toolkit/output" for "/srv/ai-toolkit/output/*/log.txt").
fs::path fixed_prefix(const std::string& glob) {
  fs::path prefix;
  for (const auto& part : fs::path(glob).parent_path()) {
    if (part.string().find_first_of("*?[") != std::string::npos) break;
    prefix /= part;
  }
  return prefix;
}

// What is legal but probably a mistake: a glob under a folder that is not there (yet) or that
// this process cannot enter. Said at start and by check-config; the daemon goes on.
void check_glob_folder(const std::string& source, const YAML::Node& node, const std::string& glob,
                       std::vector<std::string>& warnings) {
  const fs::path folder = fixed_prefix(glob);
  std::error_code ec;
  const auto status = fs::status(folder, ec);
  const std::string where = fmt::format("{}:{}: ", source, node.Mark().line + 1);
  if (!fs::exists(status)) {
    warnings.push_back(where + folder.string() + " does not exist: `" + glob +
                       "` finds nothing until it does");
  } else if (!fs::is_directory(status)) {
    warnings.push_back(where + folder.string() + " is not a folder: `" + glob + "` finds nothing");
  } else if (::access(folder.c_str(), R_OK | X_OK) != 0) {
    warnings.push_back(where + "this user cannot read " + folder.string() + " (" +
                       std::strerror(errno) + "): `" + glob + "` finds nothing");
  }
}

// A secret file: a token or a URL, a line of text (64 KiB is far more than any).
Result<std::string> read_secret(const std::string& path) {
  constexpr size_t kMaxSecretBytes = 64 << 10;
  OOMTRIAGE_ASSIGN_OR_RETURN(std::string secret, read_user_file(path, kMaxSecretBytes));
  while (!secret.empty() &&
         (secret.back() == '\n' || secret.back() == '\r' || secret.back() == ' ')) {
    secret.pop_back();
  }
  return secret;
}

Result<Receiver> parse_receiver(const YAML::Node& a, const std::string& source, int index) {
  if (!a.IsMap() || !a["type"]) return bad(source, a, "each alert needs `type:`");
  Receiver r;
  r.type = a["type"].as<std::string>();
  const ReceiverKind* kind = find_receiver_kind(r.type);
  if (kind == nullptr) return bad(source, a["type"], "unknown alert type `" + r.type + "`");
  r.name = a["name"] ? a["name"].as<std::string>() : fmt::format("{}-{}", r.type, index);
  const bool token_in_url = kind->url_is_secret;
  if (a["url"]) {
    if (token_in_url) {
      return bad(source, a["url"],
                 fmt::format("a {} webhook URL holds its token: give it with url_file or url_env",
                             r.type));
    }
    r.url = a["url"].as<std::string>();
  } else if (a["url_file"]) {
    auto secret = read_secret(a["url_file"].as<std::string>());
    if (!secret) return bad(source, a["url_file"], "url_file " + secret.error().message);
    r.url = *secret;
  } else if (a["url_env"]) {
    const char* value = std::getenv(a["url_env"].as<std::string>().c_str());
    if (value == nullptr || *value == '\0') {
      return bad(source, a["url_env"],
                 "environment variable " + a["url_env"].as<std::string>() + " is not set");
    }
    r.url = value;
  } else {
    return bad(source, a, "alert `" + r.name + "` needs url, url_file or url_env");
  }
  if (r.url.rfind("http://", 0) != 0 && r.url.rfind("https://", 0) != 0) {
    return bad(source, a, "alert `" + r.name + "`: the URL must start with http:// or https://");
  }
  if (a["hmac_secret_file"]) {
    auto secret = read_secret(a["hmac_secret_file"].as<std::string>());
    if (!secret) {
      return bad(source, a["hmac_secret_file"], "hmac_secret_file " + secret.error().message);
    }
    if (secret->empty()) return bad(source, a["hmac_secret_file"], "hmac_secret_file is empty");
    r.hmac_secret = *secret;
  }
  if (a["ca_file"]) r.ca_file = a["ca_file"].as<std::string>();
  if (a["timeout_ms"]) r.timeout_ms = a["timeout_ms"].as<int>();
  if (a["retry_initial_ms"]) r.retry_initial_ms = a["retry_initial_ms"].as<int>();
  if (a["retry_max_ms"]) r.retry_max_ms = a["retry_max_ms"].as<int>();
  if (a["retry_horizon_seconds"]) r.retry_horizon_seconds = a["retry_horizon_seconds"].as<int>();
  r.group_wait_ms = kind->group_wait_ms;
  if (a["group_wait_ms"]) r.group_wait_ms = a["group_wait_ms"].as<int>();
  if (r.group_wait_ms < 0 || r.group_wait_ms > 600000) {
    return bad(source, a["group_wait_ms"],
               "alert `" + r.name + "`: group_wait_ms must be between 0 and 600000");
  }
  if (r.timeout_ms < 1 || r.retry_initial_ms < 1 || r.retry_max_ms < r.retry_initial_ms) {
    return bad(source, a, "alert `" + r.name + "`: timeouts and retry delays must be positive");
  }
  return r;
}

std::vector<std::string> string_list(const YAML::Node& node) {
  std::vector<std::string> items;
  if (node.IsScalar()) {
    items.push_back(node.as<std::string>());
  } else {
    for (const auto& item : node) items.push_back(item.as<std::string>());
  }
  return items;
}

// A mapping read through its key table: an unknown key is refused ("unknown heal key `x`").
template <class Config>
Result<Ok> read_mapping(const YAML::Node& node, const std::string& source, std::string_view section,
                        const std::vector<ConfigKey<Config>>& keys, Config& config) {
  if (!node.IsMap()) return bad(source, node, fmt::format("{} must be a mapping", section));
  for (const auto& item : node) {
    const std::string key = item.first.as<std::string>();
    const auto row = std::find_if(keys.begin(), keys.end(),
                                  [&](const ConfigKey<Config>& k) { return k.name == key; });
    if (row == keys.end()) {
      return bad(source, item.first, fmt::format("unknown {} key `{}`", section, key));
    }
    OOMTRIAGE_TRY(row->read(item.second, source, config));
  }
  return Ok{};
}

Result<HealConfig> parse_heal(const YAML::Node& h, const std::string& source) {
  HealConfig heal;
  OOMTRIAGE_TRY(read_mapping(h, source, "heal", heal_config_keys(), heal));
  if (!heal.enabled())
    return bad(source, h,
               "heal needs `ui_url:` (AI Toolkit's UI) or `ai_toolkit_db:` (its aitk_db.db)");
  if (!heal.ui_token.empty() && heal.ui_url.empty())
    return bad(source, h, "heal: `token_file:` is for `ui_url:`, which is not set");
  return heal;
}

// One `watch:` entry.
Result<WatchRule> parse_watch_rule(const YAML::Node& w, const std::string& source,
                                   std::vector<std::string>& warnings) {
  if (!w.IsMap()) return bad(source, w, "each watch entry needs `logs:`");
  WatchRule rule;
  if (const YAML::Node kind = w["source"]) {
    rule.source = kind.as<std::string>();
    if (rule.source != "files" && rule.source != "kubernetes" && rule.source != "slurm") {
      return bad(source, kind,
                 "source must be `files`, `kubernetes` or `slurm`, not `" + rule.source + "`");
    }
  }
  if (rule.source == "slurm") {
    // The files come from squeue; a `logs:` glob would never be looked at.
    if (w["logs"])
      return bad(source, w["logs"], "a slurm rule takes its files from squeue, not `logs:`");
    rule.job = "{stem}";  // slurm-1234 or slurm-1234_7 with Slurm's default names
    if (w["poll_seconds"]) {
      rule.poll_seconds = w["poll_seconds"].as<int>();
      if (rule.poll_seconds < 1 || rule.poll_seconds > 3600) {
        return bad(source, w["poll_seconds"], "poll_seconds must be 1..3600");
      }
    }
  } else if (rule.source == "kubernetes") {
    // kubelet's tree: /var/log/pods/<namespace>_<pod>_<uid>/<container>/<restart>.log
    rule.logs = "/var/log/pods/*/*/*.log";
    rule.job = "{namespace}/{pod_owner}";
  } else if (!w["logs"]) {
    return bad(source, w, "each watch entry needs `logs:`");
  }
  if (w["logs"]) {
    rule.logs = w["logs"].as<std::string>();
    // The service runs from /: a relative glob would mean something else there.
    if (!rule.logs.starts_with("/")) {
      return bad(source, w["logs"],
                 "`logs:` must be an absolute path (the service does not run from this "
                 "folder): " +
                     rule.logs);
    }
  }
  if (rule.source != "slurm") {
    check_glob_folder(source, w["logs"] ? w["logs"] : w, rule.logs, warnings);
  }
  if (w["trainer"]) {
    const auto trainer = parsers::trainer_from_string(w["trainer"].as<std::string>());
    if (!trainer) {
      return bad(source, w["trainer"], "unknown trainer `" + w["trainer"].as<std::string>() + "`");
    }
    rule.trainer = *trainer;
  }
  if (w["job"]) rule.job = w["job"].as<std::string>();
  if (w["config"]) rule.config = w["config"].as<std::string>();
  for (const char* key : {"job", "config"}) {
    const std::string& pattern = std::string_view(key) == "job" ? rule.job : rule.config;
    if (auto e = unknown_placeholder(source, w[key] ? w[key] : w, key, pattern)) return *e;
  }
  if (const YAML::Node rotated = w["rotated_to"]) {
    if (rotated.IsScalar()) {
      rule.rotated_to.push_back(rotated.as<std::string>());
    } else if (rotated.IsSequence()) {
      for (const auto& dir : rotated) rule.rotated_to.push_back(dir.as<std::string>());
    } else {
      return bad(source, rotated, "rotated_to must be a folder or a list of folders");
    }
  }
  return rule;
}

Result<Ok> read_watch(const YAML::Node& value, const std::string& source, DaemonConfig& config) {
  if (!value.IsSequence()) return bad(source, value, "watch must be a list");
  for (const auto& w : value) {
    OOMTRIAGE_ASSIGN_OR_RETURN(WatchRule rule, parse_watch_rule(w, source, config.warnings));
    config.watch.push_back(std::move(rule));
  }
  return Ok{};
}

Result<Ok> read_alerts(const YAML::Node& value, const std::string& source, DaemonConfig& config) {
  if (!value.IsSequence()) return bad(source, value, "alerts must be a list");
  int index = 0;
  for (const auto& a : value) {
    OOMTRIAGE_ASSIGN_OR_RETURN(Receiver receiver, parse_receiver(a, source, ++index));
    // Two receivers of one name would share one outbox lane: one of them never sends.
    for (const Receiver& other : config.alerts) {
      if (other.name == receiver.name) {
        return bad(source, a["name"] ? a["name"] : a,
                   "two receivers are named `" + receiver.name +
                       "`: give each its own "
                       "`name:`");
      }
    }
    config.alerts.push_back(std::move(receiver));
  }
  return Ok{};
}

// An integer of at least `min`, refused below it as "<key> must be >= <min>".
Result<Ok> read_at_least(const YAML::Node& value, const std::string& source, std::string_view key,
                         int min, int& field) {
  field = value.as<int>();
  if (field < min) return bad(source, value, fmt::format("{} must be >= {}", key, min));
  return Ok{};
}

}  // namespace

std::string describe_preflight(const DaemonConfig& config) {
  if (config.preflight == "off") return "pre-flight off";
  if (!config.gpu_memory) return "pre-flight warns against the card NVML reports";
  return fmt::format("pre-flight warns against a {:.2f} GiB card",
                     static_cast<double>(*config.gpu_memory) / (1024.0 * 1024 * 1024));
}

using Node = YAML::Node;

const std::vector<ConfigKey<DaemonConfig>>& daemon_config_keys() {
  static const std::vector<ConfigKey<DaemonConfig>> kKeys = {
      {"state_dir", "path", "/var/lib/oomtriage",
       [](const Node& value, const std::string&, DaemonConfig& config) -> Result<Ok> {
         config.state_dir = value.as<std::string>();
         return Ok{};
       }},
      {"rescan_seconds", "integer >= 1", "10",
       [](const Node& value, const std::string& source, DaemonConfig& config) {
         return read_at_least(value, source, "rescan_seconds", 1, config.rescan_seconds);
       }},
      {"settle_ms", "integer >= 0", "25",
       [](const Node& value, const std::string& source, DaemonConfig& config) {
         return read_at_least(value, source, "settle_ms", 0, config.settle_ms);
       }},
      {"read_interval_ms", "integer >= 0", "1000",
       [](const Node& value, const std::string& source, DaemonConfig& config) {
         return read_at_least(value, source, "read_interval_ms", 0, config.read_interval_ms);
       }},
      {"burst_check_ms", "integer >= 0", "200",
       [](const Node& value, const std::string& source, DaemonConfig& config) {
         return read_at_least(value, source, "burst_check_ms", 0, config.burst_check_ms);
       }},
      {"gpu_sample_ms", "integer >= 0", "1000",
       [](const Node& value, const std::string& source, DaemonConfig& config) {
         return read_at_least(value, source, "gpu_sample_ms", 0, config.gpu_sample_ms);
       }},
      {"near_oom_share", "number in (0, 1]", "0.95",
       [](const Node& value, const std::string& source, DaemonConfig& config) -> Result<Ok> {
         config.near_oom_share = value.as<double>();
         if (!(config.near_oom_share > 0 && config.near_oom_share <= 1)) {
           return bad(source, value, "near_oom_share must be above 0 and at most 1 (0.95: 95%)");
         }
         return Ok{};
       }},
      {"stalled_after_seconds", "integer >= 0", "900",
       [](const Node& value, const std::string& source, DaemonConfig& config) {
         return read_at_least(value, source, "stalled_after_seconds", 0,
                              config.stalled_after_seconds);
       }},
      {"web_url", "http(s) URL", "https://oom.example.com",
       [](const Node& value, const std::string& source, DaemonConfig& config) -> Result<Ok> {
         std::string url = value.as<std::string>();
         if (!url.starts_with("http://") && !url.starts_with("https://")) {
           return bad(source, value,
                      "web_url must be an http:// or https:// URL, the address `oomtriage serve` "
                      "is opened at");
         }
         while (url.ends_with('/')) url.pop_back();
         config.web_url = std::move(url);
         return Ok{};
       }},
      {"watch", "list of watch rules", "[{logs: /srv/ai-toolkit/output/*/log.txt}]", read_watch},
      {"alerts", "list of receivers", "[{type: webhook, url: http://127.0.0.1:9000/oom}]",
       read_alerts},
      {"alert_group_seconds", "integer", "30",
       [](const Node& value, const std::string&, DaemonConfig& config) -> Result<Ok> {
         config.alert_group_seconds = value.as<int>();
         return Ok{};
       }},
      {"heal", "mapping (heal keys)", "{ai_toolkit_db: /srv/ai-toolkit/aitk_db.db}",
       [](const Node& value, const std::string& source, DaemonConfig& config) -> Result<Ok> {
         OOMTRIAGE_ASSIGN_OR_RETURN(config.heal, parse_heal(value, source));
         return Ok{};
       }},
      {"host", "string", "gpu-node-17",
       [](const Node& value, const std::string&, DaemonConfig& config) -> Result<Ok> {
         config.host = value.as<std::string>();
         return Ok{};
       }},
      {"store", "postgresql:// URL", "postgresql://oomtriage@db.example/oom",
       [](const Node& value, const std::string& source, DaemonConfig& config) -> Result<Ok> {
         config.store = value.as<std::string>();
         if (auto checked = db::check_fleet_url(config.store); !checked) {
           return bad(source, value, checked.error().message);
         }
         return Ok{};
       }},
      {"fleet", "mapping (keep_days)", "{keep_days: 90}",
       [](const Node& value, const std::string& source, DaemonConfig& config) {
         return read_mapping(value, source, "fleet", fleet_config_keys(), config);
       }},
      {"backfill", "boolean", "false",
       [](const Node& value, const std::string&, DaemonConfig& config) -> Result<Ok> {
         config.backfill = value.as<bool>();
         return Ok{};
       }},
      {"metrics", "mapping (listen, textfile)", "{listen: 127.0.0.1:9839}",
       [](const Node& value, const std::string& source, DaemonConfig& config) {
         return read_mapping(value, source, "metrics", metrics_config_keys(), config);
       }},
      {"preflight", "warn | off", "warn",
       [](const Node& value, const std::string& source, DaemonConfig& config) -> Result<Ok> {
         config.preflight = value.as<std::string>();
         if (config.preflight != "warn" && config.preflight != "off") {
           return bad(source, value,
                      "preflight must be `warn` or `off`, not `" + config.preflight + "`");
         }
         return Ok{};
       }},
      {"gpu_memory", "auto | a memory size | a card name", "24GiB",
       [](const Node& value, const std::string& source, DaemonConfig& config) -> Result<Ok> {
         const std::string text = value.as<std::string>();
         if (text == "auto") {
           config.gpu_memory.reset();
         } else if (const auto bytes = parsers::parse_card_memory(text)) {
           config.gpu_memory = *bytes;
         } else {
           return bad(
               source, value,
               "gpu_memory must be `auto`, a memory size or a card: " + bytes.error().message);
         }
         return Ok{};
       }},
  };
  return kKeys;
}

const std::vector<ConfigKey<HealConfig>>& heal_config_keys() {
  static const std::vector<ConfigKey<HealConfig>> kKeys = {
      {"ai_toolkit_db", "absolute path", "/srv/ai-toolkit/aitk_db.db",
       [](const Node& value, const std::string& source, HealConfig& heal) -> Result<Ok> {
         heal.ai_toolkit_db = value.as<std::string>();
         if (!fs::path(heal.ai_toolkit_db).is_absolute())
           return bad(source, value, "ai_toolkit_db must be an absolute path");
         return Ok{};
       }},
      {"ui_url", "http(s):// URL", "http://127.0.0.1:8675",
       [](const Node& value, const std::string& source, HealConfig& heal) -> Result<Ok> {
         heal.ui_url = value.as<std::string>();
         if (heal.ui_url.rfind("http://", 0) != 0 && heal.ui_url.rfind("https://", 0) != 0)
           return bad(source, value, "ui_url must be an http:// or https:// URL");
         while (!heal.ui_url.empty() && heal.ui_url.back() == '/') heal.ui_url.pop_back();
         return Ok{};
       }},
      {"token_file", "path of a file holding the UI's token", "/etc/oomtriage/aitk.token",
       [](const Node& value, const std::string& source, HealConfig& heal) -> Result<Ok> {
         const std::string path = value.as<std::string>();
         auto token = read_secret(path);
         if (!token) return bad(source, value, "cannot read the UI's token file " + path);
         if (token->empty()) return bad(source, value, "the UI's token file " + path + " is empty");
         heal.ui_token = std::move(*token);
         return Ok{};
       }},
      {"jobs", "job-name glob or list of them", "[\"*\"]",
       [](const Node& value, const std::string&, HealConfig& heal) -> Result<Ok> {
         heal.jobs = string_list(value);
         return Ok{};
       }},
      {"fixes", "resume-safe fix id or list of them", "[lower_batch_size, cheapen_previews]",
       [](const Node& value, const std::string& source, HealConfig& heal) -> Result<Ok> {
         heal.fixes = string_list(value);
         for (const std::string& id : heal.fixes) {
           if (!triage::resume_safe(id)) {
             return bad(source, value,
                        fmt::format("fix `{}` is not one that keeps the checkpoint and optimizer "
                                    "state valid: it cannot be applied unattended",
                                    id));
           }
         }
         return Ok{};
       }},
      {"max_attempts", "integer >= 2", "3",
       [](const Node& value, const std::string& source, HealConfig& heal) {
         return read_at_least(value, source, "max_attempts", 2, heal.max_attempts);
       }},
      {"wait_seconds", "integer >= 1", "300",
       [](const Node& value, const std::string& source, HealConfig& heal) {
         return read_at_least(value, source, "wait_seconds", 1, heal.wait_seconds);
       }},
  };
  return kKeys;
}

const std::vector<ConfigKey<DaemonConfig>>& fleet_config_keys() {
  static const std::vector<ConfigKey<DaemonConfig>> kKeys = {
      {"keep_days", "integer 0..36500 (0 keeps everything)", "90",
       [](const Node& value, const std::string& source, DaemonConfig& config) -> Result<Ok> {
         config.fleet_keep_days = value.as<int>();
         if (config.fleet_keep_days < 0 || config.fleet_keep_days > 36500) {
           return bad(source, value, "keep_days must be 0 (keep everything) or more, up to 36500");
         }
         return Ok{};
       }},
  };
  return kKeys;
}

const std::vector<ConfigKey<DaemonConfig>>& metrics_config_keys() {
  static const std::vector<ConfigKey<DaemonConfig>> kKeys = {
      {"listen", "host:port", "127.0.0.1:9839",
       [](const Node& value, const std::string&, DaemonConfig& config) -> Result<Ok> {
         config.metrics_listen = value.as<std::string>();
         return Ok{};
       }},
      {"textfile", "path", "/var/lib/node_exporter/oomtriage.prom",
       [](const Node& value, const std::string&, DaemonConfig& config) -> Result<Ok> {
         config.metrics_textfile = value.as<std::string>();
         return Ok{};
       }},
  };
  return kKeys;
}

Result<DaemonConfig> parse_daemon_config(const std::string& text, const std::string& source) {
  DaemonConfig config;
  config.source = source;
  YAML::Node root;
  // Within the limits (size, nesting, the nodes aliases expand to) before the walk below.
  if (auto bounded = parsers::yaml_to_json(text, source); !bounded) return bounded.error();
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kBadInput,
                      fmt::format("{}:{}: {}", source, e.mark.line + 1, e.msg));
  }
  if (!root.IsMap()) return bad(source, root, "expected a mapping with a `watch:` list");
  const auto& keys = daemon_config_keys();
  try {
    for (const auto& item : root) {
      const std::string key = item.first.as<std::string>();
      const auto row =
          std::find_if(keys.begin(), keys.end(),
                       [&](const ConfigKey<DaemonConfig>& k) { return k.name == key; });
      if (row == keys.end()) {
        std::vector<std::string> names;
        for (const ConfigKey<DaemonConfig>& k : keys) names.emplace_back(k.name);
        const auto close = close_matches(key, std::move(names), 1);
        return bad(source, item.first,
                   "unknown key `" + key + "`" +
                       (close.empty() ? "" : "; did you mean `" + close[0] + "`?"));
      }
      OOMTRIAGE_TRY(row->read(item.second, source, config));
    }
  } catch (const YAML::Exception& e) {
    return make_error(ErrorCode::kBadInput,
                      fmt::format("{}:{}: {}", source, e.mark.line + 1, e.msg));
  }
  if (config.watch.empty()) return bad(source, root, "no `watch:` entries: nothing to do");
  return config;
}

Result<DaemonConfig> load_daemon_config(const std::string& path) {
  OOMTRIAGE_ASSIGN_OR_RETURN(const std::string text, read_user_file(path));
  return parse_daemon_config(text, path);
}

DaemonConfig inline_watch_config(const std::vector<std::string>& dirs) {
  DaemonConfig config;
  config.source = "inline";
  for (const std::string& dir : dirs) {
    WatchRule rule;
    // Absolute: the paths stored and sent in alerts must mean something away from this shell.
    rule.logs = (fs::absolute(dir).lexically_normal() / "*" / "log.txt").string();
    config.watch.push_back(rule);
  }
  return config;
}

PodLog pod_of(const std::string& log_path) {
  const fs::path path(log_path);
  PodLog pod;
  pod.container = path.parent_path().filename().string();
  // Namespaces and pod names cannot hold '_': the folder splits in three.
  const std::string folder = path.parent_path().parent_path().filename().string();
  const size_t first = folder.find('_');
  const size_t second = first == std::string::npos ? first : folder.find('_', first + 1);
  if (second != std::string::npos) {
    pod.namespace_name = folder.substr(0, first);
    pod.pod = folder.substr(first + 1, second - first - 1);
    pod.uid = folder.substr(second + 1);
  } else {
    pod.pod = folder;
  }
  // A Job's or a ReplicaSet's pod is its owner's name, '-' and five random characters of
  // [bcdfghjklmnpqrstvwxz2456789] (Kubernetes' SimpleNameGenerator); a pod named by hand keeps
  // its name.
  pod.owner = pod.pod;
  const size_t dash = pod.pod.rfind('-');
  if (dash != std::string::npos && dash > 0 && pod.pod.size() - dash - 1 == 5 &&
      pod.pod.find_first_not_of("bcdfghjklmnpqrstvwxz2456789", dash + 1) == std::string::npos) {
    pod.owner = pod.pod.substr(0, dash);
  }
  return pod;
}

std::string expand_template(const std::string& pattern, const std::string& log_path) {
  const fs::path path(log_path);
  std::string out = pattern;
  const PodLog pod = pod_of(log_path);
  const std::pair<std::string, std::string> vars[] = {
      {"{parent}", path.parent_path().filename().string()},
      {"{dir}", path.parent_path().string()},
      {"{stem}", path.stem().string()},
      {"{namespace}", pod.namespace_name},
      {"{pod}", pod.pod},
      {"{pod_owner}", pod.owner},
      {"{container}", pod.container},
  };
  for (const auto& [name, value] : vars) {
    for (size_t at = out.find(name); at != std::string::npos;
         at = out.find(name, at + value.size())) {
      out.replace(at, name.size(), value);
    }
  }
  return out;
}

}  // namespace oomtriage::daemon
