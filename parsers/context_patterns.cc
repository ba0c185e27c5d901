// parsers/context_patterns.cc: the marker table. Sources: docs/ai-toolkit.md §3 for AI
// Toolkit's exact strings, docs/formats.md §3 for the other trainers.
#include "parsers/context_patterns.h"

#include "parsers/ascii.h"
#include "parsers/digit_shape.h"
#include "parsers/stage_lexicon.h"
#include "parsers/trainer_table.h"

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <memory>

namespace oomtriage::parsers {
namespace {

RE2::Options quiet_options() {
  RE2::Options options;
  options.set_log_errors(false);
  return options;
}

using E = MarkerEffect;
using P = Phase;
using T = Trainer;

}  // namespace

const std::vector<ContextPattern>& context_patterns() {
  // A table, one entry per row as written:
  // clang-format off
  static const std::vector<ContextPattern> kPatterns = {
      // AI Toolkit (ostris/ai-toolkit), in the order a run prints them.
      {"aitk-running-job", R"(^# Running job: (?P<job>\S.*?)\s*$)", E::kRunStart, P::kUnknown,
       T::kAiToolkit, {"# Running job: my_first_lora_v1"}},
      {"aitk-running-jobs", R"(^Running \d+ jobs?$)", E::kRunStart, P::kUnknown, T::kAiToolkit,
       {"Running 1 job"}},
      {"aitk-running-process", R"(^Running  \d+ process)", E::kNone, P::kUnknown, T::kAiToolkit,
       {"Running  1 process"}},
      {"aitk-loading", R"(^Loading (?:\w+ )?(?:model|transformer|transformer \d|VAE|T5|CLIP|UMT5EncoderModel|Qwen Image model|ZImage model|Flux model|Wan model)\b)",
       E::kPhase, P::kModelLoad, T::kUnknown,
       {"Loading Flux model", "Loading transformer", "Loading ZImage model", "Loading VAE",
        "Loading transformer 2"}},
      {"hf-loading-shards", R"(^Loading checkpoint shards\b)", E::kPhase, P::kModelLoad,
       T::kUnknown, {"Loading checkpoint shards: 100%"}},
      {"aitk-quantizing", R"(^(?:Quantizing (?:\w+ ?)+$|- quantizing \d+ transformer blocks|- quantizing extras))",
       E::kPhase, P::kQuantize, T::kUnknown,
       {"Quantizing Transformer", "Quantizing T5", "- quantizing 40 transformer blocks",
        "Quantizing Text Encoder"}},
      {"aitk-model-loaded", R"(^Model Loaded$|^create LoRA network\b)", E::kPhase, P::kUnknown,
       T::kUnknown, {"Model Loaded", "create LoRA network. base dim (rank): 32, alpha: 32"}},
      {"aitk-caching-latents", R"(^Caching latents for )", E::kPhase, P::kCacheLatents,
       T::kAiToolkit, {"Caching latents for /data/images"}},
      {"aitk-caching-text", R"(^Caching text_embeddings for )", E::kPhase,
       P::kCacheTextEmbeddings, T::kAiToolkit, {"Caching text_embeddings for /data/images"}},
      {"aitk-unloading-te", R"(UNLOADING TEXT ENCODER|^Skipping first sample due to config setting)",
       E::kPhase, P::kUnknown, T::kAiToolkit,
       {"***** UNLOADING TEXT ENCODER *****", "Skipping first sample due to config setting"}},
      {"aitk-baseline-sample", R"(Generating baseline samples before training|Generating first sample from first sample config)",
       E::kBaselineSample, P::kSampling, T::kAiToolkit,
       {"Generating baseline samples before training"}},
      {"aitk-resume-step", R"(Found step (?P<n>\d+) in metadata)", E::kResumeStep, P::kUnknown,
       T::kAiToolkit, {"Found step 1500 in metadata, starting from there"}},
      {"aitk-sample-now", R"(^Sampling at step (?P<n>\d+))", E::kPhase, P::kSampling,
       T::kAiToolkit, {"Sampling at step 750"}},
      {"aitk-saving", R"(^Saving at step (?P<n>\d+))", E::kPhase, P::kSaving, T::kAiToolkit,
       {"Saving at step 250"}},
      {"aitk-saved", R"(^Saved checkpoint to |^Removing old save: )", E::kPhase, P::kTrainStep,
       T::kAiToolkit, {"Saved checkpoint to output/my_lora/my_lora_000000250.safetensors"}},
      {"aitk-error-running-job", R"(^Error running job: )", E::kCrash, P::kUnknown,
       T::kAiToolkit, {"Error running job: CUDA out of memory. Tried to allocate 2.00 MiB."}},
      {"aitk-stopped", R"(^Error running job: Job (?:stopped|returning to queue)|^Job stopped$|Stop signal received; terminating process)",
       E::kStop, P::kUnknown, T::kAiToolkit,
       {"Error running job: Job stopped", "Job stopped",
        "Error running job: Job returning to queue"}},
      {"aitk-completed", R"(^- (?P<n>[1-9]\d*) completed jobs?$)", E::kCompleted, P::kUnknown,
       T::kAiToolkit, {"- 1 completed job"}},
      {"aitk-exit-code", R"(^Job process terminated with exit code [1-9]|^Job process exited unexpectedly)",
       E::kCrash, P::kUnknown, T::kAiToolkit,
       {"Job process terminated with exit code 1.",
        "Job process exited unexpectedly. Last log line: x"}},
      {"aitk-fingerprint", R"(ai-toolkit|extensions_built_in|BaseSDTrainProcess|[\\/]toolkit[\\/]|AI-Toolkit|\[AITK\])",
       E::kNone, P::kUnknown, T::kAiToolkit,
       {"  File \"/app/ai-toolkit/run.py\", line 120, in <module>"}},
      // kohya sd-scripts (and forks that print the same lines).
      {"kohya-sample", R"(generating sample images at step[^:]*: *(?P<n>\d+))", E::kPhase,
       P::kSampling, T::kSdScripts,
       {"generating sample images at step / サンプル画像生成 ステップ: 500"}},
      {"kohya-saving", R"(^saving checkpoint: |^saving state at step \d+)", E::kPhase,
       P::kSaving, T::kUnknown, {"saving checkpoint: /out/lora-000002.safetensors"}},
      {"kohya-epoch", R"(^epoch \d+/\d+$)", E::kPhase, P::kTrainStep, T::kUnknown,
       {"epoch 3/10"}},
      {"kohya-model-saved", R"(^model saved\.?$)", E::kCompleted, P::kUnknown, T::kSdScripts,
       {"model saved."}},
      {"kohya-fingerprint", R"(sd-scripts|train_network\.py|sdxl_train|flux_train|kohya)",
       E::kNone, P::kUnknown, T::kSdScripts,
       {"File \"C:\\fluxgym\\sd-scripts\\flux_train_network.py\", line 583, in <module>"}},
      // diffusers example scripts.
      {"diffusers-validation", R"(Running validation\.\.\.)", E::kPhase, P::kSampling,
       T::kDiffusers, {"08/23/2026 00:34:28 - INFO - __main__ - Running validation... "}},
      {"diffusers-fingerprint", R"(diffusers[\\/]examples|train_dreambooth|train_text_to_image)",
       E::kNone, P::kUnknown, T::kDiffusers,
       {"File \"/w/diffusers/examples/dreambooth/train_dreambooth_lora.py\", line 9, in main"}},
      // HF transformers Trainer (and what wraps it: autotrain, LLaMA-Factory).
      {"running-training", R"((?:^|\*\s)Running training \*{5})", E::kRunStart, P::kTrainStep,
       T::kUnknown, {"***** Running training *****"}},
      {"kohya-running-training", R"(^running training / 学習開始)", E::kRunStart, P::kTrainStep,
       T::kSdScripts, {"running training / 学習開始"}},
      // A new process: what was printed before it belongs to a run that ended.
      {"accelerate-launch", R"(^The following values were not passed to `accelerate launch`)",
       E::kRunStart, P::kUnknown, T::kUnknown,
       {"The following values were not passed to `accelerate launch` and had defaults used "
        "instead:"}},
      {"total-steps", R"(Total (?:optimization )?steps = (?P<n>[\d,]+))", E::kTotalSteps,
       P::kUnknown, T::kUnknown,
       {"  Total optimization steps = 1,500",
        "\\        /    Total batch size = 8 | Total steps = 60"}},
      {"hf-evaluation", R"((?:^|\*\s)Running (?:Evaluation|Prediction) \*{5})", E::kPhase,
       P::kSampling, T::kTransformers, {"***** Running Evaluation *****"}},
      {"hf-loss-dict", R"(^\{'(?:loss|train_loss|eval_loss)': )", E::kPhase, P::kTrainStep,
       T::kTransformers, {"{'loss': 2.3456, 'learning_rate': 4.9e-05, 'epoch': 0.01}"}},
      {"hf-train-runtime", R"(^\{'train_runtime': )", E::kCompleted, P::kUnknown,
       T::kTransformers, {"{'train_runtime': 120.5, 'train_samples_per_second': 3.2}"}},
      {"hf-saving", R"(Saving model checkpoint to )", E::kPhase, P::kSaving, T::kTransformers,
       {"Saving model checkpoint to output/checkpoint-500"}},
      {"hf-fingerprint", R"(transformers[\\/]trainer\.py|Trainer\.train|autotrain|llamafactory|LLaMA-Factory|trl[\\/]trainer[\\/]|Unsloth - \d+x faster)",
       E::kNone, P::kUnknown, T::kTransformers,
       {"File ~/env/site-packages/transformers/trainer.py:1633, in Trainer.train(self)",
        "==((====))==  Unsloth - 2x faster free finetuning | Num GPUs used = 1",
        "  File \"/usr/lib/python3/site-packages/trl/trainer/sft_trainer.py\", line 450, in train"}},
      // SimpleTuner, OneTrainer, ComfyUI.
      {"simpletuner-validation", R"(Validation is starting|Validations are generating)",
       E::kPhase, P::kSampling, T::kSimpleTuner, {"Validation is starting."}},
      {"simpletuner-fingerprint", R"(SimpleTuner|simpletuner)", E::kNone, P::kUnknown,
       T::kSimpleTuner, {"File \"/w/SimpleTuner/simpletuner/train.py\", line 3, in run"}},
      {"onetrainer-fingerprint", R"(OneTrainer|GenericTrainer)", E::kNone, P::kUnknown,
       T::kOneTrainer, {"File \"/w/OneTrainer/modules/trainer/GenericTrainer.py\", line 9"}},
      {"comfyui-fingerprint", R"(ComfyUI|[\\/]comfy[\\/]|!!! Exception during processing !!!|execution\.py:\d+)",
       E::kNone, P::kUnknown, T::kComfyUi, {"!!! Exception during processing !!! x"}},
      // Any trainer.
      {"training-loop", R"((?i)\btraining loop\b|\bsanity check\b.*\bbatch)", E::kPhase,
       P::kTrainStep, T::kUnknown, {"Exception in main training loop: x"}},
      {"epoch-context", R"((?i)\bepochs? \d+\b)", E::kPhase, P::kTrainStep, T::kUnknown,
       {"2022-05-05 12:33:52,875 INFO [train.py:983] Sanity check -- see if any of the batches "
        "in epoch 0 would cause OOM."}},
      {"lightning-fit-stopped", R"(Trainer\.fit` stopped: `max_(?:epochs|steps)=\d+` reached)",
       E::kCompleted, P::kUnknown, T::kUnknown,
       {"`Trainer.fit` stopped: `max_epochs=2` reached."}},
      {"training-complete",
       R"((?i)\btraining (?:is )?(?:complete|completed|finished|done)\b|\bdone training\b|)"
       R"((?i)^done\.?$|\b\d+ epochs? completed in\b|\bfinished training\b)",
       E::kCompleted, P::kUnknown, T::kUnknown,
       {"Training complete.", "done training", "done.", "3 epochs completed in 0.512 hours."}},
      // A process that died: C++ aborts, launchers reporting a failed child.
      {"process-died",
       R"(^terminate called after throwing an instance of|ChildFailedError|)"
       R"(\bexitcode\s*:\s*-?[1-9]\d*\b|Aborted \(core dumped\)|Segmentation fault|)"
       R"(Signal \d+ \(SIG[A-Z]+\) received by PID)",
       E::kCrash, P::kUnknown, T::kUnknown,
       {"terminate called after throwing an instance of 'c10::DistBackendError'",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "  exitcode  : -6 (pid: 4242)", "Aborted (core dumped)"}},
      {"traceback", R"(Traceback \(most recent call last\))", E::kTracebackHeader, P::kUnknown,
       T::kUnknown,
       {"Traceback (most recent call last):",
        "OutOfMemoryError                          Traceback (most recent call last)"}},
      {"keyboard-interrupt", R"(^KeyboardInterrupt\b)", E::kStop, P::kUnknown, T::kUnknown,
       {"KeyboardInterrupt"}},
      // Training arguments as trainers print them.
      {"hf-batch-size", R"(Instantaneous batch size per device = (?P<n>\d+))", E::kArgBatchSize,
       P::kUnknown, T::kUnknown, {"  Instantaneous batch size per device = 4"}},
      {"batch-size-adjusted", R"(batch size has been adjusted to: (?P<n>[\d,]+))",
       E::kBatchSizeAdjusted, P::kUnknown, T::kUnknown,
       {"  Training with DataParallel so batch size has been adjusted to: 16"}},
      {"kohya-batch-size", R"(batch size per device / バッチサイズ: (?P<n>\d+))", E::kArgBatchSize,
       P::kUnknown, T::kSdScripts, {"  batch size per device / バッチサイズ: 2"}},
      {"gradient-accumulation",
       R"((?i)gradient accumulation steps(?: / 勾配を合計するステップ数)? = (?P<n>\d+))",
       E::kArgGradientAccumulation, P::kUnknown, T::kUnknown,
       {"  Gradient Accumulation steps = 2",
        "  gradient accumulation steps / 勾配を合計するステップ数 = 1"}},
      {"args-gradient-checkpointing", R"(\bgradient_checkpointing=(?P<flag>True|False)\b)",
       E::kArgGradientCheckpointing, P::kUnknown, T::kUnknown,
       {"Namespace(pretrained_model_name_or_path='x', gradient_checkpointing=False, "
        "train_batch_size=4)"}},
      {"args-batch-size", R"(\btrain_batch_size=(?P<n>\d+))", E::kArgBatchSize, P::kUnknown,
       T::kUnknown, {"Namespace(train_batch_size=4, resolution=1024)"}},
      {"args-resolution", R"(\bresolution=['"(]?(?P<n>\d+))", E::kArgResolution, P::kUnknown,
       T::kUnknown, {"Namespace(resolution='1024,1024', train_batch_size=1)"}},
      {"memory-summary-device", R"(memory summary, device ID (?P<n>\d+))", E::kGpuIndex,
       P::kUnknown, T::kUnknown,
       {"|                  PyTorch CUDA memory summary, device ID 0                 |"}},
  };
  // clang-format on
  return kPatterns;
}

namespace {

// Where a row's named groups are (-1: it has none of that name).
struct RowGroups {
  int n = -1;
  int job = -1;
  int flag = -1;
};

// Rows that test digits only as a class are matched once per digit shape of a line
// (parsers/digit_shape.h: "Saving at step 250" and "... 500" match the same rows at the same
// places); the few others, on every line. A set's index maps to its row.
struct RowSet {
  std::unique_ptr<RE2::Set> set;
  std::vector<int> rows;
};

struct CompiledContext {
  std::vector<std::unique_ptr<RE2>> regexes;
  std::vector<RowGroups> groups;
  RowSet digits_alike;
  RowSet digits_matter;
};

const CompiledContext& compiled_context() {
  static const CompiledContext kCompiled = [] {
    CompiledContext compiled;
    compiled.digits_alike.set = std::make_unique<RE2::Set>(quiet_options(), RE2::UNANCHORED);
    compiled.digits_matter.set = std::make_unique<RE2::Set>(quiet_options(), RE2::UNANCHORED);
    const auto& patterns = context_patterns();
    for (size_t row = 0; row < patterns.size(); ++row) {
      const ContextPattern& pattern = patterns[row];
      auto regex = std::make_unique<RE2>(pattern.regex, quiet_options());
      const auto& names = regex->NamedCapturingGroups();
      const auto index = [&](const char* name) {
        const auto it = names.find(name);
        return it == names.end() ? -1 : it->second;
      };
      compiled.groups.push_back({index("n"), index("job"), index("flag")});
      compiled.regexes.push_back(std::move(regex));
      RowSet& into =
          tests_digits_alike(pattern.regex) ? compiled.digits_alike : compiled.digits_matter;
      into.set->Add(pattern.regex, nullptr);
      into.rows.push_back(static_cast<int>(row));
    }
    for (RowSet* row_set : {&compiled.digits_alike, &compiled.digits_matter}) {
      if (row_set->rows.empty() || !row_set->set->Compile()) row_set->set.reset();
    }
    return compiled;
  }();
  return kCompiled;
}

// The rows of `row_set` that match `line`, with where their groups matched.
void append_matching_rows(const CompiledContext& compiled, const RowSet& row_set,
                          std::string_view line, std::vector<RowMatch>& out) {
  thread_local std::vector<int> hits;
  hits.clear();
  if (!row_set.set || !row_set.set->Match(line, &hits)) return;
  std::vector<re2::StringPiece> groups;
  for (const int hit : hits) {
    const int row = row_set.rows[static_cast<size_t>(hit)];
    const RE2& regex = *compiled.regexes[static_cast<size_t>(row)];
    const int ngroups = regex.NumberOfCapturingGroups() + 1;
    groups.assign(static_cast<size_t>(ngroups), re2::StringPiece());
    if (!regex.Match(line, 0, line.size(), RE2::UNANCHORED, groups.data(), ngroups)) continue;
    out.push_back(RowMatch::of(row, line, groups));
  }
}

std::optional<int64_t> parse_number(std::string_view digits) {
  int64_t value = 0;
  bool any = false;
  for (char c : digits) {
    if (c == ',') continue;
    if (c < '0' || c > '9' || value > (INT64_MAX - 9) / 10) return std::nullopt;
    value = value * 10 + (c - '0');
    any = true;
  }
  return any ? std::optional<int64_t>(value) : std::nullopt;
}

}  // namespace

const RE2& context_literals() {
  static const RE2 kLiterals(
      R"(Running|running training|Trainer\.fit|done|epochs? completed|terminate called|ChildFailed|exitcode|Aborted|Segmentation|received by PID|accelerate launch|Loading|uantiz|Model Loaded|create LoRA|Caching|UNLOADING|Skipping first|)"
      R"(baseline|first sample|Found step|Sampling|Saving|Saved|Removing old|Error running|)"
      R"(Job |completed job|toolkit|AITK|extensions_built_in|BaseSDTrain|sample images|)"
      R"(saving|epoch|Epoch|model saved|sd-scripts|train_network|sdxl_train|flux_train|kohya|)"
      R"(validation|diffusers|train_dreambooth|train_text_to_image|\*\*\*\*\*|optimization steps|Total steps|Unsloth|)"
      R"(\{'|Trainer|autotrain|llama|LLaMA|Validation|imple[Tt]uner|OneTrainer|Comfy|comfy|)"
      R"(!!!|execution\.py|training|[Ss]anity|Traceback|KeyboardInterrupt|memory summary|)"
      R"(batch size|ccumulation|adjusted to|gradient_checkpointing=|train_batch_size=|resolution=|)"
      R"([Cc]omplete|finished|Stop signal|File "|File ~|frame #|Error|Exception|Interrupt|)"
      R"([Nn]ode[ _][Tt]ype|node \d|\.py:\d+ in |-> \d|\.py in |ipython-input|backward\(|line \d+, in )",
      quiet_options());
  return kLiterals;
}

bool may_be_context(std::string_view line) { return RE2::PartialMatch(line, context_literals()); }

void match_context(std::string_view line, std::vector<ContextMatch>& out) {
  const CompiledContext& compiled = compiled_context();
  thread_local DigitShapeMemo<std::vector<RowMatch>> memo;
  thread_local std::vector<RowMatch> matches;
  matches = memo.get(line, [&] {
    std::vector<RowMatch> found;
    append_matching_rows(compiled, compiled.digits_alike, line, found);
    return found;
  });
  append_matching_rows(compiled, compiled.digits_matter, line, matches);
  // In the table's order, whichever set found them.
  std::sort(matches.begin(), matches.end(),
            [](const RowMatch& a, const RowMatch& b) { return a.row < b.row; });
  const auto& patterns = context_patterns();
  for (const RowMatch& row_match : matches) {
    const std::vector<re2::StringPiece> groups = row_match.groups_in(line);
    const RowGroups& named = compiled.groups[static_cast<size_t>(row_match.row)];
    ContextMatch match;
    match.pattern = &patterns[static_cast<size_t>(row_match.row)];
    if (named.n >= 0) match.n = parse_number(groups[static_cast<size_t>(named.n)]);
    if (named.job >= 0) match.job = groups[static_cast<size_t>(named.job)];
    if (named.flag >= 0) match.flag = groups[static_cast<size_t>(named.flag)];
    out.push_back(match);
  }
}

Trainer rules_of(const ContextPattern& pattern) {
  for (const TrainerRow& row : trainer_table()) {
    const std::string_view prefix = row.rules_prefix;
    if (!prefix.empty() && pattern.name.substr(0, prefix.size()) == prefix) return row.trainer;
  }
  return Trainer::kUnknown;
}

namespace {

std::string_view last_name(std::string_view function) {
  const size_t dot = function.rfind('.');
  return dot == std::string_view::npos ? function : function.substr(dot + 1);
}

// Where a frame's file sits decides which of its path's words are the code's own. Inside an
// installed package ("site-packages/diffusers/pipelines/flux/pipeline_flux.py", or a "src/"
// layout) the folders are the package's modules and say what the code is for; anywhere else they
// are the user's folders ("Sample Training/", "samples/", "cache/"), which say nothing about the
// stage, and only the file's own name speaks (docs/detection.md "Words in paths").
struct ModulePath {
  std::string words;  // "diffusers/pipelines/flux/pipeline_flux" or "train_network"
  bool installed = false;
};

ModulePath module_of(std::string_view path) {
  if (const size_t dot = path.rfind('.');
      dot != std::string_view::npos && path.find_first_of("/\\", dot) == std::string_view::npos) {
    path = path.substr(0, dot);
  }
  // Just past the last "site-packages/" (or "dist-packages/", or a "src/" layout), either slash.
  size_t package_root = std::string_view::npos;
  for (const std::string_view root : {"site-packages", "dist-packages", "src"}) {
    for (size_t at = path.find(root); at != std::string_view::npos; at = path.find(root, at + 1)) {
      const size_t after = at + root.size();
      const bool folder = (at == 0 || path[at - 1] == '/' || path[at - 1] == '\\') &&
                          after < path.size() && (path[after] == '/' || path[after] == '\\');
      if (folder && (package_root == std::string_view::npos || after + 1 > package_root)) {
        package_root = after + 1;
      }
    }
  }
  if (package_root == std::string_view::npos) {
    const size_t slash = path.find_last_of("/\\");
    return {std::string(slash == std::string_view::npos ? path : path.substr(slash + 1)), false};
  }
  // The package and its last folders and file: "llmcompressor/pipelines/sequential/pipeline" is
  // quantizing, "diffusers/pipelines/flux/pipeline_flux" sampling; the folders between say less.
  const std::string_view inside = path.substr(package_root);
  const size_t package_end = inside.find_first_of("/\\");
  size_t from = inside.size();
  for (int parts = 0; parts < 3 && from > 0; ++parts) {
    const size_t slash = inside.find_last_of("/\\", from - 1);
    from = slash == std::string_view::npos ? 0 : slash;
  }
  if (from == 0 || from <= package_end) return {std::string(inside), true};
  return {std::string(inside.substr(0, package_end)) + std::string(inside.substr(from)), true};
}

// Code that puts a model's weights on the device, whoever called it (a sampler that brings the
// text encoder back, a training entry point, a UI's runner): model loading. Module words as
// module_of() gives them, the function as the frame names it.
struct PlacementRule {
  const char* module;    // RE2, searched in the module's words
  const char* function;  // RE2, the whole function name
};
constexpr PlacementRule kPlacementRules[] = {
    // torch's Module.to/.cuda and transformers' override: every parameter copied.
    {R"((?:^|/)module$|modeling_utils$)", R"(_apply|to|cuda|_to|to_empty|xpu|convert)"},
    // DistributedDataParallel's constructor broadcasts the weights and builds its reducer.
    {R"(parallel/distributed$|distributed/utils$)",
     R"(__init__|_ddp_init_helper|_sync_module_states|_sync_params_and_buffers|)"
     R"(_verify_param_shape_across_processes|_build_params_for_reducer)"},
    {R"(fully_sharded_data_parallel$|fsdp/_init_utils$|_composable/fsdp/\w+$)",
     R"(__init__|_init_\w+|_move_\w+_to_device|_materialize_\w+|fully_shard)"},
    // accelerate's prepare() moves the model ("accelerator.prepare(model, optimizer)").
    {R"(accelerate/accelerator$)", R"(prepare|prepare_model|_prepare_\w+)"},
    {R"(accelerate/big_modeling$|accelerate/utils/modeling$)",
     R"(dispatch_model|cpu_offload\w*|load_checkpoint_and_dispatch|set_module_tensor_to_device)"},
    // diffusers' pipe.to("cuda") and its offloading hooks.
    {R"(pipeline_utils$)", R"(to|cuda|enable_model_cpu_offload|enable_sequential_cpu_offload)"},
};

bool places_model(std::string_view module, std::string_view function) {
  static const auto kCompiled = [] {
    std::vector<std::pair<std::unique_ptr<RE2>, std::unique_ptr<RE2>>> compiled;
    for (const PlacementRule& rule : kPlacementRules) {
      compiled.emplace_back(std::make_unique<RE2>(rule.module, quiet_options()),
                            std::make_unique<RE2>(rule.function, quiet_options()));
    }
    return compiled;
  }();
  for (const auto& [module_regex, function_regex] : kCompiled) {
    if (RE2::PartialMatch(module, *module_regex) && RE2::FullMatch(function, *function_regex)) {
      return true;
    }
  }
  return false;
}

// Quantization libraries run in every stage once a model is quantized: their layers' forward,
// dispatch and dequantize calls are the stage that called them. Only their quantizing and
// calibrating functions are the quantize stage.
bool quantized_compute(std::string_view function) {
  static const RE2 kCompute(
      R"((?i)^(?:forward|__torch_dispatch__|__torch_function__|__call__|_call_impl|matmul\w*|)"
      R"(\w*dequant\w*|linear|mm|bmm|apply|backward|\w*_forward|unpack\w*)$)",
      quiet_options());
  return RE2::FullMatch(function, kCompute);
}

}  // namespace

std::optional<FrameEvidence> traceback_frame(std::string_view line) {
  static const RE2 kPythonFrame(R"re(^File (?:"([^"]*)"|(\S+)), line \d+, in ([\w.<>]+))re",
                                quiet_options());
  static const RE2 kIpythonFrame(R"(^File (\S+):\d+, in ([\w.<>]+))", quiet_options());
  static const RE2 kRichFrame(R"(^(?:│\s*)?(\S+\.py):\d+ in ([\w.<>]+))", quiet_options());
  // IPython before 8: "/usr/lib/python3/dist-packages/transformers/trainer.py in train(self, ...)"
  // and the cell "<ipython-input-4-5d2a1b6c7e8f> in <module>".
  // A frame line hard-wrapped after its path: "line 525, in backward" on a line of its own.
  static const RE2 kWrappedFrameTail(R"(^line \d+, in ([\w.<>]+)$)", quiet_options());
  static const RE2 kOldIpythonFrame(R"(^(\S+\.py|<ipython-input-[\w-]+>) in ([\w.<>]+))",
                                    quiet_options());
  static const RE2 kCppFrame(R"(^frame #\d+: (.*))", quiet_options());
  // What every traceback passes through: entry points and call wrappers name no stage.
  static const RE2 kEntryPoint(
      R"(^(?:main|run|train|fit|forward|__call__|_call_impl|_wrapped_call_impl|wrapper|inner|)"
      R"(decorate_context|<module>|<lambda>|execute|new_func|_fn|fn|func|call|__init__|run_job|)"
      R"(launch|start|process|_run|run_training|training|trainer|_run_stage|_run_train|_fit_impl|)"
      R"(_call_and_handle_interrupt|get_output_data|_map_node_over_list|map_node_over_list|)"
      R"(_async_map_node_over_list|process_inputs|wrapped_func|async_execute|run_cli|cli_main)$)",
      quiet_options());
  // Train-step words specific enough to stand against a marker: not the entry point "train".
  static const RE2 kSpecificTraining(
      R"(\b(?:backward|step|steps|loop|accumulat\w*|loss|iteration|epoch|optimizer|predict)\b|\btrain(?:ing)? batch\b)",
      quiet_options());

  // Libraries and modules that only ever run to quantize (calibration passes, GPTQ/AWQ solvers),
  // unlike quantized layers, which run in every stage.
  static const RE2 kQuantizingOnly(
      R"((?i)calibrat|gptq(?:model)?/quantization|/gptq$|awq|llmcompressor|smoothquant)",
      quiet_options());

  // Every frame starts with "File " or "frame #", or names a ".py:" line: the regexes run on
  // frames only (most text lines are not, and four regex calls cost more than the rest).
  if (!line.starts_with("File ") && !line.starts_with("frame #") &&
      line.find(".py:") == std::string_view::npos &&
      line.find(".py in ") == std::string_view::npos && !line.starts_with("<ipython-input-") &&
      !line.starts_with("line ")) {
    return std::nullopt;
  }
  re2::StringPiece quoted, bare, function;
  std::string_view path;
  bool python = false;
  if (RE2::PartialMatch(line, kPythonFrame, &quoted, &bare, &function)) {
    path = quoted.empty() ? std::string_view(bare) : std::string_view(quoted);
    python = true;
  } else if (RE2::PartialMatch(line, kIpythonFrame, &bare, &function) ||
             RE2::PartialMatch(line, kRichFrame, &bare, &function) ||
             RE2::PartialMatch(line, kOldIpythonFrame, &bare, &function)) {
    path = bare;
  } else if (RE2::PartialMatch(line, kWrappedFrameTail, &function)) {
    python = true;  // its path is on the line before, whose words are lost
  } else if (RE2::PartialMatch(line, kCppFrame, &function)) {
    const Phase phase = stage_of(function, false);
    return FrameEvidence{phase, phase != Phase::kUnknown, false};
  } else {
    return std::nullopt;
  }
  const std::string_view name = last_name(function);
  const ModulePath module = module_of(path);
  // An uncaught exception unwinds to the script's top level (or runpy's, under "python -m").
  if (name == "<module>" || name == "_run_module_as_main" || name == "_run_code") {
    return FrameEvidence{Phase::kUnknown, false, python, true};
  }
  if (places_model(module.words, name)) return FrameEvidence{Phase::kModelLoad, true, false};
  // The function first; a function that only suggests training ("encode_and_save_batch")
  // lets a module that names another stage speak ("wan_cache_text_encoder_outputs").
  FrameEvidence by_function{Phase::kUnknown, false, python};
  if (!RE2::FullMatch(name, kEntryPoint)) {
    const Phase phase = stage_of(function, false);
    const bool strong =
        phase != Phase::kTrainStep || RE2::PartialMatch(stage_tokens(function), kSpecificTraining);
    if (phase != Phase::kUnknown && strong) return FrameEvidence{phase, true, false};
    if (phase != Phase::kUnknown) by_function = FrameEvidence{phase, false, false};
  } else if (name == "train" || name == "fit" || name == "training") {
    by_function = FrameEvidence{Phase::kTrainStep, false, python};
  }
  // torch's own modules ("_dynamo/eval_frame", "optim/adamw") run in every stage.
  const bool torch_internal = path.find("/torch/") != std::string_view::npos ||
                              path.find("\\torch\\") != std::string_view::npos ||
                              module.words.starts_with("torch/");
  if (!torch_internal) {
    Phase module_phase = stage_of(module.words, false);
    // The module and the function together: "autoencoders/autoencoder_kl" + "encode".
    if (module_phase == Phase::kUnknown) {
      module_phase = stage_of(std::string(module.words) + " " + std::string(name), false);
    }
    if (module_phase == Phase::kQuantize && quantized_compute(name) &&
        !RE2::PartialMatch(module.words, kQuantizingOnly)) {
      module_phase = Phase::kUnknown;
    }
    // Outside an installed package only the file's name spoke: a script called "sample_train.py"
    // is a hint, weaker than any marker.
    const bool strong_module = module.installed;
    if (module_phase != Phase::kUnknown && module_phase != Phase::kTrainStep) {
      if (strong_module) return FrameEvidence{module_phase, true, false};
      if (by_function.phase == Phase::kUnknown) return FrameEvidence{module_phase, false, python};
    }
    if (module_phase == Phase::kTrainStep && by_function.phase == Phase::kUnknown) {
      return FrameEvidence{Phase::kTrainStep, false, python};
    }
  }
  return by_function;
}

std::optional<Phase> traceback_frame_phase(std::string_view line) {
  const auto frame = traceback_frame(line);
  if (!frame) return std::nullopt;
  return frame->phase;
}

bool calls_backward(std::string_view line) {
  return line.find("backward(") != std::string_view::npos &&
         line.find("def ") == std::string_view::npos;
}

std::string_view ipython_statement(std::string_view line) {
  size_t i = 0;
  while (i < line.size() && line[i] == '-') ++i;
  if (i == 0 || i + 1 >= line.size() || line[i] != '>' || line[i + 1] != ' ') return {};
  i += 2;
  while (i < line.size() && line[i] == ' ') ++i;
  const size_t digits = i;
  while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
  if (i == digits || i >= line.size() || line[i] != ' ') return {};
  while (i < line.size() && line[i] == ' ') ++i;
  return line.substr(i);
}

FrameEvidence statement_evidence(std::string_view code) {
  static const RE2 kSpecificTraining(
      R"(\b(?:backward|step|loop|accumulat\w*|loss|epoch|optimizer)\b)", quiet_options());
  const Phase phase = stage_of(code, false);
  if (phase == Phase::kUnknown) return {};
  const bool strong =
      phase != Phase::kTrainStep || RE2::PartialMatch(stage_tokens(code), kSpecificTraining);
  return FrameEvidence{phase, strong, false};
}

Phase source_line_phase(std::string_view line) {
  if (calls_backward(line)) return Phase::kTrainStep;
  const Phase phase = stage_of(line, false);
  return phase == Phase::kQuantize || phase == Phase::kModelLoad ? phase : Phase::kUnknown;
}

std::string_view node_type(std::string_view line) {
  // ComfyUI's error table and log ("Node Type: KSampler", "Exception in node 12 (VAEDecode)");
  // InvokeAI's session processor ("Error while invoking session 5f.., invocation 9a..
  // (flux_denoise): ...").
  static const RE2 kNode(
      R"((?i)\bnode[ _]type\W{0,6}(\w+)|\b(?:in|executing|error in|exception in|failed in) node #?\d+ \((\w+)\))"
      R"(|\binvocation [\w-]+ \((\w+)\))",
      quiet_options());
  // Every form names a "node" or an "invocation", in any case: the regex runs only where one does.
  if (!contains_ascii_nocase(line, "node") && !contains_ascii_nocase(line, "invocation")) return {};
  re2::StringPiece a, b, c;
  if (!RE2::PartialMatch(line, kNode, &a, &b, &c)) return {};
  return !a.empty() ? std::string_view(a) : !b.empty() ? std::string_view(b) : std::string_view(c);
}

namespace {

// The line with every word that holds a '/' or '\\' blanked: a path's folders are the user's
// ("Loading model from /home/me/Sample Training/flux.safetensors"), not the stage's words.
std::string without_paths(std::string_view line) {
  std::string out(line);
  size_t word = 0;
  for (size_t i = 0; i <= out.size(); ++i) {
    if (i < out.size() && out[i] != ' ' && out[i] != '\t') continue;
    const std::string_view token(out.data() + word, i - word);
    if (token.find_first_of("/\\") != std::string_view::npos) {
      std::fill(out.begin() + static_cast<std::ptrdiff_t>(word),
                out.begin() + static_cast<std::ptrdiff_t>(i), ' ');
    }
    word = i + 1;
  }
  return out;
}

}  // namespace

bool may_announce_stage(std::string_view line) {
  // The first word, past leading punctuation and a "stage 2/4:" or "Step 1:" count, ends in
  // "ing": "Caching", "Loading", "Running".
  static const RE2 kCount(R"((?i)^\W*(?:stage|step|phase|task)\s*\d+(?:\s*/\s*\d+)?\s*[:.)\-]\s*)",
                          quiet_options());
  re2::StringPiece rest(line);
  if (RE2::Consume(&rest, kCount)) line = std::string_view(rest.data(), rest.size());
  size_t i = 0;
  while (i < line.size() && i < 8 && !std::isalpha(static_cast<unsigned char>(line[i]))) ++i;
  const size_t start = i;
  while (i < line.size() && std::isalpha(static_cast<unsigned char>(line[i]))) ++i;
  return i - start >= 5 && line.substr(i - 3, 3) == "ing";
}

Phase announced_stage(std::string_view line) {
  if (!may_announce_stage(line)) return Phase::kUnknown;
  return stage_of(without_paths(line.substr(0, 200)), false);
}

bool announces_unnamed_caching(std::string_view line) {
  static const RE2 kUnnamed(
      R"(^(?:encod|cach|precomput)\w*\s(?:the\s)?(?:datasets?|data|outputs?)\b)", quiet_options());
  return may_announce_stage(line) &&
         RE2::PartialMatch(stage_tokens(without_paths(line.substr(0, 200))), kUnnamed);
}

Phase failed_stage(std::string_view line) {
  static const RE2 kFailure(R"((?i)\bfail|\berror\b|\bexception\b|\babort|\bcrash)",
                            quiet_options());
  if (line.size() > 300 || line.find(".py") != std::string_view::npos ||
      !RE2::PartialMatch(line, kFailure)) {
    return Phase::kUnknown;
  }
  return stage_of(without_paths(line), true);
}

bool is_exception_line(std::string_view line) {
  static const RE2 kException(
      R"(^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit)(?::|$))",
      quiet_options());
  return RE2::PartialMatch(line, kException);
}

}  // namespace oomtriage::parsers

namespace oomtriage::parsers {

Result<Ok> context_patterns_ok() {
  const auto& patterns = context_patterns();
  for (size_t i = 0; i < patterns.size(); ++i) {
    RE2 regex(patterns[i].regex, quiet_options());
    if (!regex.ok()) {
      return make_error(ErrorCode::kBadInput,
                        "context pattern " + std::string(patterns[i].name) + ": " + regex.error());
    }
  }
  return stage_lexicon_ok();
}

}  // namespace oomtriage::parsers
