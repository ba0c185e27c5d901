// daemon/common/user_file.h
//
// The one reader of a file a user controls (a job config of any trainer, a dataset config, a
// `check --spec` file, the daemon config and the secret files it names): a regular file only, at
// most `max_bytes`. A FIFO, a device or a directory is refused from stat(2) without being opened
// (a FIFO with no writer never blocks, /dev/zero is never read); a file of /proc or /sys is
// refused from statfs(2) before it is opened, and again from fstatfs(2) after; the file is opened
// O_NONBLOCK and checked again with fstat(2) (it may have been replaced in between), and at most
// max_bytes + 1 bytes are read, so a file that grows while it is read is refused too. The limits
// are in parsers/bounded_document.h and docs/reliability.md ("Files a user controls").
#pragma once

#include <cstddef>
#include <string>

#include "parsers/bounded_document.h"
#include "parsers/result.h"

namespace oomtriage::daemon {

// The file's bytes, or a one-line error naming `path`:
//   kBadInput "PATH: refused: not a regular file" / "PATH: refused: a file of /proc or /sys" /
//             "PATH: refused: larger than 4 MiB";
//   kIo       "PATH: cannot be read: No such file or directory" (and other errno reasons).
Result<std::string> read_user_file(const std::string& path,
                                   size_t max_bytes = parsers::kMaxDocumentBytes);

}  // namespace oomtriage::daemon
