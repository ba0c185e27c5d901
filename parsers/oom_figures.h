// parsers/oom_figures.h
//
// Reads the allocator figures out of an OOM message: requested, capacity, free, allocated,
// reserved, and the other processes on the GPU. The message may be hard-wrapped (terminals cut
// mid-word: "Includ" / "ing non-PyTorch") or truncated ("is res"), so the patterns run on the
// message with all whitespace removed, every field is optional, each clause is matched on its
// own (an unknown clause in between loses nothing), and case is ignored.
#pragma once

#include <string>
#include <string_view>

#include "parsers/event.h"
#include "parsers/result.h"

namespace oomtriage::parsers {

// `message` is the text from the OOM pattern's match on, continuation lines joined.
// The one figure a message other than the caching allocator's prints, the size asked for: c10's
// "DefaultCPUAllocator: can't allocate memory: you tried to allocate 1073741824 bytes", numpy's
// "MemoryError: Unable to allocate 3.66 MiB for an array with shape ...", TensorFlow's "failed to
// allocate 890.06M (933298432 bytes) from device: HIP_ERROR_OutOfMemory".
MemoryFigures extract_request_figures(std::string_view message);

MemoryFigures extract_figures(std::string_view message, OomKind kind);

// The message without whitespace: what the figure patterns see.
std::string squash_whitespace(std::string_view text);

// True when an allocator message still lacks its closing text, so the next line may continue it.
bool looks_incomplete(std::string_view message);

// True when every figure pattern compiled; otherwise false, and `error` (if not null) names each
// bad pattern with RE2's reason. For a start-up check.
Result<Ok> oom_figures_ok();

}  // namespace oomtriage::parsers
