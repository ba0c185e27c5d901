// triage/ranker.cc: the rules as code. Each candidate carries a priority (lower ranks first) and
// its effect on the memory model; planning reads top to bottom in the seed guide's order.
#include "triage/ranker.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "triage/memory_model.h"
#include "parsers/trainer_dialect.h"
#include "triage/native_changes.h"

namespace oomtriage::triage {
namespace {

using parsers::JobConfig;
using parsers::Knob;
using parsers::ModelFamily;
using parsers::OomEvent;
using parsers::OomKind;
using parsers::Phase;

constexpr uint64_t kGiB = 1ull << 30;
constexpr double kFitMargin = 0.95;

std::string gib(uint64_t bytes) { return fmt::format("{:.2f} GiB", bytes / double(kGiB)); }

template <class T>
std::string js(const T& value) {
  // Config strings may hold any bytes: invalid UTF-8 is replaced, never thrown on.
  return nlohmann::json(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// How a fix changes the memory model's two parts.
struct Effect {
  double activations = 1.0;
  double weights = 1.0;
  bool reclaims_fragmentation = false;
  bool frees_other_processes = false;
  bool modelled = true;
  std::string what;  // "activations x0.56 (1024 -> 768 px)"
};

Effect unmodelled() {
  Effect effect;
  effect.modelled = false;
  return effect;
}

struct Candidate {
  int priority = 0;
  Fix fix;
  Effect effect;
};

int next_lower_resolution(int r) {
  for (int step : {2048, 1536, 1024, 768, 512}) {
    if (step < r) return step;
  }
  return r;
}

// Wan and LTX want 4k+1 frames: 81 -> 41 -> 21 -> 9.
int fewer_frames(int n) {
  const int half = (n - 1) / 2 + 1;
  return std::max(1, ((half - 1) / 4) * 4 + 1);
}

bool is_fp32(const std::string& dtype) {
  return dtype == "fp32" || dtype == "float32" || dtype == "float";
}

bool big_text_encoder(ModelFamily f) {
  return f != ModelFamily::kSd1 && f != ModelFamily::kSdxl && f != ModelFamily::kOther;
}

}  // namespace

const std::vector<RankingRow>& ranking_table() {
  // A table, one entry per row as written:
  // clang-format off
  static const std::vector<RankingRow> kTable = {
      {Situation::kShm, "`/dev/shm` too small", {{"increase_shm", 0}}},
      {Situation::kHost,
       "host OOM kill, `MemoryError`",
       {{"reduce_host_memory", 0}, {"cache_latents_to_disk", 20}}},
      {Situation::kOtherProcesses,
       "other processes hold 10% of the GPU or more (a lone \"process\" matching this job's "
       "own memory is the job)",
       {{"free_gpu", 0}}},
      {Situation::kFragmentation,
       "reserved-but-unallocated of 1 GiB or more (first only when it covers the request minus "
       "free memory, else last)",
       {{"expandable_segments", 5}}},
      {Situation::kCheckpointingOff,
       "any GPU OOM but load and caching: gradient checkpointing off (not shown: a check, "
       "early OOMs first, else after the situation's first fix)",
       {{"enable_gradient_checkpointing", 1}}},
      {Situation::kLoad,
       "model load / quantize",
       {{"quantize_model", 10}, {"quantize_text_encoder", 12}, {"enable_low_vram", 14},
        {"layer_offloading", 20}}},
      {Situation::kCacheTextEmbeddings,
       "caching text embeddings",
       {{"quantize_text_encoder", 10}, {"enable_low_vram", 12}}},
      {Situation::kCacheLatents,
       "caching latents",
       {{"enable_low_vram", 10}, {"drop_top_bucket", 12}, {"lower_resolution", 13}}},
      {Situation::kSampling,
       "preview sampling, validation, evaluation (baseline included)",
       {{"cheapen_previews", 10}, {"skip_first_sample", 15}, {"match_target_res", 18},
        {"disable_sampling", 20}, {"enable_low_vram", 25}}},
      {Situation::kTrainLaterBuckets,
       "training step after step 5, several buckets",
       {{"reduce_num_frames", 8}, {"match_target_res", 9}, {"drop_top_bucket", 10},
        {"lower_batch_size", 12}}},
      {Situation::kTrainBatch,
       "training step, batch above 1 (or not shown)",
       {{"reduce_num_frames", 8}, {"match_target_res", 9}, {"lower_batch_size", 10},
        {"drop_top_bucket", 12}, {"lower_resolution", 13}}},
      {Situation::kTrainBatchOne,
       "training step, batch 1",
       {{"reduce_num_frames", 8}, {"match_target_res", 9}, {"drop_top_bucket", 10},
        {"lower_resolution", 11}}},
      {Situation::kTrainAny,
       "any training step, after the above",
       {{"use_bf16", 15}, {"enable_low_vram", 20}, {"quantize_model", 21},
        {"cache_text_embeddings", 22}, {"layer_offloading", 26}, {"cache_latents_to_disk", 28},
        {"use_8bit_optimizer", 30}}},
  };
  // clang-format on
  return kTable;
}

std::string ranking_table_markdown() {
  std::string out = "| situation | candidate fixes (priority) |\n|---|---|\n";
  for (const RankingRow& row : ranking_table()) {
    std::vector<std::string> fixes;
    for (const auto& [id, priority] : row.fixes)
      fixes.push_back(fmt::format("`{}` ({})", id, priority));
    out += fmt::format("| {} | {} |\n", row.when, fmt::join(fixes, ", "));
  }
  return out;
}

namespace {

// "Process P has X memory in use" names this job itself when it runs in a container (the
// driver reports the host's PID): a process whose memory matches the job's own in-use figure,
// or PyTorch's reserved memory plus a CUDA context, is the job.
bool is_this_job(const parsers::OtherProcess& process, const parsers::MemoryFigures& f) {
  constexpr uint64_t kContextAllowance = 3ull << 29;  // 1.5 GiB of context and non-PyTorch memory
  if (f.this_process_in_use_bytes) {
    const uint64_t own = *f.this_process_in_use_bytes;
    const uint64_t diff = own > process.bytes ? own - process.bytes : process.bytes - own;
    return diff * 100 <= own;  // within 1%
  }
  const std::optional<uint64_t> reserved =
      f.reserved_total_bytes ? f.reserved_total_bytes
      : f.allocated_by_pytorch_bytes && f.reserved_unallocated_bytes
          ? std::optional<uint64_t>(*f.allocated_by_pytorch_bytes + *f.reserved_unallocated_bytes)
          : f.allocated_by_pytorch_bytes;
  if (!reserved || *reserved == 0) return false;
  return process.bytes >= *reserved && process.bytes - *reserved <= kContextAllowance;
}

// The event as the planner reads it: a "process" that is this job moves to its own figure.
OomEvent without_this_job(OomEvent event) {
  auto& others = event.figures.other_processes;
  // Only a lone process can be told apart as the job; with several, all are others.
  if (others.size() == 1 && is_this_job(others.front(), event.figures)) {
    if (!event.figures.this_process_in_use_bytes) {
      event.figures.this_process_in_use_bytes = others.front().bytes;
    }
    others.clear();
  }
  return event;
}

class Planner {
 public:
  Planner(const TriageInput& input, const OomEvent& event, const JobConfig& config,
          bool assumed_config)
      : input_(input),
        e_(without_this_job(event)),
        c_(config),
        assumed_(assumed_config),
        cal_(calibrate(e_, assumed_config ? nullptr : &config)) {}

  std::vector<Fix> plan();

 private:
  void add(int priority, Fix fix, Effect effect = {}) {
    if (!ids_.insert(fix.id).second) return;  // one fix per id, the first (best) placement wins
    candidates_.push_back({priority, std::move(fix), std::move(effect)});
  }
  Fix make(const char* id, std::string title, std::string why, std::string cost,
           double confidence) {
    Fix fix;
    fix.id = id;
    fix.title = std::move(title);
    fix.why = std::move(why);
    fix.cost = std::move(cost);
    fix.confidence = confidence;
    return fix;
  }
  // A change in the ranker's vocabulary; triage/native_changes.h writes it in the job's syntax.
  void change(Fix& fix, const std::string& path, std::string from, std::string to) {
    ConfigChange c;
    c.path = path;
    c.from_json = std::move(from);
    c.to_json = std::move(to);
    c.neutral = true;
    fix.changes.push_back(std::move(c));
  }
  bool knows(Knob knob) const { return c_.knows(knob); }
  bool ai_toolkit() const { return c_.trainer == parsers::Trainer::kAiToolkit; }
  // The trainer's own name for a setting, for the words of a fix ("train_batch_size").
  std::string setting(std::string_view neutral, std::string_view ai_toolkit_name) const;

  void plan_host_memory();
  void plan_shm();
  void plan_free_gpu(int priority);
  void plan_expandable_segments(int priority, int priority_if_short);
  bool applies(Situation situation) const;
  void propose(std::string_view id, int priority, Situation situation);
  void plan_gradient_checkpointing(int priority, int priority_if_unknown);
  std::string preview_check() const;
  void plan_previews(int priority);
  void plan_skip_first_sample(int priority);
  void plan_disable_sampling(int priority);
  void plan_batch(int priority);
  void plan_top_bucket(int priority);
  void plan_lower_resolution(int priority);
  void plan_num_frames(int priority);
  void plan_match_target_res(int priority);
  void plan_low_vram(int priority, const char* why);
  void plan_quantize(int priority);
  void plan_quantize_te(int priority);
  void plan_cache_text_embeddings(int priority);
  void plan_layer_offloading(int priority);
  void plan_cache_latents_to_disk(int priority);
  void plan_bf16(int priority);
  void plan_8bit_optimizer(int priority);
  void estimate(Candidate& candidate) const;

  std::string step_words() const {
    if (!e_.step) return "";
    return e_.total_steps ? fmt::format(" at step {} of {}", *e_.step, *e_.total_steps)
                          : fmt::format(" at step {}", *e_.step);
  }

  const TriageInput& input_;
  const OomEvent e_;  // with a "process" that is this job moved to its own figure
  const JobConfig& c_;
  bool assumed_;
  std::optional<Calibration> cal_;
  std::vector<Candidate> candidates_;
  std::set<std::string> ids_;
};

std::string Planner::setting(std::string_view neutral, std::string_view ai_toolkit_name) const {
  if (ai_toolkit() || c_.trainer == parsers::Trainer::kUnknown) {
    return c_.trainer == parsers::Trainer::kUnknown
               ? std::string(neutral.substr(neutral.find('.') + 1))
               : std::string(ai_toolkit_name);
  }
  const parsers::DialectRow* row = parsers::row_for(c_.trainer, neutral);
  if (row == nullptr) return std::string(neutral.substr(neutral.find('.') + 1));
  const bool flags = !c_.targets.empty() && c_.targets.front().kind == parsers::TargetKind::kArgs;
  return (flags ? "--" : "") + std::string(row->native);
}

std::string Planner::preview_check() const {
  switch (c_.trainer) {
    case parsers::Trainer::kSdScripts:
      return "kohya reads each preview's size and steps from the sample prompts file: lower --w "
             "and --h (1024 -> 768) and --s (30 -> 20) on each prompt line, or sample less often "
             "(sample_every_n_steps)";
    case parsers::Trainer::kDiffusers:
      return "diffusers' scripts validate at the training resolution: lower "
             "--num_validation_images, validate less often (--validation_epochs), or drop "
             "--validation_prompt";
    case parsers::Trainer::kTransformers:
      return "lower --per_device_eval_batch_size (with --eval_accumulation_steps to keep memory "
             "flat), or evaluate less often";
    case parsers::Trainer::kOneTrainer:
      return "OneTrainer takes each sample's size and steps from its samples file: lower width, "
             "height and diffusion steps there, or set sample_after_unit to NEVER";
    case parsers::Trainer::kSimpleTuner:
      return "lower --validation_resolution and --validation_num_inference_steps, or set "
             "--validation_disable";
    default:
      return "lower the preview or validation resolution, steps and count in the trainer's "
             "sampling settings";
  }
}

void Planner::plan_host_memory() {
  Fix fix =
      make("reduce_host_memory", "Reduce host RAM use (not GPU memory)",
           fmt::format("The process was killed for host RAM ({}){}: this is not a GPU OOM, so "
                       "batch size and gradient checkpointing do not help",
                       parsers::to_string(e_.kind), step_words()),
           "Fewer dataloader workers load data more slowly; adding RAM or swap costs nothing "
           "in training but swap is slow",
           0.8);
  int workers = 0;
  for (size_t i = 0; knows(Knob::kNumWorkers) && i < c_.datasets.size(); ++i) {
    if (c_.datasets[i].num_workers > 1) {
      change(fix, fmt::format("datasets[{}].num_workers", i), js(c_.datasets[i].num_workers),
             js(1));
      ++workers;
    }
  }
  fix.why += workers > 0 ? "; each dataloader worker holds its own copy of the dataset state"
                         : "; add RAM or swap, or close other programs";
  add(0, std::move(fix), unmodelled());
}

void Planner::plan_shm() {
  Fix fix = make("increase_shm", "Give the container a larger /dev/shm",
                 "The dataloader ran out of shared memory (/dev/shm), typical of Docker's 64 MB "
                 "default; this is not a GPU OOM",
                 "None once the container has --shm-size=16g (compose: shm_size: 16gb); with 0 "
                 "workers data loads in the training process, more slowly",
                 0.85);
  for (size_t i = 0; knows(Knob::kNumWorkers) && i < c_.datasets.size(); ++i) {
    if (c_.datasets[i].num_workers > 0) {
      change(fix, fmt::format("datasets[{}].num_workers", i), js(c_.datasets[i].num_workers),
             js(0));
    }
  }
  add(0, std::move(fix), unmodelled());
}

void Planner::plan_free_gpu(int priority) {
  uint64_t others = 0;
  for (const auto& p : e_.figures.other_processes) others += p.bytes;
  std::vector<std::string> pids;
  for (const auto& p : e_.figures.other_processes) {
    pids.push_back(fmt::format("{} ({})", p.pid, gib(p.bytes)));
  }
  Fix fix = make("free_gpu", "Free the GPU: other processes hold its memory",
                 fmt::format("{} other process{} held {} on GPU {} when the job failed: {}; no "
                             "config change gives that memory back",
                             pids.size(), pids.size() == 1 ? "" : "es", gib(others),
                             e_.figures.gpu_index.value_or(0), fmt::join(pids, ", ")),
                 "None for the job; stop or move the other processes (nvidia-smi shows them)", 0.9);
  add(priority, std::move(fix),
      Effect{.frees_other_processes = true, .what = "other processes gone"});
}

void Planner::plan_expandable_segments(int priority, int priority_if_short) {
  const uint64_t unalloc = e_.figures.reserved_unallocated_bytes.value_or(0);
  const uint64_t tried = e_.figures.tried_to_allocate_bytes.value_or(0);
  // What was missing: the request minus what was free (the whole request when free is unknown).
  const uint64_t free = e_.figures.free_bytes.value_or(0);
  const uint64_t deficit = tried > free ? tried - free : 0;
  const bool covers = unalloc >= deficit;
  Fix fix = make(
      "expandable_segments", "Let PyTorch's allocator grow segments (fragmentation)",
      fmt::format(
          "{} was reserved by PyTorch but unallocated when {} was requested{}: "
          "{}",
          gib(unalloc), gib(tried),
          e_.figures.free_bytes ? fmt::format(" with {} free", gib(*e_.figures.free_bytes)) : "",
          covers ? "the memory was there, in pieces"
                 : "even unfragmented it would not cover the shortfall"),
      "None measurable; set it in the job's environment", covers ? 0.7 : 0.4);
  ConfigChange env;
  env.path = "env.PYTORCH_CUDA_ALLOC_CONF";
  env.from_json = "null";
  env.to_json = js("expandable_segments:True");
  env.kind = parsers::TargetKind::kEnv;
  fix.changes.push_back(std::move(env));
  add(covers ? priority : priority_if_short, std::move(fix),
      Effect{.reclaims_fragmentation = true, .what = "reserved-but-unallocated memory reclaimed"});
}

void Planner::plan_gradient_checkpointing(int priority, int priority_if_unknown) {
  const std::string name = setting("train.gradient_checkpointing", "train.gradient_checkpointing");
  if (!knows(Knob::kGradientCheckpointing)) {
    Fix fix = make("enable_gradient_checkpointing", "Make sure gradient checkpointing is on",
                   fmt::format("Neither the log nor the job's config shows whether gradient "
                               "checkpointing is on, and the job ran out of memory during {}{}: "
                               "with it off every activation stays in VRAM",
                               parsers::to_string(e_.phase), step_words()),
                   "If it was off: steps get roughly 20-30% slower, results are the same", 0.5);
    fix.check = fmt::format("Check whether {} is on; if it is, this fix does nothing", name);
    change(fix, "train.gradient_checkpointing", "null", js(true));
    add(priority_if_unknown, std::move(fix), unmodelled());
    return;
  }
  if (c_.gradient_checkpointing) return;
  Fix fix = make(
      "enable_gradient_checkpointing", "Turn gradient checkpointing back on",
      fmt::format("{} is off and the job ran out of memory "
                  "during {}{}: without checkpointing every activation stays in VRAM, "
                  "the typical cause of OOMs at step 2-3 or at the first preview. Retry "
                  "with the same batch and resolutions",
                  c_.gradient_checkpointing_explicit || ai_toolkit()
                      ? name
                      : name + " (left out: the trainer's default is off)",
                  parsers::to_string(e_.phase), step_words()),
      "Steps get roughly 20-30% slower (activations are recomputed); results are the same", 0.9);
  change(fix, "train.gradient_checkpointing", js(false), js(true));
  add(priority, std::move(fix),
      Effect{.activations = 0.4, .what = "activations x0.40 (checkpointing)"});
}

void Planner::plan_previews(int priority) {
  if (knows(Knob::kSampling) && c_.disable_sampling) return;
  const auto& s = c_.sample;
  if (!knows(Knob::kPreviewSize)) {
    Fix fix = make("cheapen_previews", "Make preview samples cheaper",
                   fmt::format("The OOM happened while generating previews or evaluating{}; a "
                               "cheaper pass fixes it, not gradient checkpointing or the batch "
                               "size",
                               step_words()),
                   "Lower-quality previews", 0.6);
    fix.check = preview_check();
    add(priority, std::move(fix), unmodelled());
    return;
  }
  Fix fix = make("cheapen_previews", "Make preview samples cheaper",
                 fmt::format("The OOM happened while generating preview samples{}; previews run "
                             "beside the training state, so a cheaper preview fixes it, not "
                             "gradient checkpointing or the batch size",
                             e_.step && *e_.step == 0 ? " (the baseline sample, before step 1)"
                                                      : step_words()),
                 "", 0.8);
  double scale = 1.0;
  std::vector<std::string> costs;
  const int side = std::max(s.max_width, s.max_height);
  if (side > 512) {
    const int lower = next_lower_resolution(side);
    const double ratio = double(lower) / side;
    const int w = std::max(256, int(std::lround(s.width * ratio / 64.0)) * 64);
    const int h = std::max(256, int(std::lround(s.height * ratio / 64.0)) * 64);
    change(fix, "sample.width", js(s.width), js(w));
    change(fix, "sample.height", js(s.height), js(h));
    scale *= double(w) * h / (double(s.width) * s.height);
    costs.push_back(fmt::format("previews at {}x{} instead of {}x{}", w, h, s.width, s.height));
  }
  if (s.steps > 20) {
    change(fix, "sample.sample_steps", js(s.steps), js(20));
    costs.push_back(fmt::format("{} sampling steps instead of {}", 20, s.steps));
  }
  if (s.max_frames > 1) {
    const int frames = fewer_frames(s.num_frames);
    if (frames < s.num_frames) {
      change(fix, "sample.num_frames", js(s.num_frames), js(frames));
      scale *= double(frames) / s.num_frames;
      costs.push_back(fmt::format("{}-frame preview videos instead of {}", frames, s.num_frames));
    }
  }
  if (s.batch_size > 1) {
    change(fix, "sample.batch_size", js(s.batch_size), js(std::max(1, s.batch_size / 2)));
    scale *= double(std::max(1, s.batch_size / 2)) / s.batch_size;
    costs.push_back(fmt::format("evaluation batches of {} instead of {}",
                                std::max(1, s.batch_size / 2), s.batch_size));
  }
  if (knows(Knob::kSampling) && s.every > 0 && s.every < 500) {
    change(fix, "sample.sample_every", js(s.every), js(s.every * 2));
    costs.push_back(fmt::format("previews every {} steps instead of {}", s.every * 2, s.every));
  }
  if (fix.changes.empty()) return;
  if (s.count > 4) fix.why += fmt::format("; {} prompts also cost time each round", s.count);
  fix.cost = fmt::format("Lower-quality previews: {}", fmt::join(costs, ", "));
  add(priority, std::move(fix),
      Effect{.activations = scale, .what = fmt::format("sampling activations x{:.2f}", scale)});
}

void Planner::plan_skip_first_sample(int priority) {
  if (!ai_toolkit() || !knows(Knob::kSampling) || c_.skip_first_sample || c_.disable_sampling ||
      !e_.step || *e_.step != 0)
    return;
  Fix fix = make("skip_first_sample", "Skip the baseline sample before training",
                 "The OOM happened in the baseline sample that AI Toolkit generates before step 1",
                 "No 'before' previews to compare against; later previews still run", 0.6);
  change(fix, "train.skip_first_sample", js(false), js(true));
  add(priority, std::move(fix), unmodelled());
}

void Planner::plan_disable_sampling(int priority) {
  if (!knows(Knob::kSampling) || c_.disable_sampling) return;
  Fix fix = make("disable_sampling", "Turn preview sampling off",
                 "Preview sampling is where the job ran out of memory; without previews that pass "
                 "never runs",
                 "No previews during training: judge the LoRA from saved checkpoints instead", 0.7);
  change(fix, "train.disable_sampling", js(false), js(true));
  add(priority, std::move(fix), unmodelled());
}

void Planner::plan_batch(int priority) {
  const std::string batch_name = setting("train.batch_size", "train.batch_size");
  const std::string accumulation_name =
      setting("train.gradient_accumulation", "train." + c_.gradient_accumulation_key);
  if (!knows(Knob::kBatchSize)) {
    Fix fix = make("lower_batch_size", "Halve the batch if it is above 1",
                   fmt::format("Neither the log nor the job's config shows the batch size; the job "
                               "ran out of memory in a training step{} and activations grow with "
                               "the batch",
                               step_words()),
                   "Same effective batch with doubled accumulation, about the same speed per image",
                   0.45);
    fix.check = fmt::format("Check {}: if it is above 1, halve it and double {}", batch_name,
                            accumulation_name);
    add(priority, std::move(fix), unmodelled());
    return;
  }
  const int batch = c_.effective_batch_size();
  if (batch <= 1) return;
  const int lower = std::max(1, batch / 2);
  const int factor = batch / lower;
  Fix fix =
      make("lower_batch_size", "Halve the batch and double gradient accumulation",
           fmt::format("Batch {}{} ran out of memory{}: activations grow with the batch", batch,
                       knows(Knob::kGradientCheckpointing) && c_.gradient_checkpointing
                           ? " with gradient checkpointing already on"
                           : "",
                       step_words()),
           fmt::format("Same effective batch ({} x {}), about the same speed per image", lower,
                       c_.gradient_accumulation * factor),
           0.75);
  if (c_.batch_size > 1)
    change(fix, "train.batch_size", js(c_.batch_size), js(std::max(1, c_.batch_size / 2)));
  for (size_t i = 0; i < c_.datasets.size(); ++i) {
    if (const auto b = c_.datasets[i].batch_size; b && *b > 1) {
      change(fix, fmt::format("datasets[{}].batch_size", i), js(*b), js(std::max(1, *b / 2)));
    }
  }
  if (knows(Knob::kGradientAccumulation)) {
    change(fix, "train." + c_.gradient_accumulation_key, js(c_.gradient_accumulation),
           js(c_.gradient_accumulation * factor));
  } else {
    fix.check = fmt::format("The job does not show {}: double it to keep the effective batch",
                            accumulation_name);
  }
  add(priority, std::move(fix),
      Effect{.activations = double(lower) / batch,
             .what = fmt::format("activations x{:.2f} (batch {} -> {})", double(lower) / batch,
                                 batch, lower)});
}

void Planner::plan_top_bucket(int priority) {
  if (!knows(Knob::kResolution)) return;
  const std::vector<int> all = c_.all_resolutions();
  if (all.size() < 2) return;
  const int top = all.back();
  const int next = all[all.size() - 2];
  Fix fix = make("drop_top_bucket", fmt::format("Drop the {} px bucket", top),
                 fmt::format("Resolutions {} are trained as separate datasets drawn at random, so "
                             "the {} px batches arrive at random steps{}",
                             fmt::format("[{}]", fmt::join(all, ", ")), top,
                             e_.step && *e_.step > 5
                                 ? fmt::format(" — this OOM came at step {}, after earlier steps "
                                               "succeeded: an intermittent bucket spike",
                                               *e_.step)
                                 : ""),
                 fmt::format("No training at {} px; re-add it after a stable run", top), 0.75);
  for (size_t i = 0; i < c_.datasets.size(); ++i) {
    const auto& d = c_.datasets[i];
    if (!d.resolution_is_list || d.resolutions.size() < 2 || d.resolutions.back() != top) continue;
    std::vector<int> kept(d.resolutions.begin(), d.resolutions.end() - 1);
    change(fix, fmt::format("datasets[{}].resolution", i), js(d.resolutions), js(kept));
  }
  if (fix.changes.empty()) return;
  const double scale = double(next) * next / (double(top) * top);
  add(priority, std::move(fix),
      Effect{.activations = scale,
             .what = fmt::format("activations x{:.2f} ({} -> {} px)", scale, top, next)});
}

void Planner::plan_lower_resolution(int priority) {
  if (!knows(Knob::kResolution)) return;
  const std::vector<int> all = c_.all_resolutions();
  if (all.size() != 1 || all[0] <= 512) return;
  const int r = all[0];
  const int lower = next_lower_resolution(r);
  Fix fix = make("lower_resolution", fmt::format("Train at {} px instead of {}", lower, r),
                 fmt::format("The only training resolution is {} px; activations grow with the "
                             "pixel count",
                             r),
                 "Less detail learned at the top resolution", 0.6);
  for (size_t i = 0; i < c_.datasets.size(); ++i) {
    const auto& d = c_.datasets[i];
    if (d.resolutions.empty()) continue;
    const std::string from = d.resolution_is_list ? nlohmann::json(d.resolutions).dump() : js(r);
    const std::string to =
        d.resolution_is_list ? nlohmann::json(std::vector<int>{lower}).dump() : js(lower);
    change(fix, fmt::format("datasets[{}].resolution", i), from, to);
  }
  const double scale = double(lower) * lower / (double(r) * r);
  add(priority, std::move(fix),
      Effect{.activations = scale, .what = fmt::format("activations x{:.2f}", scale)});
}

void Planner::plan_num_frames(int priority) {
  if (!knows(Knob::kNumFrames)) return;
  const int frames = c_.max_num_frames();
  if (frames <= 1) return;
  const int lower = fewer_frames(frames);
  if (lower >= frames) return;
  Fix fix =
      make("reduce_num_frames", fmt::format("Train on {} frames instead of {}", lower, frames),
           fmt::format("{} is a video model and each sample has {} frames: activations grow "
                       "with the frame count",
                       parsers::to_string(c_.family), frames),
           "Shorter clips: less motion context per sample", 0.75);
  for (size_t i = 0; i < c_.datasets.size(); ++i) {
    if (c_.datasets[i].num_frames > 1) {
      change(fix, fmt::format("datasets[{}].num_frames", i), js(c_.datasets[i].num_frames),
             js(fewer_frames(c_.datasets[i].num_frames)));
    }
  }
  add(priority, std::move(fix),
      Effect{.activations = double(lower) / frames,
             .what = fmt::format("activations x{:.2f} ({} -> {} frames)", double(lower) / frames,
                                 frames, lower)});
}

void Planner::plan_match_target_res(int priority) {
  if (!ai_toolkit() || c_.family != ModelFamily::kQwenImageEditPlus || c_.match_target_res ||
      !c_.has_control_images()) {
    return;
  }
  Fix fix = make("match_target_res", "Resize control images to the target's size",
                 "Qwen-Image-Edit-2509/2511 resizes every control image to about 1 MP by default; "
                 "with match_target_res they follow the training resolution",
                 "Control images carry less detail at low resolutions", 0.6);
  change(fix, "model.model_kwargs.match_target_res", js(false), js(true));
  add(priority, std::move(fix),
      Effect{.activations = 0.8, .what = "activations x0.80 (smaller controls, rough)"});
}

void Planner::plan_low_vram(int priority, const char* why) {
  if (!knows(Knob::kLowVram) || c_.low_vram) return;
  Fix fix = make("enable_low_vram", "Use the model's low-VRAM path", why,
                 "Slower loading and quantizing (done on the CPU); needs more host RAM", 0.6);
  change(fix, "model.low_vram", js(false), js(true));
  add(priority, std::move(fix), unmodelled());
}

void Planner::plan_quantize(int priority) {
  if (!knows(Knob::kQuantize)) return;
  const double bpp = bytes_per_param(c_.qtype);
  std::string to_qtype;
  if (!c_.quantize) {
    to_qtype = c_.qtype.empty() ? "qfloat8" : c_.qtype;
  } else if (bpp > 0.5) {
    to_qtype = "uint4";
  } else {
    return;  // already at 4 bits or below
  }
  Fix fix = make(
      "quantize_model",
      !ai_toolkit() ? fmt::format("Load the base model quantized ({})",
                                  setting("model.quantize", "model.quantize"))
      : c_.quantize
          ? fmt::format("Quantize the transformer to {} instead of {}", to_qtype, c_.qtype)
          : fmt::format("Quantize the transformer ({})", to_qtype),
      fmt::format(
          "The {} weights are a large share of the GPU memory{}", parsers::to_string(c_.family),
          cal_ && cal_->weights_bytes ? fmt::format(" (about {} of the {} needed)",
                                                    gib(cal_->weights_bytes), gib(cal_->need_bytes))
                                      : ""),
      c_.quantize ? "Some quality loss at 4 bits; AI Toolkit's accuracy-recovery "
                    "adapters (qtype \"uint4|<adapter>\") limit it"
                  : "Slightly lower quality; quantizing takes a few minutes at start",
      0.65);
  if (!c_.quantize) change(fix, "model.quantize", js(false), js(true));
  if (c_.quantize || to_qtype != "qfloat8") change(fix, "model.qtype", js(c_.qtype), js(to_qtype));
  const double old_bpp = c_.quantize ? bpp : bytes_per_param(c_.dtype);
  const double new_bpp = bytes_per_param(to_qtype);
  Effect effect;
  const auto size = model_size(c_);
  if (size && cal_ && cal_->weights_bytes > 0) {
    const double transformer = size->transformer_params_billion * 1e9 * old_bpp;
    const double saved = transformer * (1.0 - new_bpp / old_bpp);
    effect.weights = std::max(0.0, 1.0 - saved / cal_->weights_bytes);
    effect.what = fmt::format("transformer weights {:.2f} -> {:.2f} bytes/param", old_bpp, new_bpp);
  } else {
    effect.modelled = false;
  }
  add(priority, std::move(fix), effect);
}

void Planner::plan_quantize_te(int priority) {
  if (!knows(Knob::kTextEncoder) || c_.quantize_te || c_.cache_text_embeddings ||
      c_.unload_text_encoder)
    return;
  Fix fix = make("quantize_text_encoder", "Quantize the text encoder",
                 "The text encoder stays on the GPU unquantized",
                 "Slightly different text features", 0.5);
  change(fix, "model.quantize_te", js(false), js(true));
  add(priority, std::move(fix), unmodelled());
}

void Planner::plan_cache_text_embeddings(int priority) {
  if (!knows(Knob::kTextEncoder) || c_.cache_text_embeddings || c_.unload_text_encoder ||
      c_.train_text_encoder || !big_text_encoder(c_.family)) {
    return;
  }
  Fix fix = make(
      "cache_text_embeddings", "Cache text embeddings and unload the text encoder",
      fmt::format("{}'s text encoder stays on the GPU for the whole run; caching the "
                  "caption embeddings once lets it leave",
                  parsers::to_string(c_.family)),
      "A caching pass at start; caption dropout and trigger-word changes need a re-cache", 0.6);
  change(fix, "train.cache_text_embeddings", js(false), js(true));
  Effect effect = unmodelled();
  const auto size = model_size(c_);
  if (size && cal_ && cal_->weights_bytes > 0) {
    const double te = size->text_encoder_params_billion * 1e9 *
                      (c_.quantize_te ? bytes_per_param(c_.qtype_te) : bytes_per_param(c_.dtype));
    effect = Effect{.weights = std::max(0.0, 1.0 - te / cal_->weights_bytes),
                    .what = "text encoder off the GPU"};
  }
  add(priority, std::move(fix), effect);
}

void Planner::plan_layer_offloading(int priority) {
  if (!knows(Knob::kOffloading) || c_.layer_offloading) return;
  Fix fix = make("layer_offloading", "Offload transformer layers to the CPU",
                 "Keeps part of the transformer in host RAM and streams it to the GPU",
                 "Much slower steps and a lot of host RAM", 0.45);
  change(fix, "model.layer_offloading", js(false), js(true));
  add(priority, std::move(fix), unmodelled());
}

void Planner::plan_cache_latents_to_disk(int priority) {
  if (!knows(Knob::kLatentCache)) return;
  Fix fix =
      make("cache_latents_to_disk", "Cache latents to disk",
           "Without cached latents the VAE stays on the GPU for the whole run",
           "A caching pass at start and disk space; augmentations that change pixels are off", 0.4);
  for (size_t i = 0; i < c_.datasets.size(); ++i) {
    if (!c_.datasets[i].cache_latents_to_disk) {
      change(fix, fmt::format("datasets[{}].cache_latents_to_disk", i), js(false), js(true));
    }
  }
  if (fix.changes.empty()) return;
  add(priority, std::move(fix), unmodelled());
}

void Planner::plan_bf16(int priority) {
  if (!knows(Knob::kDtype) || !is_fp32(c_.dtype)) return;
  Fix fix = make("use_bf16", "Train in bf16 instead of fp32",
                 fmt::format("{} is fp32{}: every weight and activation takes twice the memory "
                             "of bf16",
                             setting("train.dtype", "train.dtype"),
                             ai_toolkit() ? " (AI Toolkit's default when the key is absent)"
                                          : " (full precision)"),
                 "Needs a GPU with bf16 (Ampere or newer); no visible quality loss for LoRAs", 0.7);
  change(fix, "train.dtype", js(c_.dtype), js("bf16"));
  add(priority, std::move(fix),
      Effect{.activations = 0.5, .weights = c_.quantize ? 1.0 : 0.5, .what = "fp32 -> bf16"});
}

void Planner::plan_8bit_optimizer(int priority) {
  if (!knows(Knob::kOptimizer)) return;
  if (c_.optimizer != "adamw" && c_.optimizer != "adam") return;
  Fix fix = make("use_8bit_optimizer", "Use an 8-bit optimizer",
                 fmt::format("{} keeps two fp32 states per trained parameter", c_.optimizer),
                 "Negligible for LoRA training", 0.35);
  change(fix, "train.optimizer", js(c_.optimizer), js("adamw8bit"));
  add(priority, std::move(fix), unmodelled());
}

void Planner::estimate(Candidate& candidate) const {
  if (!cal_ || !candidate.effect.modelled) return;
  const Effect& effect = candidate.effect;
  double peak = cal_->weights_bytes * effect.weights + cal_->activations_bytes * effect.activations;
  if (effect.reclaims_fragmentation) {
    peak -= std::min<double>(peak * 0.5, e_.figures.reserved_unallocated_bytes.value_or(0));
  }
  const double usable = effect.frees_other_processes ? cal_->capacity_bytes : cal_->usable_bytes;
  Fix& fix = candidate.fix;
  fix.predicted_peak_bytes = static_cast<uint64_t>(std::max(0.0, peak));
  fix.fits = peak < usable * kFitMargin;
  fix.estimate = fmt::format(
      "estimated, not measured: the failed step needed {} ({} modelled weights{} + {} "
      "activations); with this fix {} -> about {} of {} usable{}",
      gib(cal_->need_bytes), gib(cal_->weights_bytes),
      assumed_ ? "" : fmt::format(" for {}", parsers::to_string(c_.family)),
      gib(cal_->activations_bytes), effect.what.empty() ? "unchanged" : effect.what,
      gib(*fix.predicted_peak_bytes), gib(static_cast<uint64_t>(usable)),
      *fix.fits ? " (fits with a 5% margin)" : " (still too much alone)");
}

bool Planner::applies(Situation situation) const {
  const Phase phase = e_.phase;
  const bool host = e_.kind == OomKind::kHostKilled || e_.kind == OomKind::kHostMemoryError;
  const bool gpu = e_.kind != OomKind::kShm && !host;
  const bool loading = phase == Phase::kModelLoad || phase == Phase::kQuantize;
  const bool caching = phase == Phase::kCacheLatents || phase == Phase::kCacheTextEmbeddings;
  const bool training = gpu && !loading && !caching && phase != Phase::kSampling;
  const bool later = e_.step && *e_.step > 5;
  const bool early = e_.step && *e_.step <= 5;
  const bool batch_above_one = !knows(Knob::kBatchSize) || c_.effective_batch_size() > 1;
  switch (situation) {
    case Situation::kShm: return e_.kind == OomKind::kShm;
    case Situation::kHost: return host;
    case Situation::kOtherProcesses: {
      uint64_t others = 0;
      for (const auto& p : e_.figures.other_processes) others += p.bytes;
      const uint64_t capacity = e_.figures.total_capacity_bytes.value_or(0);
      return gpu && others >= kGiB && (capacity == 0 || others * 10 >= capacity);
    }
    case Situation::kFragmentation: {
      const uint64_t unalloc = e_.figures.reserved_unallocated_bytes.value_or(0);
      const uint64_t tried = e_.figures.tried_to_allocate_bytes.value_or(0);
      return gpu &&
             (unalloc >= kGiB || (unalloc >= 256ull << 20 && unalloc * 2 >= tried && tried > 0));
    }
    case Situation::kCheckpointingOff: return gpu && !loading && !caching;
    case Situation::kLoad: return gpu && loading;
    case Situation::kCacheTextEmbeddings: return gpu && phase == Phase::kCacheTextEmbeddings;
    case Situation::kCacheLatents: return gpu && phase == Phase::kCacheLatents;
    case Situation::kSampling: return gpu && phase == Phase::kSampling;
    case Situation::kTrainLaterBuckets: return training && later && c_.all_resolutions().size() > 1;
    case Situation::kTrainBatch:
      return training && !(later && c_.all_resolutions().size() > 1) && batch_above_one;
    case Situation::kTrainBatchOne:
      return training && !(later && c_.all_resolutions().size() > 1) && !batch_above_one;
    case Situation::kTrainAny: return training;
  }
  (void)early;
  return false;
}

void Planner::propose(std::string_view id, int priority, Situation situation) {
  const bool early = e_.step && *e_.step <= 5 && e_.phase != Phase::kSampling;
  if (id == "increase_shm") return plan_shm();
  if (id == "reduce_host_memory") return plan_host_memory();
  if (id == "free_gpu") return plan_free_gpu(priority);
  if (id == "expandable_segments") return plan_expandable_segments(priority, 45);
  // Not shown: checked first for an OOM in the first steps (the GC-off signature), after the
  // situation's own first fix for a later one, and after the preview levers for a sampling OOM
  // (cheaper previews fix those, not checkpointing).
  if (id == "enable_gradient_checkpointing") {
    return plan_gradient_checkpointing(priority, early                          ? 2
                                                 : e_.phase == Phase::kSampling ? 21
                                                                                : 11);
  }
  if (id == "quantize_model") return plan_quantize(priority);
  if (id == "quantize_text_encoder") return plan_quantize_te(priority);
  if (id == "layer_offloading") return plan_layer_offloading(priority);
  if (id == "cache_latents_to_disk") return plan_cache_latents_to_disk(priority);
  if (id == "drop_top_bucket") return plan_top_bucket(priority);
  if (id == "lower_resolution") return plan_lower_resolution(priority);
  if (id == "cheapen_previews") return plan_previews(priority);
  if (id == "skip_first_sample") return plan_skip_first_sample(priority);
  if (id == "match_target_res") return plan_match_target_res(priority);
  if (id == "disable_sampling") return plan_disable_sampling(priority);
  if (id == "reduce_num_frames") {
    if (parsers::is_video_family(c_.family)) plan_num_frames(priority);
    return;
  }
  if (id == "lower_batch_size") return plan_batch(priority);
  if (id == "use_bf16") return plan_bf16(priority);
  if (id == "cache_text_embeddings") return plan_cache_text_embeddings(priority);
  if (id == "use_8bit_optimizer") return plan_8bit_optimizer(priority);
  if (id == "enable_low_vram") {
    switch (situation) {
      case Situation::kLoad:
        return plan_low_vram(priority,
                             "Loads and quantizes the transformer on the CPU, then moves it to "
                             "the GPU");
      case Situation::kCacheTextEmbeddings:
        return plan_low_vram(priority, "Keeps the model off the GPU while the text encoder runs");
      case Situation::kCacheLatents:
        return plan_low_vram(priority,
                             "Encodes latents with a tiled VAE and keeps the transformer off the "
                             "GPU");
      case Situation::kSampling:
        return plan_low_vram(priority, "Tiles the VAE decode of previews and unloads idle parts");
      default:
        return plan_low_vram(priority, c_.family == ModelFamily::kWan22
                                           ? "Keeps idle parts of the model off the GPU and "
                                             "unloads the idle Wan 2.2 stage"
                                           : "Keeps idle parts of the model off the GPU between "
                                             "uses");
    }
  }
}

// A fix the memory model says fits (0) before the others (1): one it cannot estimate and one
// that does not fit alone keep the table's order between them.
int fit_class(const Fix& fix) { return fix.fits && *fix.fits ? 0 : 1; }

std::vector<Fix> Planner::plan() {
  for (const RankingRow& row : ranking_table()) {
    if (!applies(row.situation)) continue;
    for (const auto& [id, priority] : row.fixes) propose(id, priority, row.situation);
  }
  std::vector<Candidate> kept;
  for (Candidate& candidate : candidates_) {
    estimate(candidate);
    // Written in the job's own syntax; a fix its trainer cannot express is not proposed, unless
    // it says what to check (an unknown trainer still gets "make sure checkpointing is on").
    if (to_native(candidate.fix, c_) || !candidate.fix.check.empty()) {
      kept.push_back(std::move(candidate));
    }
  }
  // A fix the memory model says cannot fit never outranks one that can.
  const auto& tried = input_.tried_and_failed;
  const auto was_tried = [&](const Candidate& c) {
    return std::find(tried.begin(), tried.end(), c.fix.id) != tried.end();
  };
  for (Candidate& candidate : kept) {
    if (was_tried(candidate)) {
      candidate.fix.why +=
          "; the previous run carried this fix and crashed again in the same "
          "phase, so the next lever comes first";
    }
  }
  std::stable_sort(kept.begin(), kept.end(), [&](const Candidate& a, const Candidate& b) {
    if (was_tried(a) != was_tried(b)) return was_tried(b);
    const int fa = fit_class(a.fix), fb = fit_class(b.fix);
    if (fa != fb) return fa < fb;
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.fix.confidence > b.fix.confidence;
  });
  std::vector<Fix> fixes;
  for (Candidate& candidate : kept) {
    Fix fix = std::move(candidate.fix);
    if (assumed_) {
      fix.confidence *= 0.6;
      fix.why += fmt::format(" ({})", input_.config_problem);
    }
    fix.rank = static_cast<int>(fixes.size()) + 1;
    fixes.push_back(std::move(fix));
  }
  return fixes;
}

}  // namespace

const OomEvent* incident_to_fix(const parsers::LogAnalysis& analysis) {
  for (auto it = analysis.events.rbegin(); it != analysis.events.rend(); ++it) {
    if (!it->recovered) return &*it;
  }
  return analysis.events.empty() ? nullptr : &analysis.events.back();
}

parsers::JobConfig config_from_log(parsers::Trainer trainer,
                                   const parsers::PrintedArguments& args) {
  // Nothing is known but what the log prints; the target is the trainer's command line.
  JobConfig config;
  config.trainer = trainer;
  config.process_path = "";
  config.datasets.clear();
  config.unknown.set();
  if (config.trainer == parsers::Trainer::kAiToolkit) {
    config.process_path = "config.process[0]";
    config.targets.push_back({parsers::TargetKind::kYaml, "", ""});
  } else if (parsers::writes_flags(config.trainer)) {
    config.targets.push_back({parsers::TargetKind::kArgs, "", ""});
  } else {
    config.targets.push_back({parsers::TargetKind::kJson, "", ""});  // OneTrainer: its UI's JSON
  }
  if (args.batch_size) {
    config.batch_size = *args.batch_size;
    config.unknown.reset(static_cast<size_t>(Knob::kBatchSize));
  }
  if (args.gradient_accumulation) {
    config.gradient_accumulation = *args.gradient_accumulation;
    config.unknown.reset(static_cast<size_t>(Knob::kGradientAccumulation));
  }
  if (args.gradient_checkpointing) {
    config.gradient_checkpointing = *args.gradient_checkpointing;
    config.gradient_checkpointing_explicit = true;
    config.unknown.reset(static_cast<size_t>(Knob::kGradientCheckpointing));
  }
  if (args.resolution) {
    parsers::DatasetView dataset;
    dataset.resolutions = {*args.resolution};
    config.datasets.push_back(dataset);
    config.unknown.reset(static_cast<size_t>(Knob::kResolution));
  }
  return config;
}

std::vector<Fix> rank_fixes(const TriageInput& input) {
  if (input.event == nullptr) return {};
  if (input.config != nullptr) return Planner(input, *input.event, *input.config, false).plan();
  TriageInput with_note = input;
  if (input.arguments.any()) {
    with_note.config_problem += "; using the training arguments the log prints";
  }
  const JobConfig from_log = config_from_log(input.trainer, input.arguments);
  return Planner(with_note, *input.event, from_log, true).plan();
}

}  // namespace oomtriage::triage
