// daemon/job_locator.cc: config discovery beside the log, hashing, parsing, and the job name.
#include "daemon/job_locator.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
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

parsers::ConfigFormat format_for(const fs::path& path) {
  const std::string ext = path.extension().string();
  return ext == ".json" || ext == ".jsonc" ? parsers::ConfigFormat::kJson
                                           : parsers::ConfigFormat::kYaml;
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
                     const parsers::LogAnalysis& analysis) {
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
    if (!text) {
      const std::string reason = std::strerror(errno);
      if (explicit_config) {
        lookup.error = fmt::format("cannot read config {}: {}", config_path->string(), reason);
        return lookup;
      }
      lookup.warning = fmt::format("cannot read {}: {}; triaging without it",
                                   config_path->string(), reason);
    }
  }

  JobInfo job;
  if (text) {
    job.config_path = config_path->string();
    job.config_sha256 = sha256_hex(*text);
    lookup.config_text = *text;
    parsers::ConfigLoad load =
        parsers::parse_job_config(*text, format_for(*config_path), config_path->string());
    if (load.config) {
      lookup.config = std::move(load.config);
    } else {
      lookup.warning = load.error + "; triaging without the config";
      lookup.config_problem = "the job config did not parse";
    }
  } else if (!analysis.printed_config.empty()) {
    parsers::ConfigLoad load = parsers::parse_job_config(
        analysis.printed_config, parsers::ConfigFormat::kPrintedProcess,
        log.string() + " (the config printed at its top)");
    if (load.config) {
      lookup.config = std::move(load.config);
    } else {
      lookup.config_problem = "the config printed in the log did not parse";
    }
  }
  if (!lookup.config && lookup.config_problem.empty()) {
    lookup.config_problem = "no job config was found";
  }

  if (lookup.config && !lookup.config->name.empty()) job.name = lookup.config->name;
  if (job.name.empty() && analysis.job_name) job.name = *analysis.job_name;
  if (job.name.empty() && config_path && text) {
    job.name = fs::absolute(*config_path).parent_path().filename().string();
  }
  if (!job.name.empty()) lookup.job = std::move(job);
  return lookup;
}

}  // namespace oomtriage::daemon
