// daemon/cli/log_reader.cc: a regular file is fed in parts read on both cores (part_reader.h);
// anything else (a pipe, a device) and a container log in the CRI format (decoded first) is read
// ahead on a second thread into page-aligned buffers; a gzip file is read through zlib.
#include "daemon/cli/log_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <vector>

#include "daemon/cli/part_reader.h"
#include "daemon/cli/read_ahead.h"
#include "parsers/cri_log.h"

namespace oomtriage::daemon {
namespace {

// Read on a second thread, a few chunks ahead of the analyzer (bench/read_chunks measures the
// chunk sizes).
constexpr size_t kReadChunk = 128 << 10;
constexpr size_t kReadBuffers = 4;
constexpr off_t kProgressMinBytes = 64 << 20;

// Passes chunks on as they come, decoded first when the log is a container log (kubelet's CRI
// lines): the reader gets what the trainer wrote.
class ContentFeeder {
 public:
  ContentFeeder(const ContentSink& sink, bool cri) : sink_(sink), cri_(cri) {}
  void set_cri(bool cri) { cri_ = cri; }
  void feed(std::string_view chunk) {
    if (!cri_) {
      sink_(chunk);
      return;
    }
    content_.clear();
    decoder_.feed(chunk, content_);
    sink_(content_);
  }
  void finish() {
    if (!cri_) return;
    content_.clear();
    decoder_.finish(content_);
    sink_(content_);
  }

 private:
  const ContentSink& sink_;
  bool cri_;
  parsers::CriDecoder decoder_;
  std::string content_;
};

// Feeds a gzip file's content (a container log's decoded), closing `fd`.
Result<Ok> feed_gzip(int fd, const std::string& path, const ContentSink& sink) {
  gzFile gz = ::gzdopen(fd, "rb");
  if (gz == nullptr) {
    ::close(fd);
    return make_error(ErrorCode::kIo, fmt::format("cannot read {}: out of memory", path));
  }
  ::gzbuffer(gz, 256 << 10);
  std::vector<char> buffer(kReadChunk);
  ContentFeeder feeder(sink, false);
  bool first = true;
  int n;
  while ((n = ::gzread(gz, buffer.data(), static_cast<unsigned>(buffer.size()))) > 0) {
    const std::string_view chunk(buffer.data(), static_cast<size_t>(n));
    if (first) feeder.set_cri(parsers::looks_like_cri(chunk));
    first = false;
    feeder.feed(chunk);
  }
  feeder.finish();
  // A truncated stream ends with 0 and the error set, not always with -1.
  int zerror = Z_OK;
  const std::string message = ::gzerror(gz, &zerror);
  ::gzclose(gz);
  if (n < 0 || (zerror != Z_OK && zerror != Z_STREAM_END)) {
    // A truncated or damaged archive (logrotate killed mid-write): what could be read is
    // analysed, and the reader is told.
    fmt::print(stderr, "oomtriage: {}: damaged gzip data ({}); analysed what could be read\n", path,
               message);
  }
  return Ok{};
}

// An open log: its descriptor, what it is and, for a regular file, its first bytes.
struct OpenLog {
  int fd = -1;
  struct stat st {};
  bool gzip = false;
  bool cri = false;
  bool peeked = false;  // false for a pipe: its first chunk tells whether it is a container log
};

Result<OpenLog> open_log(const std::string& path) {
  OpenLog log;
  log.fd = path == "-" ? ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 0)
                       : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (log.fd < 0) {
    return make_error(ErrorCode::kIo,
                      fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  if (::fstat(log.fd, &log.st) != 0 || S_ISDIR(log.st.st_mode)) {
    Error error = S_ISDIR(log.st.st_mode)
                      ? make_error(ErrorCode::kBadInput,
                                   fmt::format("{}: is a directory, expected a log file", path))
                      : make_error(ErrorCode::kIo,
                                   fmt::format("cannot stat {}: {}", path, std::strerror(errno)));
    ::close(log.fd);
    return error;
  }
  ::posix_fadvise(log.fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  char head[4096];
  const ssize_t head_size = S_ISREG(log.st.st_mode) ? ::pread(log.fd, head, sizeof head, 0) : -1;
  log.peeked = head_size >= 0;
  log.gzip = head_size >= 2 && head[0] == '\x1f' && head[1] == '\x8b';
  log.cri = head_size > 0 &&
            parsers::looks_like_cri(std::string_view(head, static_cast<size_t>(head_size)));
  return log;
}

// Reads an opened gzip file, pipe, device or container log into `sink`; closes the descriptor.
Result<Ok> read_content(const OpenLog& log, const std::string& path, const ContentSink& sink,
                        const std::function<void(uint64_t)>& on_progress) {
  // A rotated log compressed by logrotate: read through zlib (it takes the descriptor).
  if (log.gzip) return feed_gzip(log.fd, path, sink);
  ContentFeeder feeder(sink, log.cri);
  ReadAhead reader(log.fd, kReadChunk, kReadBuffers);
  uint64_t done = 0;
  for (std::string_view chunk; !(chunk = reader.next()).empty();) {
    if (done == 0 && !log.peeked) feeder.set_cri(parsers::looks_like_cri(chunk));
    feeder.feed(chunk);
    done += chunk.size();
    on_progress(done);
  }
  feeder.finish();
  const int error = reader.error();
  ::close(log.fd);
  if (error != 0) {
    return make_error(ErrorCode::kIo,
                      fmt::format("cannot read {}: {}", path, std::strerror(error)));
  }
  return Ok{};
}

}  // namespace

Result<Ok> read_log_into(const std::string& path, parsers::LogAnalyzer& analyzer) {
  auto log = open_log(path);
  if (!log) return log.error();
  const bool show_progress = ::isatty(STDERR_FILENO) && log->st.st_size >= kProgressMinBytes;
  int last_percent = -1;
  const auto on_progress = [&](uint64_t done) {
    if (!show_progress) return;
    const int percent = static_cast<int>(done * 100 / static_cast<uint64_t>(log->st.st_size));
    if (percent != last_percent) {
      fmt::print(stderr, "\rscanning {} {:3d}%", path, std::min(percent, 100));
      last_percent = percent;
    }
  };
  Result<Ok> read = Ok{};
  if (S_ISREG(log->st.st_mode) && !log->cri && !log->gzip) {
    // A plain file: read in parts on both cores.
    const int error =
        feed_parts(log->fd, static_cast<uint64_t>(log->st.st_size), analyzer, on_progress);
    ::close(log->fd);
    if (error != 0) {
      read =
          make_error(ErrorCode::kIo, fmt::format("cannot read {}: {}", path, std::strerror(error)));
    }
  } else {
    read = read_content(
        *log, path, [&](std::string_view chunk) { analyzer.feed(chunk); }, on_progress);
  }
  if (show_progress) fmt::print(stderr, "\r\x1b[2K");
  return read;
}

Result<Ok> read_log_content(const std::string& path, const ContentSink& sink) {
  auto log = open_log(path);
  if (!log) return log.error();
  return read_content(*log, path, sink, [](uint64_t) {});
}

}  // namespace oomtriage::daemon
