// parsers/gpu_cards.h
//
// A GPU's memory as people name it: a size ("24", "24G", "24GB", "24GiB", "24576MiB") or a card
// ("RTX 4090", "3090", "A100-80GB", "H100", "L40S", "MI300X"), from a table of the cards people
// train on. `check --gpu`, `run --gpu` and the daemon config's `gpu_memory` all read it here, so
// a name means the same card everywhere. A card sold as "24 GB" holds 24 GiB, so GB is read as
// GiB; a bare number is GiB unless it names a card ("3090"), and one above every card in the
// table is refused rather than read as a card of that many GiB. Pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/result.h"

namespace oomtriage::parsers {

struct GpuCard {
  std::string_view name;           // as its maker writes it: "RTX 4090", "A100"
  std::vector<int> sizes_gib;      // every memory size it is sold with, the common one first
  bool size_is_ambiguous = false;  // sold in sizes common enough that the name alone says nothing
};

// Every card of the table, in the table's order.
const std::vector<GpuCard>& gpu_cards();

// The memory of the card `text` names, in bytes. kBadInput with a one-line reason and a hint:
// "--gpu A100: the A100 comes with 40 or 80 GiB: give A100-40GB or A100-80GB".
Result<uint64_t> parse_card_memory(std::string_view text);

// The largest card in the table, in GiB: a size above it is no card.
int largest_card_gib();

}  // namespace oomtriage::parsers
