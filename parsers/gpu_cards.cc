// parsers/gpu_cards.cc: the card table (memory sizes as their makers sell them) and the reading
// of sizes and card names. docs/memory-model.md lists the table.
#include "parsers/gpu_cards.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <optional>

namespace oomtriage::parsers {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

// Words before a card's name that name its maker or line, not the card.
constexpr std::string_view kMakerWords[] = {"nvidia", "geforce", "rtx",      "gtx",    "tesla",
                                            "quadro", "amd",     "instinct", "radeon", "rx"};

std::string normalized(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

// "rtx4090" -> "4090", "nvidiageforcertx3090" -> "3090".
std::string without_maker(std::string name) {
  for (bool stripped = true; stripped;) {
    stripped = false;
    for (const std::string_view word : kMakerWords) {
      if (name.size() > word.size() && name.compare(0, word.size(), word) == 0) {
        name.erase(0, word.size());
        stripped = true;
      }
    }
  }
  return name;
}

std::string key_of(std::string_view name) { return without_maker(normalized(name)); }

// "24", "24G", "24 GB", "24GiB", "24576MiB", "1.5g" -> bytes; nullopt when it is not a size.
// A card "sold as 24 GB" holds 24 GiB, so G and GB are GiB here, M and MB MiB.
std::optional<uint64_t> size_bytes(std::string_view text, bool* bare) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    ++i;
  }
  if (i == 0) return std::nullopt;
  const std::string number(text.substr(0, i));
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !(value > 0)) return std::nullopt;
  std::string unit;
  for (const char c : text.substr(i)) {
    if (c != ' ') unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  *bare = unit.empty();
  if (unit.empty() || unit == "g" || unit == "gb" || unit == "gib") {
    return static_cast<uint64_t>(value * static_cast<double>(kGiB));
  }
  if (unit == "m" || unit == "mb" || unit == "mib") {
    return static_cast<uint64_t>(value * static_cast<double>(kMiB));
  }
  return std::nullopt;
}

const GpuCard* card_by_key(std::string_view key) {
  for (const GpuCard& card : gpu_cards()) {
    if (key_of(card.name) == key) return &card;
  }
  return nullptr;
}

std::string sizes_text(const GpuCard& card) {
  std::vector<int> sizes = card.sizes_gib;
  std::sort(sizes.begin(), sizes.end());
  std::string out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out += i + 1 == sizes.size() ? " or " : ", ";
    out += std::to_string(sizes[i]);
  }
  return out;
}

Result<uint64_t> card_size(const GpuCard& card, std::string_view text) {
  if (card.size_is_ambiguous) {
    std::vector<std::string> named;
    for (const int gib : card.sizes_gib) named.push_back(fmt::format("{}-{}GB", card.name, gib));
    return make_error(ErrorCode::kBadInput,
                      fmt::format("'{}': the {} comes with {} GiB: name one ({})", text, card.name,
                                  sizes_text(card), fmt::join(named, ", ")));
  }
  return static_cast<uint64_t>(card.sizes_gib.front()) * kGiB;
}

// "a10080gb" -> the A100's 80 GiB: a card's key followed by one of its sizes.
std::optional<Result<uint64_t>> card_with_size(const std::string& key, std::string_view text) {
  const GpuCard* best = nullptr;
  std::string rest;
  for (const GpuCard& card : gpu_cards()) {
    const std::string k = key_of(card.name);
    if (key.size() <= k.size() || key.compare(0, k.size(), k) != 0) continue;
    if (best != nullptr && key_of(best->name).size() >= k.size()) continue;
    const std::string tail = key.substr(k.size());
    const size_t digits = tail.find_first_not_of("0123456789");
    if (digits == 0) continue;
    const std::string unit = digits == std::string::npos ? "" : tail.substr(digits);
    if (unit != "" && unit != "g" && unit != "gb" && unit != "gib") continue;
    best = &card;
    rest = tail.substr(0, digits);
  }
  if (best == nullptr) return std::nullopt;
  const int gib = std::atoi(rest.c_str());
  if (std::find(best->sizes_gib.begin(), best->sizes_gib.end(), gib) == best->sizes_gib.end()) {
    return make_error(ErrorCode::kBadInput, fmt::format("'{}': the {} comes with {} GiB, not {}",
                                                        text, best->name, sizes_text(*best), gib));
  }
  return static_cast<uint64_t>(gib) * kGiB;
}

}  // namespace

const std::vector<GpuCard>& gpu_cards() {
  // The sizes their makers sell them with (GB on the box, GiB on the card).
  static const std::vector<GpuCard> kCards = {
      {"RTX 2060", {6, 12}},
      {"RTX 2070", {8}},
      {"RTX 2080", {8}},
      {"RTX 2080 Ti", {11}},
      {"Titan RTX", {24}},
      {"Titan V", {12}},
      {"RTX 3050", {8}},
      {"RTX 3060", {12, 8}},
      {"RTX 3060 Ti", {8}},
      {"RTX 3070", {8}},
      {"RTX 3070 Ti", {8}},
      {"RTX 3080", {10, 12}},
      {"RTX 3080 Ti", {12}},
      {"RTX 3090", {24}},
      {"RTX 3090 Ti", {24}},
      {"RTX 4060", {8}},
      {"RTX 4060 Ti", {8, 16}, true},
      {"RTX 4070", {12}},
      {"RTX 4070 Super", {12}},
      {"RTX 4070 Ti", {12}},
      {"RTX 4070 Ti Super", {16}},
      {"RTX 4080", {16}},
      {"RTX 4080 Super", {16}},
      {"RTX 4090", {24}},
      {"RTX 4090 D", {24}},
      {"RTX 5060", {8}},
      {"RTX 5060 Ti", {8, 16}, true},
      {"RTX 5070", {12}},
      {"RTX 5070 Ti", {16}},
      {"RTX 5080", {16}},
      {"RTX 5090", {32}},
      {"RTX A2000", {6, 12}, true},
      {"RTX A4000", {16}},
      {"RTX A4500", {20}},
      {"RTX A5000", {24}},
      {"RTX A6000", {48}},
      {"RTX 4000 Ada", {20}},
      {"RTX 5000 Ada", {32}},
      {"RTX 6000 Ada", {48}},
      {"RTX PRO 6000", {96}},
      {"T4", {16}},
      {"P100", {16, 12}},
      {"P40", {24}},
      {"V100", {16, 32}, true},
      {"A10", {24}},
      {"A10G", {24}},
      {"A16", {16}},
      {"A30", {24}},
      {"A40", {48}},
      {"A100", {40, 80}, true},
      {"A800", {80, 40}},
      {"L4", {24}},
      {"L20", {48}},
      {"L40", {48}},
      {"L40S", {48}},
      {"H20", {96}},
      {"H100", {80, 94}},
      {"H100 NVL", {94}},
      {"H800", {80}},
      {"H200", {141}},
      {"GH200", {96, 144}},
      {"B200", {180}},
      {"B300", {288}},
      {"MI210", {64}},
      {"MI250X", {128}},
      {"MI300X", {192}},
      {"MI325X", {256}},
      {"MI355X", {288}},
      {"RX 7900 XTX", {24}},
      {"Radeon PRO W7900", {48}},
  };
  return kCards;
}

int largest_card_gib() {
  int largest = 0;
  for (const GpuCard& card : gpu_cards()) {
    for (const int gib : card.sizes_gib) largest = std::max(largest, gib);
  }
  return largest;
}

Result<uint64_t> parse_card_memory(std::string_view text) {
  bool bare = false;
  const std::string key = key_of(text);
  if (const auto bytes = size_bytes(text, &bare)) {
    // "3090" is the card, not 3090 GiB.
    if (const GpuCard* card = bare ? card_by_key(key) : nullptr) return card_size(*card, text);
    if (*bytes > static_cast<uint64_t>(largest_card_gib()) * kGiB) {
      return make_error(ErrorCode::kBadInput,
                        fmt::format("'{}': no card has that much memory (the largest the table "
                                    "knows has {} GiB): give one GPU's memory (24GB) or its "
                                    "name (RTX 4090, A100-80GB, H100)",
                                    text, largest_card_gib()));
    }
    return *bytes;
  }
  if (key.empty()) {
    return make_error(ErrorCode::kBadInput,
                      fmt::format("'{}': not a memory size (24, 24GB, 24GiB) or a card name "
                                  "(RTX 4090, A100-80GB, H100)",
                                  text));
  }
  if (const GpuCard* card = card_by_key(key)) return card_size(*card, text);
  if (auto sized = card_with_size(key, text)) return std::move(*sized);
  return make_error(ErrorCode::kBadInput,
                    fmt::format("'{}': not a memory size (24, 24GB, 24GiB) or a card the table "
                                "knows (RTX 3060 to 5090, A10G, L4, L40S, T4, V100-32GB, "
                                "A100-80GB, H100, H200, B200, MI300X, ...)",
                                text));
}

}  // namespace oomtriage::parsers
