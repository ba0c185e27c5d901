// parsers/sizes.cc: exact decimal size parsing (no floating point, so 2-decimal figures round
// exactly as the JSON contract says: half up).
#include "parsers/sizes.h"

#include <cctype>
#include <utility>

namespace oomtriage::parsers {
namespace {

__extension__ using Wide = unsigned __int128;

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// Any case ("MiB", "mib", "GIB"): logs re-cased by a UI or a wrapper keep their figures.
std::optional<uint64_t> unit_multiplier(std::string_view unit) {
  static constexpr std::pair<std::string_view, int> kUnits[] = {
      {"bytes", 0}, {"byte", 0}, {"B", 0},   {"KiB", 10}, {"KB", 10}, {"MiB", 20},
      {"MB", 20},   {"GiB", 30}, {"GB", 30}, {"TiB", 40}, {"TB", 40}};
  for (const auto& [name, shift] : kUnits) {
    if (equals_ignoring_case(unit, name)) return uint64_t{1} << shift;
  }
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> parse_size(std::string_view text) {
  size_t i = 0;
  Wide mantissa = 0;  // value * 10^decimals
  int digits = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    mantissa = mantissa * 10 + static_cast<unsigned>(text[i] - '0');
    if (++digits > 24) return std::nullopt;
    ++i;
  }
  if (digits == 0) return std::nullopt;
  int decimals = 0;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      mantissa = mantissa * 10 + static_cast<unsigned>(text[i] - '0');
      if (++decimals > 6) return std::nullopt;
      ++i;
    }
    if (decimals == 0) return std::nullopt;
  }
  while (i < text.size() && text[i] == ' ') ++i;
  const auto multiplier = unit_multiplier(text.substr(i));
  if (!multiplier) return std::nullopt;
  Wide scale = 1;
  for (int d = 0; d < decimals; ++d) scale *= 10;
  const Wide bytes = (mantissa * *multiplier + scale / 2) / scale;
  if (bytes > UINT64_MAX) return UINT64_MAX;  // NVML's "not available" sentinel prints as 2^64 B
  return static_cast<uint64_t>(bytes);
}

}  // namespace oomtriage::parsers
