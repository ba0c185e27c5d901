// daemon/service/file_identity.cc: pread(2), SHA-256 and directory listings; nothing is cached.
#include "daemon/service/file_identity.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "daemon/common/digest.h"

namespace oomtriage::daemon {
namespace fs = std::filesystem;

int open_log(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOATIME);
  if (fd >= 0 || errno != EPERM) return fd;
  return ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
}

std::string bytes_at(int fd, uint64_t from, uint64_t length) {
  std::string bytes(length, '\0');
  const ssize_t n = ::pread(fd, bytes.data(), bytes.size(), static_cast<off_t>(from));
  bytes.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return bytes;
}

std::optional<std::string> head_fingerprint(int fd) {
  const std::string head = bytes_at(fd, 0, kFingerprintBytes);
  if (head.size() < kFingerprintBytes) return std::nullopt;
  return sha256_hex(head);
}

std::string tail_before(int fd, uint64_t offset) {
  const uint64_t length = std::min<uint64_t>(offset, kTailBytes);
  return bytes_at(fd, offset - length, length);
}

std::string anchor_of(int fd, uint64_t offset) {
  if (offset == 0) return "";
  const uint64_t from = offset > kAnchorBytes ? offset - kAnchorBytes : 0;
  return sha256_hex(bytes_at(fd, from, offset - from));
}

int64_t count_lines(int fd, uint64_t upto) {
  std::vector<char> buffer(1 << 20);
  int64_t lines = 1;
  for (uint64_t pos = 0; pos < upto;) {
    const ssize_t n = ::pread(fd, buffer.data(), std::min<uint64_t>(buffer.size(), upto - pos),
                              static_cast<off_t>(pos));
    if (n <= 0) break;
    lines += std::count(buffer.data(), buffer.data() + n, '\n');
    pos += static_cast<uint64_t>(n);
  }
  return lines;
}

std::vector<fs::path> rotation_folders(const std::string& log_path, const WatchRule& rule) {
  const fs::path home = fs::path(log_path).parent_path();
  std::vector<fs::path> folders = {home, home / "logs"};
  for (const std::string& folder : rule.rotated_to) {
    folders.emplace_back(expand_template(folder, log_path));
  }
  return folders;
}

std::optional<std::string> find_by_identity(const std::vector<fs::path>& folders, uint64_t dev,
                                            uint64_t ino,
                                            const std::function<bool(int fd)>& same_content) {
  for (const fs::path& folder : folders) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(folder, ec)) {
      struct stat st {};
      if (::stat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
          static_cast<uint64_t>(st.st_dev) != dev || static_cast<uint64_t>(st.st_ino) != ino) {
        continue;
      }
      const int fd = open_log(entry.path().string());
      if (fd < 0) continue;
      const bool same = same_content(fd);
      ::close(fd);
      if (same) return entry.path().string();
    }
  }
  return std::nullopt;
}

}  // namespace oomtriage::daemon
