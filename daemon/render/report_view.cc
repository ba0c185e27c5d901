// daemon/render/report_view.cc: the memory figures every report output draws its bar from.
#include "daemon/render/report_view.h"

#include <algorithm>
#include <cctype>

namespace oomtriage::daemon {
namespace {

uint64_t bytes_of(const nlohmann::ordered_json& event, const char* key) {
  const auto it = event.find(key);
  if (it == event.end() || !it->is_number()) return 0;
  return it->is_number_integer() && it->get<int64_t>() < 0 ? 0 : it->get<uint64_t>();
}

}  // namespace

MemoryAtCrash memory_at_crash(const nlohmann::ordered_json& event) {
  MemoryAtCrash m;
  if (!event.is_object()) return m;
  m.capacity = bytes_of(event, "total_capacity_bytes");
  if (m.capacity == 0) return m;
  m.in_use = bytes_of(event, "this_process_in_use_bytes");
  if (m.in_use == 0 || m.in_use > m.capacity) {
    // Older messages give only PyTorch's own figures.
    m.in_use = std::min(m.capacity, bytes_of(event, "allocated_by_pytorch_bytes") +
                                        bytes_of(event, "reserved_unallocated_bytes"));
  }
  if (const auto it = event.find("free_bytes"); it != event.end() && it->is_number()) {
    m.free = std::min(bytes_of(event, "free_bytes"), m.capacity - m.in_use);
    m.other = m.capacity - m.in_use - *m.free;
  }
  m.tried = bytes_of(event, "tried_to_allocate_bytes");
  return m;
}

std::string shell_quote(std::string_view text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_-./:@%+=,").find(c) != std::string_view::npos;
  });
  if (plain) return std::string(text);
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace oomtriage::daemon
