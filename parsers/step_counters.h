// parsers/step_counters.h
//
// Training steps printed outside tqdm's "N/T [time]" frames: bracketed epoch/iteration counters
// ("[Epoch 1/10][Iter 200/1000]", "Epoch: [0][ 200/5005]"), "iter 100: loss 2.31", "step 120/1000 |
// loss 0.12", diffusion-pipe's "steps: 120 loss: 0.0812", Keras' "120/1000 [==>....] - ETA",
// "global_step=500" postfixes, epoch banners ("epoch 3/10", "Epoch 1/10"), and save or checkpoint
// names that carry the step ("checkpoint-500", "my_lora_000000500.safetensors", "-step00000500").
// One table; each row has sample lines that tests/parsers/step_counters_test.cc checks.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>
#include "parsers/result.h"

namespace re2 {
class RE2;
}

namespace oomtriage::parsers {

enum class CounterKind {
  kGlobal,    // n is the global training step
  kPerEpoch,  // n counts batches of the current epoch: a global step only in the first epoch
  kBatches,   // n counts batches ("minibatch 130, loss"): the global step unless the log shows
              // an epoch after the first
  kEpoch,     // an epoch banner: says which epoch runs, no step
  kSaveName,  // a save or checkpoint name carrying the global step
};

struct CounterPattern {
  std::string_view name;
  std::string_view regex;  // RE2, case-insensitive; groups "n", "total", "epoch", "epochs"
  CounterKind kind = CounterKind::kGlobal;
  std::vector<std::string_view> samples;
};

struct StepCounter {
  CounterKind kind = CounterKind::kGlobal;
  std::optional<int64_t> n;
  std::optional<int64_t> total;
  std::optional<int64_t> epoch;
  bool epoch_has_total = false;  // "Epoch 1/10" counts from 1; "Epoch 0:" from 0
  // Whether the epoch shown is the first one (0, or 1 when counted from 1); nullopt: unknown.
  std::optional<bool> first_epoch() const;
};

const std::vector<CounterPattern>& counter_patterns();

// Lines that carry numbers but no training step. Each must match no row.
const std::vector<std::string_view>& counter_near_misses();

// Cheap literal check: false means no row can match.
bool may_be_counter(std::string_view line);
// Its regex, an alternation of literals (case-insensitive).
const re2::RE2& counter_literals();

// The first row that matches the cleaned line.
std::optional<StepCounter> match_counter(std::string_view line);

Result<Ok> counter_patterns_ok();

}  // namespace oomtriage::parsers
