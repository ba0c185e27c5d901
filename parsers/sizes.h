// parsers/sizes.h
//
// Turns the size strings that allocators print ("1.50 GiB", "0 bytes", "600.15 MB") into bytes.
// PyTorch's format_size prints binary units with exactly two decimals; MPS before 2026 prints
// KB/MB/GB, which are binary as well. Whitespace between number and unit is optional because
// hard-wrapped logs lose it, and the unit's case is ignored ("20.00 mib", "1.50 GIB").
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace oomtriage::parsers {

// Returns the byte count, rounded half up, or nullopt when `text` is not a complete size.
std::optional<uint64_t> parse_size(std::string_view text);

}  // namespace oomtriage::parsers
