// tests/support/files.h: reading a whole file, the one helper every test file needs.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace oomtriage::testing {

inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace oomtriage::testing
