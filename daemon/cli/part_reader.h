// daemon/cli/part_reader.h
//
// A regular file fed to the analyzer in parts read with pread(2) into page-aligned buffers on
// both cores: a helper thread and the analyzer's own, whichever is free, read a part and find
// its runs of progress frames (parsers/frame_runs.h) a few parts ahead of the analyzer, which
// then jumps over each run in one step. Reads, not a mapping: a log written in small pieces sits in
// 4 KiB page-cache folios, and mapping it costs ~6x the copy here (bench/read_chunks); read back
// into large folios, the two cost the same; and a mapped log truncated by a rotation meanwhile
// would kill scan with SIGBUS. Memory stays at a ring of a few parts whatever the file's size.
#pragma once

#include <cstdint>
#include <functional>

#include "parsers/log_analyzer.h"

namespace oomtriage::daemon {

// Feeds the first `size` bytes of `fd` to `analyzer` (fewer if the file shrinks meanwhile);
// `on_progress(done)` after each part. Returns 0, or the errno of a failed read.
int feed_parts(int fd, uint64_t size, parsers::LogAnalyzer& analyzer,
               const std::function<void(uint64_t)>& on_progress);

}  // namespace oomtriage::daemon
