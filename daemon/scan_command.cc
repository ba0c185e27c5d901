// daemon/scan_command.cc: file reading, the progress bar on stderr, exit codes, output.
#include "daemon/scan_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "daemon/job_locator.h"
#include "daemon/json_output.h"
#include "daemon/text_output.h"
#include "parsers/log_analyzer.h"

namespace oomtriage::daemon {
namespace {

constexpr size_t kReadChunk = 1 << 20;
constexpr off_t kProgressMinBytes = 64 << 20;

enum ExitCode { kOk = 0, kBadInput = 1, kEnvironment = 2 };

void report(const std::string& message) { fmt::print(stderr, "oomtriage: {}\n", message); }

// Reads `path` into the analyzer. Returns an exit code and fills `error` on failure.
int analyze_file(const std::string& path, parsers::LogAnalyzer& analyzer, std::string& error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = fmt::format("cannot read {}: {}", path, std::strerror(errno));
    return kEnvironment;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    error = S_ISDIR(st.st_mode) ? fmt::format("{}: is a directory, expected a log file", path)
                                : fmt::format("cannot stat {}: {}", path, std::strerror(errno));
    ::close(fd);
    return S_ISDIR(st.st_mode) ? kBadInput : kEnvironment;
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  const bool show_progress = ::isatty(STDERR_FILENO) && st.st_size >= kProgressMinBytes;
  std::vector<char> buffer(kReadChunk);
  uint64_t done = 0;
  int last_percent = -1;
  while (true) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      error = fmt::format("cannot read {}: {}", path, std::strerror(errno));
      ::close(fd);
      return kEnvironment;
    }
    if (n == 0) break;
    analyzer.feed(std::string_view(buffer.data(), static_cast<size_t>(n)));
    done += static_cast<uint64_t>(n);
    if (show_progress) {
      const int percent = static_cast<int>(done * 100 / static_cast<uint64_t>(st.st_size));
      if (percent != last_percent) {
        fmt::print(stderr, "\rscanning {} {:3d}%", path, std::min(percent, 100));
        last_percent = percent;
      }
    }
  }
  if (show_progress) fmt::print(stderr, "\r\x1b[2K");
  ::close(fd);
  return kOk;
}

bool use_color(ColorMode mode) {
  if (mode == ColorMode::kAlways) return true;
  if (mode == ColorMode::kNever) return false;
  const char* no_color = std::getenv("NO_COLOR");
  return ::isatty(STDOUT_FILENO) && (no_color == nullptr || *no_color == '\0');
}

}  // namespace

int run_scan(const ScanOptions& options) {
  int exit_code = kOk;
  std::vector<ScannedLog> scanned;
  std::optional<std::filesystem::path> explicit_config;
  if (options.config) explicit_config = *options.config;

  for (const std::string& path : options.logs) {
    parsers::AnalyzerOptions analyzer_options;
    analyzer_options.trainer = options.trainer;
    parsers::LogAnalyzer analyzer(analyzer_options);
    std::string error;
    if (const int rc = analyze_file(path, analyzer, error); rc != kOk) {
      report(error);
      exit_code = std::max(exit_code, rc);
      continue;
    }
    ScannedLog log;
    log.path = path;
    log.analysis = analyzer.finish();
    const auto& a = log.analysis;
    if (a.bytes == 0) {
      report(fmt::format("{}: empty file, nothing to analyse", path));
    } else if (a.binary_bytes * 10 > std::min<uint64_t>(a.bytes, 64 * 1024)) {
      report(fmt::format("{}: does not look like a text log ({} control bytes in the first {}); "
                         "scanned anyway",
                         path, a.binary_bytes, std::min<uint64_t>(a.bytes, 64 * 1024)));
    }
    if (a.truncated_records > 0) {
      report(fmt::format("{}: {} record(s) longer than {} bytes were cut", path,
                         a.truncated_records, parsers::kMaxRecordBytes));
    }
    JobLookup lookup = locate_job(path, explicit_config, a.job_name);
    if (!lookup.error.empty()) {
      report(lookup.error);
      return kEnvironment;
    }
    if (!lookup.warning.empty()) report(lookup.warning);
    log.job = std::move(lookup.job);
    scanned.push_back(std::move(log));
  }

  if (options.json) {
    fmt::print("{}\n", scan_to_json(scanned).dump(2, ' ', false,
                                                   nlohmann::json::error_handler_t::replace));
  } else {
    const bool color = use_color(options.color);
    for (size_t i = 0; i < scanned.size(); ++i) {
      if (i > 0) fmt::print("\n");
      fmt::print("{}", render_scan_text(scanned[i], color));
    }
  }
  return exit_code;
}

}  // namespace oomtriage::daemon
