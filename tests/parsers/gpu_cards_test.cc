// tests/parsers/gpu_cards_test.cc: `--gpu` and `gpu_memory` as people write them: sizes in every
// unit people use, cards by name with and without their maker's words, a card sold in two sizes
// named with one, and the refusals (a card sold in sizes too different to guess, a bare number
// above every card, words that are neither).
#include "parsers/gpu_cards.h"

#include <doctest/doctest.h>

using oomtriage::parsers::gpu_cards;
using oomtriage::parsers::largest_card_gib;
using oomtriage::parsers::parse_card_memory;

namespace {

constexpr uint64_t kGiB = 1ull << 30;

uint64_t gib(std::string_view text) {
  const auto bytes = parse_card_memory(text);
  INFO(text << ": " << (bytes ? "" : bytes.error().message));
  REQUIRE(bytes);
  return *bytes;
}

std::string refusal(std::string_view text) {
  const auto bytes = parse_card_memory(text);
  INFO(text);
  REQUIRE_FALSE(bytes);
  return bytes.error().message;
}

}  // namespace

TEST_SUITE("parsers::gpu_cards") {
  TEST_CASE("sizes: a bare number, G, GB and GiB are GiB (cards sold as GB hold GiB) - M is MiB") {
    for (const char* text : {"24", "24G", "24g", "24GB", "24 GB", "24GiB", "24 gib", "24576MiB",
                             "24576M", "24576 MB"}) {
      CHECK(gib(text) == 24 * kGiB);
    }
    CHECK(gib("1.5") == kGiB * 3 / 2);
  }

  TEST_CASE("cards by name, with or without the maker's words, in any case and spacing") {
    CHECK(gib("RTX 4090") == 24 * kGiB);
    CHECK(gib("rtx4090") == 24 * kGiB);
    CHECK(gib("NVIDIA GeForce RTX 3090") == 24 * kGiB);
    CHECK(gib("3090") == 24 * kGiB);  // the card, not 3090 GiB
    CHECK(gib("3060") == 12 * kGiB);
    CHECK(gib("5090") == 32 * kGiB);
    CHECK(gib("RTX 4070 Ti Super") == 16 * kGiB);
    CHECK(gib("4070ti") == 12 * kGiB);
    CHECK(gib("A10G") == 24 * kGiB);
    CHECK(gib("a10") == 24 * kGiB);
    CHECK(gib("L4") == 24 * kGiB);
    CHECK(gib("L40S") == 48 * kGiB);
    CHECK(gib("Tesla T4") == 16 * kGiB);
    CHECK(gib("H100") == 80 * kGiB);
    CHECK(gib("H200") == 141 * kGiB);
    CHECK(gib("B200") == 180 * kGiB);
    CHECK(gib("MI300X") == 192 * kGiB);
    CHECK(gib("AMD Instinct MI300X") == 192 * kGiB);
    CHECK(gib("RTX PRO 6000") == 96 * kGiB);
    CHECK(gib("RTX 6000 Ada") == 48 * kGiB);
  }

  TEST_CASE("a card sold in several sizes takes the one named beside it") {
    CHECK(gib("A100-80GB") == 80 * kGiB);
    CHECK(gib("A100 40GB") == 40 * kGiB);
    CHECK(gib("a100-80g") == 80 * kGiB);
    CHECK(gib("V100-32GB") == 32 * kGiB);
    CHECK(gib("V100 16") == 16 * kGiB);
    CHECK(gib("RTX 4060 Ti 16GB") == 16 * kGiB);
    CHECK(gib("3080 12GB") == 12 * kGiB);
    CHECK(gib("H100 NVL") == 94 * kGiB);
  }

  TEST_CASE("a name alone that could be two very different cards is refused with both names") {
    const std::string a100 = refusal("A100");
    CHECK(a100.find("40 or 80") != std::string::npos);
    CHECK(a100.find("A100-80GB") != std::string::npos);
    CHECK(refusal("v100").find("V100-32GB") != std::string::npos);
    CHECK(refusal("4060 Ti").find("16") != std::string::npos);
    CHECK(refusal("A100-48GB").find("40 or 80") != std::string::npos);
  }

  TEST_CASE("a number above every card, or words that are no card, are refused with a hint") {
    const std::string huge = refusal("3000");
    CHECK(huge.find(std::to_string(largest_card_gib())) != std::string::npos);
    CHECK(huge.find("RTX 4090") != std::string::npos);
    CHECK_FALSE(parse_card_memory("4000GB"));
    CHECK_FALSE(parse_card_memory("0"));
    CHECK_FALSE(parse_card_memory(""));
    CHECK_FALSE(parse_card_memory("24TB"));
    CHECK(refusal("potato").find("A100-80GB") != std::string::npos);
  }

  TEST_CASE("every card's name reads back as its first size, unless its sizes are ambiguous") {
    for (const auto& card : gpu_cards()) {
      const auto bytes = parse_card_memory(card.name);
      INFO(card.name);
      if (card.size_is_ambiguous) {
        CHECK_FALSE(bytes);
      } else {
        REQUIRE(bytes);
        CHECK(*bytes == static_cast<uint64_t>(card.sizes_gib.front()) * kGiB);
      }
    }
  }
}
