// daemon/cli/log_reader.cc: read(2) into a page-aligned buffer, then into the analyzer.
#include "daemon/cli/log_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "daemon/common/read_buffer.h"

namespace oomtriage::daemon {
namespace {

// The chunk that reads fastest here (bench/read_chunks): big enough to amortise the system call,
// small enough to stay in the L2 cache while the analyzer walks it.
constexpr size_t kReadChunk = 256 << 10;
constexpr off_t kProgressMinBytes = 64 << 20;

}  // namespace

Result<Ok> read_log_into(const std::string& path, parsers::LogAnalyzer& analyzer) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return make_error(ErrorCode::kIo, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    Error error = S_ISDIR(st.st_mode)
                      ? make_error(ErrorCode::kBadInput, fmt::format("{}: is a directory, expected a log file", path))
                      : make_error(ErrorCode::kIo, fmt::format("cannot stat {}: {}", path, std::strerror(errno)));
    ::close(fd);
    return error;
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  const bool show_progress = ::isatty(STDERR_FILENO) && st.st_size >= kProgressMinBytes;
  ReadBuffer buffer(kReadChunk);
  uint64_t done = 0;
  int last_percent = -1;
  while (true) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      Error error = make_error(ErrorCode::kIo, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
      ::close(fd);
      return error;
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
  return Ok{};
}

int exit_code_for(const Error& error) {
  return error.code == ErrorCode::kBadInput ? kExitBadInput : kExitEnvironment;
}

}  // namespace oomtriage::daemon
