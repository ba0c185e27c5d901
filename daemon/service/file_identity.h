// daemon/service/file_identity.h
//
// How the tailer knows a log is still the one it was reading: (device, inode) says which file,
// the content says whether it is still the same bytes. A head fingerprint (SHA-256 of the first
// KiB, none before a KiB exists, so an empty file never matches everything); an anchor (SHA-256
// of the 256 bytes before the read offset, stored with the offset in one transaction); and the
// last 64 bytes read, kept in memory and compared before every read. A file rewritten in place,
// truncated and written past the old offset, or a reused inode fails one of them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "daemon/common/daemon_config.h"

namespace oomtriage::daemon {

constexpr uint64_t kFingerprintBytes = 1024;
constexpr uint64_t kAnchorBytes = 256;
constexpr uint64_t kTailBytes = 64;

// Opens a log to read, without updating its access time when allowed (O_NOATIME needs the
// file's owner or CAP_FOWNER; otherwise a plain open). -1 with errno on failure.
int open_log(const std::string& path);
// Up to `length` bytes at `from` (fewer at the end of the file, none on an error).
std::string bytes_at(int fd, uint64_t from, uint64_t length);
// The first KiB's hash; nullopt while the file is shorter.
std::optional<std::string> head_fingerprint(int fd);
// The last bytes before `offset` (at most kTailBytes): what a read ending there fed last.
std::string tail_before(int fd, uint64_t offset);
// The hash of the bytes just before `offset` ("" at 0): what was read there must still be there.
std::string anchor_of(int fd, uint64_t offset);
// 1 + the newlines before `upto`: the line a reader starting there is on.
int64_t count_lines(int fd, uint64_t upto);

// Where a rotated log may have gone: its own folder, its logs/ (AI Toolkit moves a restarted
// job's log there), and the rule's rotated_to folders (logrotate's olddir).
std::vector<std::filesystem::path> rotation_folders(const std::string& log_path,
                                                    const WatchRule& rule);

// The path in `folders` that is (dev, ino) and whose content `same_content(fd)` accepts.
std::optional<std::string> find_by_identity(const std::vector<std::filesystem::path>& folders,
                                            uint64_t dev, uint64_t ino,
                                            const std::function<bool(int fd)>& same_content);

}  // namespace oomtriage::daemon
