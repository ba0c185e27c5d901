// parsers/step_counters.cc: the counter table. Shapes come from training scripts' own print
// statements (PyTorch examples, nanoGPT, diffusion-pipe, Keras, GAN repos) and from the save
// names trainers write (HF Trainer "checkpoint-N", DeepSpeed "global_stepN", kohya "-stepNNNNNNNN",
// AI Toolkit "_NNNNNNNNN.safetensors"). Ambiguous numbers (a sample count "[12800/60000 (21%)]",
// kohya's epoch save "lora-000002.safetensors", "sample_steps: 28") are never steps.
#include "parsers/step_counters.h"

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>
#include <memory>

#include "parsers/ascii.h"
#include "parsers/digit_shape.h"

namespace oomtriage::parsers {
namespace {

using K = CounterKind;

RE2::Options counter_options() {
  RE2::Options options;
  options.set_log_errors(false);
  options.set_case_sensitive(false);
  return options;
}

std::optional<int64_t> parse_number(std::string_view digits) {
  if (digits.empty() || digits.size() > 15) return std::nullopt;
  int64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

struct CompiledCounter {
  const CounterPattern* pattern;
  std::unique_ptr<RE2> regex;
  // The named groups' indices, -1 where the row has none.
  int n = -1, total = -1, epoch = -1, epochs = -1;
};

CompiledCounter compile_counter(const CounterPattern& pattern) {
  CompiledCounter entry{&pattern, std::make_unique<RE2>(pattern.regex, counter_options())};
  const auto& names = entry.regex->NamedCapturingGroups();
  const auto index = [&](const char* name) {
    const auto it = names.find(name);
    return it == names.end() ? -1 : it->second;
  };
  entry.n = index("n");
  entry.total = index("total");
  entry.epoch = index("epoch");
  entry.epochs = index("epochs");
  return entry;
}

// Every row, and one set of them all: a line is scanned once, and only the rows that hit run
// again to capture their numbers.
struct CompiledCounters {
  std::vector<CompiledCounter> rows;
  std::unique_ptr<RE2::Set> set;
  bool digit_neutral = false;  // every row: matches may be looked up by a line's digit shape
};

const CompiledCounters& compiled_counters() {
  static const CompiledCounters kCompiled = [] {
    CompiledCounters compiled;
    auto set = std::make_unique<RE2::Set>(counter_options(), RE2::UNANCHORED);
    bool set_ok = true;
    for (const CounterPattern& pattern : counter_patterns()) {
      compiled.rows.push_back(compile_counter(pattern));
      set_ok = set_ok && set->Add(pattern.regex, nullptr) >= 0;
    }
    if (set_ok && set->Compile()) compiled.set = std::move(set);
    compiled.digit_neutral = std::all_of(
        counter_patterns().begin(), counter_patterns().end(),
        [](const CounterPattern& pattern) { return tests_digits_alike(pattern.regex); });
    return compiled;
  }();
  return kCompiled;
}

}  // namespace

std::optional<bool> StepCounter::first_epoch() const {
  if (!epoch) return std::nullopt;
  if (*epoch == 0) return true;
  return epoch_has_total && *epoch == 1;
}

const std::vector<CounterPattern>& counter_patterns() {
  static const std::vector<CounterPattern> kPatterns = {
      {"epoch-and-iteration",
       R"(\bepoch\s*[:=]?\s*\[?\s*(?P<epoch>\d+)(?:\s*/\s*(?P<epochs>\d+))?\s*\]?\s*[,|\]\[]?\s*\[?\s*(?:iter(?:ation)?|step|(?:mini-?)?batch|it)s?\s*[:=]?\s*\[?\s*(?P<n>\d+)\s*/\s*(?P<total>\d+))",
       K::kPerEpoch,
       {"[Epoch 1/10][Iter 200/1000] loss: 0.1234", "Epoch [1/10], Step [200/600], Loss: 0.1234",
        "epoch 2 | iter 300/1000 | loss 0.52", "[Epoch 0/200] [Batch 120/938] [D loss: 0.41]",
        "epoch 1, minibatch 2500/2500, validation error 9.2 %"}},
      {"epoch-bracket-pair",
       R"(\bepoch:\s*\[(?P<epoch>\d+)\]\s*\[\s*(?P<n>\d+)\s*/\s*(?P<total>\d+)\])",
       K::kPerEpoch,
       {"Epoch: [0][ 200/5005]\tTime  0.512 ( 0.600)\tLoss 6.8e+00 (6.9e+00)"}},
      {"epoch-batch-loss",
       R"(^\[(?P<epochs>)(?P<epoch>\d+),\s+(?P<n>\d+)\]\s+loss\b)",
       K::kPerEpoch,
       {"[1,  2000] loss: 2.187"}},
      {"keras-steps",
       R"(^(?P<n>\d+)/(?P<total>\d+)\s+\[[=>.]+\]\s+-\s)",
       K::kPerEpoch,
       {"120/1000 [==>...........................] - ETA: 1:23 - loss: 0.2345"}},
      {"iter-loss",
       R"(^\[?(?:iter(?:ation)?|it)\s*[:#]?\s*(?P<n>\d+)\s*(?:/\s*(?P<total>\d+))?\s*\]?\s*[:,|]?\s*(?:train[_ ])?(?:loss|lr|time)\b)",
       K::kGlobal,
       {"iter 100: loss 2.3456, time 123.45ms, mfu 30.12%", "Iteration 200/1000 | loss 0.51",
        "[iter 300] loss=0.25", "it 130 | loss 0.2041 | 1.21 s/it"}},
      {"iteration-of-epoch",
       R"(^\[?iter(?:ation)?s?\s*[:#]?\s*(?P<n>\d+)\s*/\s*(?P<total>\d+)\s*[,|;]?\s*epoch\s*[:=]?\s*(?P<epoch>\d+))",
       K::kPerEpoch,
       {"Iteration: 15/1184, epoch 0, loss 2.31", "iter 40/500 | epoch 2 | loss 0.8"}},
      {"iter-then-metrics",
       R"(^\[?iter(?:ation)?s?\s*[:#]?\s*(?P<n>\d+)\s*(?:/\s*(?P<total>\d+))?\s*\]?\s*[:,|]\s.*(?:\b|_)(?:loss|lr)\b)",
       K::kGlobal,
       {"iter 144: image-id:0254212, time:1.722(sec), regular_loss: 0.248765, total-loss 0.5882",
        "Iteration 300/5000, images/s 12.1, loss 0.52"}},
      {"epoch-of-epochs-batch",
       R"(\bepoch:?\s*(?P<epoch>\d+)\s*/\s*(?P<epochs>\d+)\s*\(\s*(?P<n>\d+)\s*/\s*(?P<total>\d+)\s*\))",
       K::kPerEpoch,
       {"{| Epoch: 1/1 (121/15311) | Loss: 1.719 | 0.73 steps/s | Step: 0k | }"}},
      {"start-from-iter",
       R"(\bstart(?:ing)? training from epoch:?\s*\d+,\s*iter(?:ation)?:?\s*(?P<n>\d+))",
       K::kGlobal,
       {"2022-03-01 10:00:00,123 INFO: Start training from epoch: 0, iter: 0"}},
      {"minibatch-loss",
       R"(^\[?mini-?batch\s*[:#]?\s*(?P<n>\d+)\s*(?:/\s*(?P<total>\d+))?\s*\]?\s*[:,|]?\s.*\bloss\b)",
       K::kBatches,
       {"minibatch 130, loss 0.5213", "Minibatch 40/500 | loss=1.02 | lr=3e-4"}},
      {"step-metrics",
       R"(^\[?(?:(?:global|train(?:ing)?)\s+)?steps?\s*[:=#]?\s*(?P<n>\d+)\s*(?:/\s*(?P<total>\d+))?\s*\]?\s*[,|:\-]?\s.*\b(?:loss|lr|learning.rate|grad.norm)\b)",
       K::kGlobal,
       {"step 120/1000 | loss 0.1234 | lr 1.0e-04", "Step 500: loss=0.0123",
        "steps: 120 loss: 0.0812 iter time (s): 1.234 samples/sec: 3.2",
        "[Step 120/1000] loss=0.51 lr=1e-4", "step:  130  loss: 2.4612  lr: 1.0e-04",
        "Train step 130/400 loss=0.3012", "Training step 130: loss 0.30"}},
      {"mmengine-iter",
       R"(\bIter\(train\)\s*\[\s*(?P<n>\d+)\s*/\s*(?P<total>\d+)\s*\])",
       K::kGlobal,
       {"03/05 11:20:40 - mmengine - INFO - Iter(train) [ 4000/160000]  base_lr: 6.0e-05 lr: "
        "5.9e-05  eta: 1 day, 2:03:11  time: 0.4123  loss: 0.6123"}},
      {"mmengine-epoch",
       R"(\bEpoch\(train\)\s*\[(?P<epochs>)\s*(?P<epoch>\d+)\s*\]\s*\[\s*(?P<n>\d+)\s*/\s*(?P<total>\d+)\s*\])",
       K::kPerEpoch,
       {"03/05 10:00:00 - mmengine - INFO - Epoch(train)  [2][ 150/1833]  lr: 2.0e-02  loss: "
        "0.91"}},
      {"iter-colon-metrics",
       R"(\biter:\s*(?P<n>\d+)\s+\S*(?:loss|lr|time))",
       K::kGlobal,
       {"[03/05 10:12:19 d2.utils.events]:  eta: 5:12:03  iter: 1239  total_loss: 2.134  "
        "loss_cls: 0.7123"}},
      {"num-updates",
       R"(\bnum_updates[=:]\s*(?P<n>\d+))",
       K::kGlobal,
       {"epoch 001:    400 / 1563 loss=12.512, nll_loss=12.312, ups=0.76, num_updates=400, "
        "lr=1.25e-05"}},
      {"fairseq-epoch",
       R"(\bepoch\s+(?P<epoch>\d+)(?P<epochs>):\s+(?P<n>\d+)\s*/\s*(?P<total>\d+)\s+\w*loss=)",
       K::kPerEpoch,
       {"2021-06-02 15:51:01 | INFO | train_inner | epoch 001:     14 / 1184 loss=9.21, "
        "ppl=592.3"}},
      {"json-step",
       R"("(?:global_)?step"\s*:\s*(?P<n>\d+))",
       K::kGlobal,
       {R"({"ts": "2026-01-01T10:00:00Z", "level": "info", "step": 850, "loss": 0.21})"}},
      {"global-step-field",
       R"(\bglobal[_ ]?(?:step|batch[_ ]idx|iter(?:ation)?)['"]?\s*[=:]\s*(?P<n>\d+))",
       K::kGlobal,
       {"Epoch 0:  45%|████▌     | 45/100 [00:10<00:12, global_step=45, loss=0.1]",
        "{'global_step': 120, 'loss': 0.2}",
        "Epoch 1, batch 3849, global_batch_idx: 3850, batch size: 180, loss[discrete_loss=0.2]"}},
      {"lightning-checkpoint",
       R"(\bepoch\s+\d+,\s+global step\s+(?P<n>\d+):)",
       K::kGlobal,
       {"Epoch 3, global step 4800: 'val_loss' reached 1.82104 (best 1.82104), saving model to "
        "'/ckpts/epoch=3-step=4800.ckpt' as top 1",
        "Epoch 0, global step 250: 'val_loss' was not in top 1"}},
      {"step-postfix",
       R"([,\s(]step\s*=\s*(?P<n>\d+)\b)",
       K::kGlobal,
       {"train:  12%|█▏        | 120/1000 [01:23<10:12,  1.44it/s, loss=0.1, step=120]"}},
      {"gs-postfix",
       R"([,\s(]gs\s*=\s*(?P<n>\d+)\b)",
       K::kGlobal,
       {"Steps: 100%|██████████| 30/30 [00:41<00:00,  1.37s/it, gs=1500, loss/avg=0.108]"}},
      {"epoch-banner",
       R"(^epoch\s+(?P<epoch>\d+)\s*/\s*(?P<epochs>\d+)\s*$)",
       K::kEpoch,
       {"epoch 3/10", "Epoch 1/10"}},
      {"save-hf-checkpoint",
       R"(\b(?:sav\w*|wrote|writ\w*|resum\w*)\b.*\bcheckpoint-(?P<n>\d+)\b)",
       K::kSaveName,
       {"Saving model checkpoint to output/checkpoint-500",
        "08/23/2026 00:40:02 - INFO - accelerate.checkpointing - Saved state to out/checkpoint-500",
        "Resuming from checkpoint out/checkpoint-1500"}},
      {"save-step-name",
       R"(\b(?:sav\w*|wrote|writ\w*)\b.*[-_/\\ ]step[-_=]?(?P<n>\d+)\b)",
       K::kSaveName,
       {"saving checkpoint: /out/my_lora-step00000500.safetensors",
        "Saving model to /runs/flux/20260101_10-00-00/step500",
        "[2026-01-01 10:00:00,000] [INFO] [engine.py:3500:save] Saving model checkpoint: "
        "out/global_step500/mp_rank_00_model_states.pt",
        "Saving latest checkpoint to /ckpts/epoch=3-step=4800.ckpt"}},
      {"save-iter-name",
       R"(\b(?:sav\w*|wrote|writ\w*)\b.*[-_/\\ ]iter(?:ation)?[-_]?(?P<n>\d+)\.(?:pt|pth|ckpt|safetensors|bin)\b)",
       K::kSaveName,
       {"Saving checkpoint to work_dirs/exp/model_iter_4500.pth"}},
      {"save-at-iterations",
       R"(\bsav\w*\b.*\bat (?P<n>\d+) (?:iterations?|steps?)\b)",
       K::kSaveName,
       {"03/05 11:20:40 - mmengine - INFO - Saving checkpoint at 4000 iterations"}},
      {"save-aitk-name",
       R"(\bsav\w*\b.*_(?P<n>\d{9})\.safetensors\b)",
       K::kSaveName,
       {"Saved checkpoint to output/my_lora/my_lora_000000500.safetensors"}},
  };
  return kPatterns;
}

const std::vector<std::string_view>& counter_near_misses() {
  static const std::vector<std::string_view> kNearMisses = {
      "Step 1/3: Installing dependencies",
      "Train Epoch: 1 [12800/60000 (21%)]\tLoss: 0.298",
      "sample_steps: 28",
      "max_train_steps = 1600",
      "  Total optimization steps = 1,500",
      "timestep=500",
      "saving checkpoint: /out/lora-000002.safetensors",
      "Removing old save: output/my_lora/my_lora_000000250.safetensors",
      "steps: 3000",
      "save_every_n_steps: 500, loss_type: l2",
      "Epoch 1/10 Steps:  12%|█▏  | 120/1000 [01:23<10:12,  1.44it/s, lr=0.0001, step_loss=0.0873]",
      "It 3 times slower than the loss of precision suggests",
      "minibatch size 16, loss scale 65536",
      "batch 130 loss 0.52",
      "global step 4800 of 9000 planned",
      "Saving config to /ckpts/timestep=500.yaml",
  };
  return kNearMisses;
}

const RE2& counter_literals() {
  static const RE2 kLiterals(
      R"((?i)iter|step|epoch|loss|checkpoint-|safetensors|\] - |num_updates)", counter_options());
  return kLiterals;
}

bool may_be_counter(std::string_view line) { return RE2::PartialMatch(line, counter_literals()); }

namespace {

// The rows that match `line`, in the table's order, with where each group matched.
std::vector<RowMatch> rows_matching(const CompiledCounters& compiled, std::string_view line) {
  std::vector<int> hits;
  if (compiled.set) {
    if (!compiled.set->Match(line, &hits)) return {};
    std::sort(hits.begin(), hits.end());  // the table's order decides
  } else {
    for (size_t i = 0; i < compiled.rows.size(); ++i) hits.push_back(static_cast<int>(i));
  }
  std::vector<RowMatch> matches;
  std::vector<re2::StringPiece> groups;
  for (int hit : hits) {
    const RE2& regex = *compiled.rows[static_cast<size_t>(hit)].regex;
    const int ngroups = regex.NumberOfCapturingGroups() + 1;
    groups.assign(static_cast<size_t>(ngroups), re2::StringPiece());
    if (!regex.Match(line, 0, line.size(), RE2::UNANCHORED, groups.data(), ngroups)) continue;
    matches.push_back(RowMatch::of(hit, line, groups));
  }
  return matches;
}

}  // namespace

std::optional<StepCounter> match_counter(std::string_view line) {
  const CompiledCounters& compiled = compiled_counters();
  // Save and progress lines repeat with other numbers ("Saving at step 250", "... 500"): their
  // matches are looked up by the line's shape, and the numbers read from the line itself.
  thread_local DigitShapeMemo<std::vector<RowMatch>> memo;
  const std::vector<RowMatch>* matches = nullptr;
  std::vector<RowMatch> computed;
  if (compiled.digit_neutral) {
    matches = &memo.get(line, [&] { return rows_matching(compiled, line); });
  } else {
    computed = rows_matching(compiled, line);
    matches = &computed;
  }
  for (const RowMatch& match : *matches) {
    const CompiledCounter& entry = compiled.rows[static_cast<size_t>(match.row)];
    const std::vector<re2::StringPiece> groups = match.groups_in(line);
    // An old save being removed names a step long past.
    if (entry.pattern->kind == K::kSaveName &&
        (contains_ascii_nocase(line, "remov") || contains_ascii_nocase(line, "delet"))) {
      continue;
    }
    auto group = [&](int index) -> std::optional<re2::StringPiece> {
      if (index < 0 || groups[static_cast<size_t>(index)].data() == nullptr) return std::nullopt;
      return groups[static_cast<size_t>(index)];
    };
    StepCounter counter;
    counter.kind = entry.pattern->kind;
    if (auto n = group(entry.n)) counter.n = parse_number(*n);
    if (auto total = group(entry.total)) counter.total = parse_number(*total);
    if (auto epoch = group(entry.epoch)) counter.epoch = parse_number(*epoch);
    // An "epochs" group, even empty, says the epoch is counted from 1 ("Epoch 1/10", "[1, 2000]").
    counter.epoch_has_total = group(entry.epochs).has_value();
    if (counter.kind != K::kEpoch && !counter.n) continue;
    return counter;
  }
  return std::nullopt;
}

Result<Ok> counter_patterns_ok() {
  if (!compiled_counters().set) {
    return make_error(ErrorCode::kBadInput,
                      "step counters: the RE2::Set of all rows did not compile");
  }
  for (const CompiledCounter& entry : compiled_counters().rows) {
    if (!entry.regex->ok()) {
      return make_error(ErrorCode::kBadInput, "step counter " + std::string(entry.pattern->name) +
                                                  ": " + entry.regex->error());
    }
  }
  return Ok{};
}

}  // namespace oomtriage::parsers
