// daemon/render/report_view.cc: the memory figures every report output draws its bar from.
#include "daemon/render/report_view.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "daemon/common/human_units.h"

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

std::string text_of(const nlohmann::ordered_json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::optional<int64_t> integer_of(const nlohmann::ordered_json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

std::string event_title(const nlohmann::ordered_json& event) {
  return fmt::format("{} in {}, {}{}", text_of(event, "kind"), text_of(event, "phase"),
                     step_text(integer_of(event, "step"), integer_of(event, "total_steps")),
                     event.value("recovered", false) ? " (recovered)" : "");
}

std::string cut(std::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return std::string(text.substr(0, end)) + "…";
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

std::string gpu_peak_text(const GpuMemoryView& gpu) {
  std::string text = fmt::format("peak {}", format_bytes(gpu.peak_bytes));
  if (gpu.total_bytes > 0) {
    text += fmt::format(
        " of {} ({:.0f}%)", format_bytes(gpu.total_bytes),
        100.0 * static_cast<double>(gpu.peak_bytes) / static_cast<double>(gpu.total_bytes));
  }
  text += " in " + gpu.peak_phase;
  if (gpu.peak_step) text += fmt::format(" at step {}", *gpu.peak_step);
  return text;
}

}  // namespace oomtriage::daemon
