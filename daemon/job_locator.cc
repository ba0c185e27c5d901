// daemon/job_locator.cc: config discovery beside the log, hashing, and the job name.
#include "daemon/job_locator.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <yaml-cpp/yaml.h>

#include <fstream>
#include <sstream>

namespace oomtriage::daemon {
namespace fs = std::filesystem;
namespace {

std::optional<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream out;
  out << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return out.str();
}

// The config's job name, or an empty string plus a one-line warning when it will not parse.
std::string job_name_from_config(const fs::path& path, const std::string& text,
                                 std::string& warning) {
  if (path.extension() == ".json") {
    const auto doc = nlohmann::json::parse(text, nullptr, false);
    if (doc.is_discarded()) {
      warning = fmt::format("{}: not valid JSON; scanning without its config", path.string());
      return {};
    }
    const auto* name = doc.is_object() && doc.contains("config") && doc["config"].is_object() &&
                               doc["config"].contains("name") && doc["config"]["name"].is_string()
                           ? &doc["config"]["name"]
                           : nullptr;
    return name ? name->get<std::string>() : std::string();
  }
  try {
    const YAML::Node doc = YAML::Load(text);
    const YAML::Node name = doc["config"]["name"];
    if (name && name.IsScalar()) return name.as<std::string>();
  } catch (const YAML::Exception& e) {
    warning = fmt::format("{}:{}: {}; scanning without its config", path.string(), e.mark.line + 1,
                          e.msg);
  }
  return {};
}

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &length, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

JobLookup locate_job(const fs::path& log, const std::optional<fs::path>& explicit_config,
                     const std::optional<std::string>& name_from_log) {
  JobLookup lookup;
  std::optional<fs::path> config_path = explicit_config;
  if (!config_path) {
    for (const char* candidate : {".job_config.json", "config.yaml"}) {
      std::error_code ec;
      const fs::path path = log.parent_path() / candidate;
      if (fs::is_regular_file(path, ec)) {
        config_path = path;
        break;
      }
    }
  }
  std::optional<std::string> text;
  if (config_path) {
    text = read_file(*config_path);
    if (!text && explicit_config) {
      lookup.error = fmt::format("cannot read config {}: {}", config_path->string(),
                                 std::strerror(errno));
      return lookup;
    }
  }
  if (!config_path || !text) {
    if (name_from_log) lookup.job = JobInfo{*name_from_log, std::nullopt, std::nullopt};
    return lookup;
  }
  JobInfo job;
  job.config_path = config_path->string();
  job.config_sha256 = sha256_hex(*text);
  job.name = job_name_from_config(*config_path, *text, lookup.warning);
  if (job.name.empty() && name_from_log) job.name = *name_from_log;
  if (job.name.empty()) job.name = fs::absolute(*config_path).parent_path().filename().string();
  lookup.job = std::move(job);
  return lookup;
}

}  // namespace oomtriage::daemon
