// daemon/common/version.h: the one place the version is written (CMake's project() mirrors it).
#pragma once

namespace oomtriage {
inline constexpr const char* kVersion = "0.1.0";
}  // namespace oomtriage
