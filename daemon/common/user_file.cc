// daemon/common/user_file.cc: stat, statfs, open, fstat, fstatfs, then a bounded read.
#include "daemon/common/user_file.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace oomtriage::daemon {
namespace {

Error cannot_read(const std::string& path, int error) {
  return make_error(ErrorCode::kIo, path + ": cannot be read: " + std::strerror(error));
}

Error refused(const std::string& path, const std::string& why) {
  return make_error(ErrorCode::kBadInput, path + ": refused: " + why);
}

// Pseudo-files: their size says nothing, and some never end or have side effects when read.
bool pseudo_file_system(const struct statfs& fs) {
  return fs.f_type == PROC_SUPER_MAGIC || fs.f_type == SYSFS_MAGIC || fs.f_type == DEBUGFS_MAGIC ||
         fs.f_type == TRACEFS_MAGIC || fs.f_type == SECURITYFS_MAGIC;
}

class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

Result<std::string> read_user_file(const std::string& path, size_t max_bytes) {
  const std::string too_large = "larger than " + parsers::byte_size_text(max_bytes);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return cannot_read(path, errno);
  if (!S_ISREG(st.st_mode)) return refused(path, "not a regular file");
  struct statfs fs {};
  if (::statfs(path.c_str(), &fs) == 0 && pseudo_file_system(fs)) {
    return refused(path, "a file of /proc or /sys");
  }
  if (static_cast<uintmax_t>(st.st_size) > max_bytes) return refused(path, too_large);

  Descriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) return cannot_read(path, errno);
  // It may have been replaced between stat and open.
  if (::fstat(fd.get(), &st) != 0) return cannot_read(path, errno);
  if (!S_ISREG(st.st_mode)) return refused(path, "not a regular file");
  if (::fstatfs(fd.get(), &fs) == 0 && pseudo_file_system(fs)) {
    return refused(path, "a file of /proc or /sys");
  }
  if (static_cast<uintmax_t>(st.st_size) > max_bytes) return refused(path, too_large);

  std::string text;
  text.resize(static_cast<size_t>(st.st_size) + 1);  // one more: a file that grew is seen
  size_t got = 0;
  while (true) {
    if (got == text.size()) {
      if (text.size() > max_bytes) return refused(path, too_large);
      text.resize(std::min(text.size() * 2 + 4096, max_bytes + 1));
    }
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      return cannot_read(path, errno);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > max_bytes) return refused(path, too_large);
  text.resize(got);
  return text;
}

}  // namespace oomtriage::daemon
