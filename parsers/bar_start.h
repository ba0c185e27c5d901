// parsers/bar_start.h
//
// The step a run's training bar starts at, which says where a restart resumed: tqdm draws its
// `initial` position before the first update, so the first frame of a resumed run shows the
// step it resumed at. The analyzer parses only the last frame of a burst of frames, so until the
// bar shows up the bytes are fed one record at a time; after that, as they come.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "parsers/log_analyzer.h"

namespace oomtriage::parsers {

// Feeds `bytes` to `analyzer`; sets `start` once the training bar's first step is known.
void feed_until_bar_start(LogAnalyzer& analyzer, std::string_view bytes,
                          std::optional<int64_t>& start);

}  // namespace oomtriage::parsers
