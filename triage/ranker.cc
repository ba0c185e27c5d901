// triage/ranker.cc: the rules as code. Each candidate carries a priority (lower ranks first) and
// its effect on the memory model; planning reads top to bottom in the seed guide's order.
#include "triage/ranker.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "triage/memory_model.h"

namespace oomtriage::triage {
namespace {

using parsers::JobConfig;
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

// Another trainer takes command-line arguments, not AI Toolkit's config: keep the changes
// that have a common argument ("args.gradient_checkpointing"), drop the rest.
void to_command_line_arguments(std::vector<ConfigChange>& changes, parsers::Trainer trainer) {
  const std::string batch = trainer == parsers::Trainer::kTransformers
                                ? "args.per_device_train_batch_size"
                                : "args.train_batch_size";
  std::vector<ConfigChange> kept;
  for (ConfigChange& change : changes) {
    const std::string& path = change.path;
    const auto ends_with = [&](std::string_view suffix) {
      return path.size() >= suffix.size() &&
             path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (path.rfind("config.", 0) != 0) {
      kept.push_back(std::move(change));
    } else if (ends_with(".train.gradient_checkpointing")) {
      kept.push_back({"args.gradient_checkpointing", change.from_json, change.to_json});
    } else if (ends_with(".train.batch_size")) {
      kept.push_back({batch, change.from_json, change.to_json});
    } else if (ends_with(".train.gradient_accumulation") ||
               ends_with(".train.gradient_accumulation_steps")) {
      kept.push_back({"args.gradient_accumulation_steps", change.from_json, change.to_json});
    } else if (ends_with("].resolution")) {
      kept.push_back({"args.resolution", change.from_json, change.to_json});
    }
  }
  changes = std::move(kept);
}

class Planner {
 public:
  Planner(const TriageInput& input, const OomEvent& event, const JobConfig& config,
          bool assumed_config)
      : input_(input), e_(event), c_(config), assumed_(assumed_config),
        p_(config.process_path), cal_(calibrate(event, assumed_config ? nullptr : &config)) {}

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
  void change(Fix& fix, const std::string& path, std::string from, std::string to) {
    fix.changes.push_back({p_ + "." + path, std::move(from), std::move(to)});
  }

  void plan_host_memory();
  void plan_shm();
  void plan_free_gpu(int priority);
  void plan_expandable_segments();
  void plan_gradient_checkpointing(int priority);
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
  const OomEvent& e_;
  const JobConfig& c_;
  bool assumed_;
  std::string p_;
  std::optional<Calibration> cal_;
  std::vector<Candidate> candidates_;
  std::set<std::string> ids_;
};

void Planner::plan_host_memory() {
  Fix fix = make("reduce_host_memory", "Reduce host RAM use (not GPU memory)",
                 fmt::format("The process was killed for host RAM ({}){}: this is not a GPU OOM, so "
                             "batch size and gradient checkpointing do not help",
                             parsers::to_string(e_.kind), step_words()),
                 "Fewer dataloader workers load data more slowly; adding RAM or swap costs nothing "
                 "in training but swap is slow",
                 0.8);
  int workers = 0;
  for (size_t i = 0; i < c_.datasets.size(); ++i) {
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
  for (size_t i = 0; i < c_.datasets.size(); ++i) {
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
                 "None for the job; stop or move the other processes (nvidia-smi shows them)",
                 0.9);
  add(priority, std::move(fix), Effect{.frees_other_processes = true, .what = "other processes gone"});
}

void Planner::plan_expandable_segments() {
  const uint64_t unalloc = e_.figures.reserved_unallocated_bytes.value_or(0);
  const uint64_t tried = e_.figures.tried_to_allocate_bytes.value_or(0);
  Fix fix = make("expandable_segments", "Let PyTorch's allocator grow segments (fragmentation)",
                 fmt::format("{} was reserved by PyTorch but unallocated when {} was requested: "
                             "the memory was there, in pieces",
                             gib(unalloc), gib(tried)),
                 "None measurable; set it in the job's environment", unalloc >= tried ? 0.7 : 0.5);
  fix.changes.push_back({"env.PYTORCH_CUDA_ALLOC_CONF", "null", js("expandable_segments:True")});
  add(unalloc >= tried ? 5 : 45, std::move(fix),
      Effect{.reclaims_fragmentation = true, .what = "reserved-but-unallocated memory reclaimed"});
}

void Planner::plan_gradient_checkpointing(int priority) {
  if (c_.gradient_checkpointing) return;
  Fix fix = make("enable_gradient_checkpointing", "Turn gradient checkpointing back on",
                 fmt::format("train.gradient_checkpointing is false and the job ran out of memory "
                             "during {}{}: without checkpointing every activation stays in VRAM, "
                             "the typical cause of OOMs at step 2-3 or at the first preview. Retry "
                             "with the same batch and resolutions",
                             parsers::to_string(e_.phase), step_words()),
                 "Steps get roughly 20-30% slower (activations are recomputed); results are the same",
                 0.9);
  change(fix, "train.gradient_checkpointing", js(false), js(true));
  add(priority, std::move(fix), Effect{.activations = 0.4, .what = "activations x0.40 (checkpointing)"});
}

void Planner::plan_previews(int priority) {
  if (c_.disable_sampling) return;
  const auto& s = c_.sample;
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
  if (s.every < 500) {
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
  if (c_.skip_first_sample || c_.disable_sampling || !e_.step || *e_.step != 0) return;
  Fix fix = make("skip_first_sample", "Skip the baseline sample before training",
                 "The OOM happened in the baseline sample that AI Toolkit generates before step 1",
                 "No 'before' previews to compare against; later previews still run", 0.6);
  change(fix, "train.skip_first_sample", js(false), js(true));
  add(priority, std::move(fix), unmodelled());
}

void Planner::plan_disable_sampling(int priority) {
  if (c_.disable_sampling) return;
  Fix fix = make("disable_sampling", "Turn preview sampling off",
                 "Preview sampling is where the job ran out of memory; without previews that pass "
                 "never runs",
                 "No previews during training: judge the LoRA from saved checkpoints instead", 0.7);
  change(fix, "train.disable_sampling", js(false), js(true));
  add(priority, std::move(fix), unmodelled());
}

void Planner::plan_batch(int priority) {
  const int batch = c_.effective_batch_size();
  if (batch <= 1) return;
  const int lower = std::max(1, batch / 2);
  const int factor = batch / lower;
  Fix fix = make("lower_batch_size", "Halve the batch and double gradient accumulation",
                 fmt::format("Batch {} with gradient checkpointing already on ran out of memory "
                             "early{}: activations grow with the batch",
                             batch, step_words()),
                 fmt::format("Same effective batch ({} x {}), about the same speed per image", lower,
                             c_.gradient_accumulation * factor),
                 0.75);
  if (c_.batch_size > 1) change(fix, "train.batch_size", js(c_.batch_size), js(std::max(1, c_.batch_size / 2)));
  for (size_t i = 0; i < c_.datasets.size(); ++i) {
    if (const auto b = c_.datasets[i].batch_size; b && *b > 1) {
      change(fix, fmt::format("datasets[{}].batch_size", i), js(*b), js(std::max(1, *b / 2)));
    }
  }
  change(fix, "train." + c_.gradient_accumulation_key, js(c_.gradient_accumulation),
         js(c_.gradient_accumulation * factor));
  add(priority, std::move(fix),
      Effect{.activations = double(lower) / batch,
             .what = fmt::format("activations x{:.2f} (batch {} -> {})", double(lower) / batch,
                                 batch, lower)});
}

void Planner::plan_top_bucket(int priority) {
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
    const std::string to = d.resolution_is_list ? nlohmann::json(std::vector<int>{lower}).dump()
                                                : js(lower);
    change(fix, fmt::format("datasets[{}].resolution", i), from, to);
  }
  const double scale = double(lower) * lower / (double(r) * r);
  add(priority, std::move(fix),
      Effect{.activations = scale, .what = fmt::format("activations x{:.2f}", scale)});
}

void Planner::plan_num_frames(int priority) {
  const int frames = c_.max_num_frames();
  if (frames <= 1) return;
  const int lower = fewer_frames(frames);
  if (lower >= frames) return;
  Fix fix = make("reduce_num_frames", fmt::format("Train on {} frames instead of {}", lower, frames),
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
  if (c_.family != ModelFamily::kQwenImageEditPlus || c_.match_target_res ||
      !c_.has_control_images()) {
    return;
  }
  Fix fix = make("match_target_res", "Resize control images to the target's size",
                 "Qwen-Image-Edit-2509/2511 resizes every control image to about 1 MP by default; "
                 "with match_target_res they follow the training resolution",
                 "Control images carry less detail at low resolutions", 0.6);
  change(fix, "model.model_kwargs.match_target_res", js(false), js(true));
  add(priority, std::move(fix), Effect{.activations = 0.8, .what = "activations x0.80 (smaller controls, rough)"});
}

void Planner::plan_low_vram(int priority, const char* why) {
  if (c_.low_vram) return;
  Fix fix = make("enable_low_vram", "Use the model's low-VRAM path", why,
                 "Slower loading and quantizing (done on the CPU); needs more host RAM", 0.6);
  change(fix, "model.low_vram", js(false), js(true));
  add(priority, std::move(fix), unmodelled());
}

void Planner::plan_quantize(int priority) {
  const double bpp = bytes_per_param(c_.qtype);
  std::string to_qtype;
  if (!c_.quantize) {
    to_qtype = c_.qtype.empty() ? "qfloat8" : c_.qtype;
  } else if (bpp > 0.5) {
    to_qtype = "uint4";
  } else {
    return;  // already at 4 bits or below
  }
  Fix fix = make("quantize_model",
                 c_.quantize ? fmt::format("Quantize the transformer to {} instead of {}", to_qtype,
                                           c_.qtype)
                             : fmt::format("Quantize the transformer ({})", to_qtype),
                 fmt::format("The {} weights are a large share of the GPU memory{}",
                             parsers::to_string(c_.family),
                             cal_ && cal_->weights_bytes
                                 ? fmt::format(" (about {} of the {} needed)", gib(cal_->weights_bytes),
                                               gib(cal_->need_bytes))
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
  if (c_.quantize_te || c_.cache_text_embeddings || c_.unload_text_encoder) return;
  Fix fix = make("quantize_text_encoder", "Quantize the text encoder",
                 "The text encoder stays on the GPU unquantized", "Slightly different text features",
                 0.5);
  change(fix, "model.quantize_te", js(false), js(true));
  add(priority, std::move(fix), unmodelled());
}

void Planner::plan_cache_text_embeddings(int priority) {
  if (c_.cache_text_embeddings || c_.unload_text_encoder || c_.train_text_encoder ||
      !big_text_encoder(c_.family)) {
    return;
  }
  Fix fix = make("cache_text_embeddings", "Cache text embeddings and unload the text encoder",
                 fmt::format("{}'s text encoder stays on the GPU for the whole run; caching the "
                             "caption embeddings once lets it leave",
                             parsers::to_string(c_.family)),
                 "A caching pass at start; caption dropout and trigger-word changes need a re-cache",
                 0.6);
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
  if (c_.layer_offloading) return;
  Fix fix = make("layer_offloading", "Offload transformer layers to the CPU",
                 "Keeps part of the transformer in host RAM and streams it to the GPU",
                 "Much slower steps and a lot of host RAM", 0.45);
  change(fix, "model.layer_offloading", js(false), js(true));
  add(priority, std::move(fix), unmodelled());
}

void Planner::plan_cache_latents_to_disk(int priority) {
  Fix fix = make("cache_latents_to_disk", "Cache latents to disk",
                 "Without cached latents the VAE stays on the GPU for the whole run",
                 "A caching pass at start and disk space; augmentations that change pixels are off",
                 0.4);
  for (size_t i = 0; i < c_.datasets.size(); ++i) {
    if (!c_.datasets[i].cache_latents_to_disk) {
      change(fix, fmt::format("datasets[{}].cache_latents_to_disk", i), js(false), js(true));
    }
  }
  if (fix.changes.empty()) return;
  add(priority, std::move(fix), unmodelled());
}

void Planner::plan_bf16(int priority) {
  if (!is_fp32(c_.dtype)) return;
  Fix fix = make("use_bf16", "Train in bf16 instead of fp32",
                 "train.dtype is fp32 (AI Toolkit's default when the key is absent): every weight "
                 "and activation takes twice the memory of bf16",
                 "Needs a GPU with bf16 (Ampere or newer); no visible quality loss for LoRAs", 0.7);
  change(fix, "train.dtype", js(c_.dtype), js("bf16"));
  add(priority, std::move(fix),
      Effect{.activations = 0.5, .weights = c_.quantize ? 1.0 : 0.5, .what = "fp32 -> bf16"});
}

void Planner::plan_8bit_optimizer(int priority) {
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

std::vector<Fix> Planner::plan() {
  const Phase phase = e_.phase;
  const bool host = e_.kind == OomKind::kHostKilled || e_.kind == OomKind::kHostMemoryError;
  if (e_.kind == OomKind::kShm) {
    plan_shm();
  } else if (host) {
    plan_host_memory();
    plan_cache_latents_to_disk(20);
  } else {
    uint64_t others = 0;
    for (const auto& p : e_.figures.other_processes) others += p.bytes;
    const uint64_t capacity = e_.figures.total_capacity_bytes.value_or(0);
    const bool others_hold_gpu = others >= kGiB && (capacity == 0 || others * 10 >= capacity);
    if (others_hold_gpu) plan_free_gpu(0);
    const uint64_t unalloc = e_.figures.reserved_unallocated_bytes.value_or(0);
    const uint64_t tried = e_.figures.tried_to_allocate_bytes.value_or(0);
    if (unalloc >= kGiB || (unalloc >= 256ull << 20 && unalloc * 2 >= tried && tried > 0)) {
      plan_expandable_segments();
    }
    const bool loading = phase == Phase::kModelLoad || phase == Phase::kQuantize;
    const bool caching = phase == Phase::kCacheLatents || phase == Phase::kCacheTextEmbeddings;
    if (!loading && !caching) plan_gradient_checkpointing(1);

    if (loading) {
      plan_quantize(10);
      plan_quantize_te(12);
      plan_low_vram(14, "Loads and quantizes the transformer on the CPU, then moves it to the GPU");
      plan_layer_offloading(20);
    } else if (phase == Phase::kCacheTextEmbeddings) {
      plan_quantize_te(10);
      plan_low_vram(12, "Keeps the model off the GPU while the text encoder runs");
    } else if (phase == Phase::kCacheLatents) {
      plan_low_vram(10, "Encodes latents with a tiled VAE and keeps the transformer off the GPU");
      plan_top_bucket(12);
      plan_lower_resolution(13);
    } else if (phase == Phase::kSampling) {
      plan_previews(10);
      plan_skip_first_sample(15);
      plan_match_target_res(18);
      plan_disable_sampling(20);
      plan_low_vram(25, "Tiles the VAE decode of previews and unloads idle parts");
    } else {
      // A training step (or a phase the log does not show).
      const bool later = e_.step && *e_.step > 5;
      const bool multi_bucket = c_.all_resolutions().size() > 1;
      if (parsers::is_video_family(c_.family)) plan_num_frames(8);
      plan_match_target_res(9);
      if (later && multi_bucket) {
        plan_top_bucket(10);
        plan_batch(12);
      } else if (c_.effective_batch_size() > 1) {
        plan_batch(10);
        plan_top_bucket(12);
        plan_lower_resolution(13);
      } else {
        plan_top_bucket(10);
        plan_lower_resolution(11);
      }
      plan_bf16(15);
      plan_low_vram(20, c_.family == ModelFamily::kWan22
                            ? "Keeps idle parts of the model off the GPU and unloads the idle Wan "
                              "2.2 stage"
                            : "Keeps idle parts of the model off the GPU between uses");
      plan_quantize(21);
      plan_cache_text_embeddings(22);
      plan_layer_offloading(26);
      plan_cache_latents_to_disk(28);
      plan_8bit_optimizer(30);
    }
  }

  std::stable_sort(candidates_.begin(), candidates_.end(),
                   [](const Candidate& a, const Candidate& b) { return a.priority < b.priority; });
  std::vector<Fix> fixes;
  for (Candidate& candidate : candidates_) {
    estimate(candidate);
    Fix fix = std::move(candidate.fix);
    if (assumed_) {
      fix.confidence *= 0.6;
      fix.why += fmt::format(" ({})", input_.config_problem);
      if (input_.analysis->trainer != parsers::Trainer::kAiToolkit) {
        to_command_line_arguments(fix.changes, input_.analysis->trainer);
      }
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

std::vector<Fix> rank_fixes(const TriageInput& input) {
  if (input.analysis == nullptr) return {};
  const OomEvent* event = incident_to_fix(*input.analysis);
  if (event == nullptr) return {};
  if (input.config != nullptr) {
    return Planner(input, *event, *input.config, false).plan();
  }
  // No config: start from AI Toolkit's class defaults, overlaid with what the log prints.
  JobConfig assumed;
  TriageInput with_note = input;
  const parsers::PrintedArguments& args = input.analysis->arguments;
  const bool ai_toolkit = input.analysis->trainer == parsers::Trainer::kAiToolkit;
  if (!ai_toolkit) {
    // Other trainers' precision and optimizer defaults are unknown: do not guess at them.
    assumed.dtype = "bf16";
    assumed.optimizer = "adamw8bit";
  }
  if (args.any()) {
    if (args.batch_size) assumed.batch_size = *args.batch_size;
    if (args.gradient_accumulation) assumed.gradient_accumulation = *args.gradient_accumulation;
    if (args.gradient_checkpointing) {
      assumed.gradient_checkpointing = *args.gradient_checkpointing;
      assumed.gradient_checkpointing_explicit = true;
    }
    if (args.resolution) {
      parsers::DatasetView dataset;
      dataset.resolutions = {*args.resolution};
      assumed.datasets.push_back(dataset);
    }
    with_note.config_problem += "; using the training arguments the log prints";
  } else if (ai_toolkit) {
    with_note.config_problem += "; assuming AI Toolkit's defaults";
  }
  return Planner(with_note, *event, assumed, true).plan();
}

}  // namespace oomtriage::triage
