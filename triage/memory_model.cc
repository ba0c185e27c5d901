// triage/memory_model.cc: the spec with the common defaults applied (each default an
// assumption in words), then every phase's terms. The fitted constants are in kFitted; the
// formulas and where each constant comes from are in docs/memory-model.md.
#include "triage/memory_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "triage/architectures.h"
#include "triage/llm_memory.h"
#include "triage/parallel_memory.h"

namespace oomtriage::triage {
namespace {

using parsers::Phase;

constexpr double kGiB = 1024.0 * 1024 * 1024;

// The model's few free constants, fitted on measured jobs (docs/memory-model.md).
struct Fitted {
  // Bytes one block keeps per token for its backward pass: per unit of hidden width (the
  // attention's and norms' inputs and outputs) and per unit of MLP width (its inner
  // activations before and after the nonlinearity), in bf16.
  double block_bytes_per_hidden = 16;
  double block_bytes_per_mlp = 6;
  // With checkpointing only a block's input is kept; one block is recomputed at a time.
  double checkpoint_bytes = 2;
  // A denoising step at preview time: one block's working set.
  double inference_bytes = 16;
  // VAE decode (and encode) per output pixel and frame.
  double vae_bytes_per_pixel = 1100;
  // LoRA parameters per rank and block: the attention and MLP linears' inputs plus outputs,
  // in units of the hidden size (q, k, v, out: 4 x 2; MLP 4x: 2 x 5), per weight stream.
  double lora_width_per_block = 18;
  // The allocator's slack on activations and the fixed workspaces (cuBLAS, RNG, streams).
  double fragmentation = 0.08;
  double workspace_bytes = 0.3 * kGiB;
  // The share of the training step's activations that the caching allocator still holds in
  // blocks a preview cannot reuse (the seed guide's "OOM at the
  // first preview" with checkpointing off: docs/domain.md). Not fitted: no measured preview
  // peaks; the term never lifts sampling above the training step it was carried from.
  double training_reserve = 0.5;
};
constexpr Fitted kFitted;
// The share of the denoiser a ControlNet copies (its encoder and middle blocks).
constexpr double kControlNetShare = 0.45;

// Families whose measured activations with checkpointing on equal those without it (Sana:
// 23.72 vs 23.71 GiB in SimpleTuner's sweep, docs/memory-model.md): the trainers' checkpointing
// does not reach their blocks, so "on" is priced as measured, the costlier reading.
constexpr std::string_view kCheckpointingWithoutEffect[] = {"sana"};

bool is_one_of(std::string_view word, std::initializer_list<std::string_view> words) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

std::string lower(std::string word) {
  for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return word;
}

double dtype_bytes(std::string_view dtype) {
  if (is_one_of(dtype, {"fp32", "float32", "float", "no", "tf32", "32"})) return 4;
  if (is_one_of(dtype, {"fp8", "float8"})) return 1;
  return 2;
}

// Bytes per weight of a quantized model: most layers at the quantized width plus their scales,
// norms, embeddings and the first and last layers kept in 16 bits (~3% of parameters).
std::optional<double> quantized_bytes(std::string_view q) {
  double bits = 0;
  if (is_one_of(q, {"fp8", "float8", "qfloat8", "int8", "qint8", "fp8_e4m3fn", "fp8_scaled", "8bit",
                    "float8_e4m3fn", "q8", "q8_0", "gguf_q8_0", "nf8", "uint8", "convrot8"})) {
    bits = 8.1;
  } else if (is_one_of(q, {"nf4", "int4", "uint4", "fp4", "nvfp4", "qint4", "4bit", "q4", "q4_0",
                           "q4_k", "q4_k_m", "gguf_q4", "gguf_q4_k_m", "mxfp4", "convrot4"})) {
    bits = 4.5;
  } else if (is_one_of(q, {"q5", "q5_k", "q5_k_m", "uint5", "gguf_q5_k_m"})) {
    bits = 5.5;
  } else if (is_one_of(q, {"q6", "q6_k", "uint6", "gguf_q6_k"})) {
    bits = 6.6;
  } else if (is_one_of(q, {"uint3", "int3", "q3", "q3_k", "q3_k_m", "3bit"})) {
    bits = 3.5;
  } else if (is_one_of(q, {"int2", "uint2", "q2", "q2_k", "2bit"})) {
    bits = 2.5;
  } else if (q.rfind("uint", 0) == 0 && q.size() == 5 && q[4] >= '1' && q[4] <= '8') {
    bits = (q[4] - '0') + 0.5;
  } else if (q.rfind("convrotint", 0) == 0 && q.size() == 11 && q[10] >= '1' && q[10] <= '8') {
    bits = (q[10] - '0') + 0.5;  // AI Toolkit's rotated integer qtypes, "convrotint2".."7"
  } else {
    return std::nullopt;
  }
  return 0.97 * bits / 8 + 0.03 * 2;
}

bool is_caching(Phase phase) {
  return phase == Phase::kCacheTextEmbeddings || phase == Phase::kCacheLatents;
}

bool quantized(const std::string& q) {
  return !q.empty() && q != "none" && q != "no" && q != "no_change" && q != "false";
}

// A quantization in the table's words: SimpleTuner's and others' backend suffixes dropped
// ("int8-quanto", "fp8-torchao", "uint4|adapter"); nullopt when the table does not know it.
std::optional<std::string> known_quantization(const std::string& q) {
  if (quantized_bytes(q)) return q;
  const std::string bare = q.substr(0, q.find_first_of("-|"));
  if (quantized_bytes(bare)) return bare;
  return std::nullopt;
}

// The spec with every unstated field settled; what was assumed is said once.
struct Job {
  Architecture arch;
  std::string training = "lora";
  int width = 0, height = 0, frames = 1, batch = 1, rank = 16;
  bool checkpointing = true, te_cached = true, te_trained = false;
  std::string quantization = "none", te_quantization, dtype = "bf16", optimizer = "adamw";
  std::string attention = "sdpa";
  Offload offload;
  SamplingSpec sampling;
  ParallelPlan parallel;  // what one GPU holds (triage/parallel_memory.h)
  std::vector<std::string> assumptions;
  // Issue 44, every training type: spec.ema, spec.fused_backward_pass, spec.master_weights.
  bool ema = false;
  std::optional<bool> fused_backward_pass;
  std::string master_weights;
};

// Issue 44: the training-type fields of the spec, settled (unset ones keep the model's rules).
void settle_training_words(const MemorySpec& spec, Job& job) {
  job.ema = spec.ema.value_or(false);
  job.fused_backward_pass = spec.fused_backward_pass;
  job.master_weights = lower(spec.master_weights.value_or(""));
}

Job settle(const MemorySpec& spec) {
  Job job;
  std::string guess;
  job.arch = architecture_for(spec.model_family, &guess);
  if (!guess.empty()) job.assumptions.push_back(guess);
  const Architecture& a = job.arch;
  auto& said = job.assumptions;
  const bool video = a.frames_per_token > 0;

  job.training = lower(spec.training_type.value_or("lora"));
  if (!spec.training_type) said.push_back("training type not stated: LoRA assumed");
  if (is_one_of(job.training, {"finetune", "fine_tune", "full_finetune", "fine-tune", "fft",
                               "dreambooth", "native"})) {
    job.training = "full";  // every weight trains
  } else if (is_one_of(job.training, {"embedding", "textual_inversion", "ti"})) {
    job.training = "lora";  // a handful of trainable vectors: less than any adapter
    job.rank = 1;
  }
  if (spec.width && spec.height) {
    job.width = *spec.width;
    job.height = *spec.height;
  } else {
    job.width = a.default_resolution;
    job.height = video ? a.default_resolution * 9 / 16 / 16 * 16 : a.default_resolution;
    said.push_back(fmt::format("resolution not stated: {}x{} assumed", job.width, job.height));
  }
  if (video) {
    job.frames = std::max(1, spec.frames.value_or(a.default_frames));
    if (!spec.frames) said.push_back(fmt::format("frames not stated: {} assumed", job.frames));
  }
  job.batch = std::max(1, spec.batch_size.value_or(1));
  if (!spec.batch_size) said.push_back("batch size not stated: 1 assumed");
  if (job.training == "lora" && job.rank != 1) {
    job.rank = std::max(1, spec.lora_rank.value_or(16));
    if (!spec.lora_rank) said.push_back("LoRA rank not stated: 16 assumed");
  } else if (job.training == "lokr" || job.training == "loha" || job.training == "lycoris") {
    job.rank = spec.lora_rank.value_or(8);  // a LoKr's parameters are those of a low-rank LoRA
  }
  job.checkpointing = spec.gradient_checkpointing.value_or(true);
  if (!spec.gradient_checkpointing) said.push_back("gradient checkpointing not stated: on assumed");
  if (job.checkpointing &&
      std::find(std::begin(kCheckpointingWithoutEffect), std::end(kCheckpointingWithoutEffect),
                a.id) != std::end(kCheckpointingWithoutEffect)) {
    job.checkpointing = false;
    said.push_back(fmt::format("{}: checkpointing measured without effect; priced as off", a.id));
  }
  // Trainers cache large text encoders' outputs and drop the encoders; small ones stay.
  const bool large_te = a.text_encoder_billions >= 2;
  job.te_cached = spec.text_encoder_cached.value_or(large_te);
  if (!spec.text_encoder_cached) {
    said.push_back(large_te ? "text encoder caching not stated: cached assumed"
                            : "text encoder caching not stated: encoders kept on the GPU assumed");
  }
  job.te_trained = spec.text_encoder_trained.value_or(false);
  job.quantization = lower(spec.quantization.value_or("none"));
  job.dtype = lower(spec.dtype.value_or("bf16"));
  // ZeRO's CPU offload keeps the fp32 master copy in host memory, the GPU the 16-bit one.
  const bool masters_on_cpu = spec.offload && spec.offload->kind == "zero2_cpu";
  if (!spec.dtype && job.training == "full" && !masters_on_cpu) {
    // Sources disagree (diffusers and kohya default to fp32 or fp32 masters under mixed
    // precision; SimpleTuner and OneTrainer train in bf16): the costlier one is assumed.
    job.dtype = "fp32";
    said.push_back("precision not stated: fp32 master weights assumed for a full fine-tune");
  } else if (!spec.dtype) {
    said.push_back("precision not stated: bf16 assumed");
  }
  // CogVideoX-2B is the fp16 model; 5B trains in bf16.
  if (job.arch.id == "cogvideox" && job.dtype == "fp16") {
    job.arch = *find_architecture("cogvideox-2b");
    said.push_back("CogVideoX size not stated: 2B assumed from fp16 (5B trains in bf16)");
  }
  if (quantized(job.quantization)) {
    if (const auto known = known_quantization(job.quantization)) {
      job.quantization = *known;
    } else {
      said.push_back(fmt::format("quantization '{}' not known: read as 8-bit", job.quantization));
      job.quantization = "int8";
    }
  }
  // Whether a trainer that quantizes the denoiser quantizes the text encoders it keeps differs
  // by trainer (AI Toolkit does; diffusers, kohya and musubi only when asked): unstated, they
  // are assumed kept in 16 bits, the costlier reading.
  job.te_quantization = lower(spec.text_encoder_quantization.value_or("none"));
  if (!quantized_bytes(job.te_quantization)) job.te_quantization = "none";
  if (!spec.text_encoder_quantization && quantized(job.quantization) && !job.te_cached) {
    said.push_back("text encoder quantization not stated: 16-bit encoders assumed");
  }
  job.optimizer = lower(spec.optimizer.value_or("adamw"));
  if (!spec.optimizer) said.push_back("optimizer not stated: AdamW assumed");
  job.attention = lower(spec.attention.value_or("sdpa"));
  job.offload = spec.offload.value_or(Offload{});
  if (spec.sampling) {
    job.sampling = *spec.sampling;
  } else {
    said.push_back("previews not stated: one per interval at the training size assumed");
  }
  if (job.sampling.width <= 0 || job.sampling.height <= 0) {
    job.sampling.width = job.width;
    job.sampling.height = job.height;
  }
  if (job.sampling.frames <= 0) job.sampling.frames = job.frames;
  job.parallel = parallel_plan(spec);
  said.insert(said.end(), job.parallel.assumptions.begin(), job.parallel.assumptions.end());
  settle_training_words(spec, job);
  return job;
}

// The share of the denoiser's weights on the GPU while it trains.
double resident_share(const Job& job) {
  const Offload& o = job.offload;
  const double blocks = std::max(1, job.arch.blocks);
  if (o.kind == "block_swap") {
    const double swapped = std::clamp(o.amount.value_or(blocks / 2), 0.0, blocks - 1);
    return 1.0 - swapped / blocks + 1.0 / blocks;  // one block in flight
  }
  if (o.kind == "layer_fraction") {
    return 1.0 - std::clamp(o.amount.value_or(0.5), 0.0, 0.95) + 1.0 / blocks;
  }
  if (o.kind == "stream_all_blocks") return 0.05 + 2.0 / blocks;
  return 1.0;
}

struct Terms {
  std::vector<MemoryTerm> list;
  void add(std::string name, double bytes) {
    // An absurd spec (a million-pixel bucket of a million frames) stays a number, not overflow.
    constexpr double kMost = 1e15;
    if (bytes >= 1)
      list.push_back({std::move(name), static_cast<uint64_t>(std::min(bytes, kMost))});
  }
  uint64_t sum() const {
    uint64_t total = 0;
    for (const MemoryTerm& t : list) total += t.bytes;
    return total;
  }
};

class Model {
 public:
  explicit Model(Job job) : job_(std::move(job)), a_(job_.arch) {}

  std::vector<PhaseEstimate> phases() const {
    std::vector<PhaseEstimate> out;
    out.push_back(phase(Phase::kModelLoad, model_load()));
    if (job_.te_cached) out.push_back(phase(Phase::kCacheTextEmbeddings, cache_text()));
    out.push_back(phase(Phase::kCacheLatents, cache_latents()));
    out.push_back(phase(Phase::kTrainStep, train_step()));
    if (job_.sampling.enabled) out.push_back(phase(Phase::kSampling, sampling()));
    out.push_back(phase(Phase::kSaving, saving()));
    return out;
  }

 private:
  static PhaseEstimate phase(Phase p, Terms terms) {
    PhaseEstimate e;
    e.phase = p;
    e.peak_bytes = terms.sum();
    e.terms = std::move(terms.list);
    return e;
  }

  bool full() const { return job_.training == "full"; }
  bool video() const { return a_.frames_per_token > 0; }
  double params() const { return a_.denoiser_billions * 1e9; }

  // Bytes per denoiser weight: quantized, or the training precision (full fine-tuning in fp16
  // keeps fp32 master weights).
  double denoiser_bytes_per_weight() const {
    if (quantized(job_.quantization) && !full()) return *quantized_bytes(job_.quantization);
    if (full() && !job_.master_weights.empty()) return dtype_bytes(job_.master_weights);
    if (full() && job_.dtype == "fp16") return 4;
    return dtype_bytes(job_.dtype);
  }
  double denoiser_weights() const {
    return params() * denoiser_bytes_per_weight() * resident_share(job_) * job_.parallel.weights;
  }
  double text_encoder_weights() const {
    const double te_bytes = quantized(job_.te_quantization)
                                ? *quantized_bytes(job_.te_quantization)
                                : std::min(2.0, dtype_bytes(job_.dtype));
    return a_.text_encoder_billions * 1e9 * te_bytes;
  }
  bool text_encoder_resident() const {
    if (job_.te_trained) return true;
    if (job_.te_cached) return false;
    return !is_one_of(job_.offload.kind, {"text_encoder_offload", "low_vram"});
  }
  double vae_weights() const { return a_.vae_billions * 1e9 * 2; }

  double trainable_params() const {
    if (full()) return params();
    if (job_.training == "controlnet") return params() * kControlNetShare;
    return double(job_.rank) * kFitted.lora_width_per_block * a_.hidden *
           (a_.blocks + a_.double_blocks);
  }
  // The precision trainable weights and their optimizer states are kept in: adapters in bf16 when
  // the job trains in bf16, else in fp32 (fp16 mixed precision keeps fp32 masters).
  double trainable_bytes() const {
    if (full()) return denoiser_bytes_per_weight();
    return job_.dtype == "bf16" ? 2 : 4;
  }
  // Full fine-tuning with Adafactor applies each block's gradients during the backward pass
  // (OneTrainer's and sd-scripts' fused back pass), so one block's gradients exist at a time.
  bool fused_backward() const {
    if (job_.fused_backward_pass) return *job_.fused_backward_pass;
    return full() && job_.optimizer.find("adafactor") != std::string::npos;
  }
  double optimizer_bytes_per_param() const {
    const double s = trainable_bytes();
    const std::string& o = job_.optimizer;
    if (is_one_of(job_.offload.kind, {"zero2_cpu"})) return 0;
    if (o.find("8bit") != std::string::npos || o == "adamw8bit" || o == "ademamix8bit") {
      return o.find("lion") != std::string::npos ? 1 : 2;
    }
    if (o == "adamw_bf16") return 4;
    if (o.find("adafactor") != std::string::npos) return 0.1;
    if (o == "came") return s;
    if (o.find("lion") != std::string::npos || o == "sgd" || o == "sgdm") return s;
    if (o.find("prodigy") != std::string::npos) return 4 * s;
    if (o.find("automagic") != std::string::npos) return 1.5;
    return 2 * s;  // AdamW and its kin: two states
  }

  // Trainable weights (beyond the denoiser's own for full fine-tuning), their gradients and
  // optimizer states; also the text encoders' when they train.
  void add_training_state(Terms& t, bool with_gradients) const {
    // Full fine-tuning offloads the states of the layers it offloads.
    const double n = trainable_params() * (full() ? resident_share(job_) : 1.0);
    const ParallelPlan& per_gpu = job_.parallel;
    if (!full()) t.add("trainable_weights", n * trainable_bytes() * per_gpu.weights);
    if (with_gradients) {
      const double held = is_one_of(job_.offload.kind, {"zero2_cpu"}) ? 0.05
                          : fused_backward()                          ? 1.0 / a_.blocks
                                                                      : 1.0;
      t.add("gradients", n * held * trainable_bytes() * per_gpu.gradients);
      if (per_gpu.gradient_buckets) t.add("gradient_buckets", n * held * trainable_bytes());
    }
    t.add("optimizer_states", n * optimizer_bytes_per_param() * per_gpu.optimizer);
    if (job_.ema) t.add("ema_weights", n * trainable_bytes());  // the averaged copy
    if (job_.te_trained) {
      const double te = a_.text_encoder_billions * 1e9;
      const double te_trainable = full() ? te : job_.rank * te / 4096;
      t.add("text_encoder_training", te_trainable * (with_gradients ? 4 + 8 : 8));
    }
  }

  void add_weights(Terms& t) const {
    t.add("denoiser_weights", denoiser_weights());
    if (job_.parallel.gathers_layers) {  // the block in use and the one prefetched, whole
      t.add("gathered_layers", params() / std::max(1, a_.blocks) * 2 * 2);
    }
    if (text_encoder_resident()) t.add("text_encoder_weights", text_encoder_weights());
    t.add("vae_weights", vae_weights());
  }

  // Tokens one sample puts through the transformer (UNets: latent pixels).
  double tokens(int width, int height, int frames) const {
    const double px = std::max(1, a_.pixels_per_token);
    double image = std::ceil(width / px) * std::ceil(height / px) * a_.image_streams;
    if (video()) image *= (std::max(1, frames) - 1) / a_.frames_per_token + 1;
    return image + a_.text_tokens;
  }

  double activations() const {
    const double elements = job_.batch * tokens(job_.width, job_.height, job_.frames) * a_.hidden;
    const double blocks = std::max(1, a_.blocks);
    const double mlp = a_.mlp_width > 0 ? a_.mlp_width : 4.0 * a_.hidden;
    const double per_token =
        kFitted.block_bytes_per_hidden * a_.hidden + kFitted.block_bytes_per_mlp * mlp;
    const double one_block =
        elements / a_.hidden * per_token * a_.activation_scale * job_.parallel.activations;
    const bool offloaded = job_.offload.kind == "activation_offload";
    double bytes = 0;
    if (job_.checkpointing) {  // every block's input kept, one block recomputed at a time
      bytes =
          (offloaded ? 0
                     : elements * blocks * kFitted.checkpoint_bytes * job_.parallel.activations) +
          one_block;
    } else {
      bytes = offloaded ? one_block * 2 : one_block * blocks;
    }
    bytes *= activation_precision_factor() * controlnet_activation_factor();
    if (job_.attention == "eager" || job_.attention == "math" || job_.attention == "none") {
      const double t = tokens(job_.width, job_.height, job_.frames);
      const double heads = std::max(1, a_.hidden / 128);
      bytes += job_.batch * heads * t * t * 2 * (job_.checkpointing ? 1 : blocks);
    }
    return bytes;
  }

  // Issue 44: a job without mixed precision (diffusers' scripts without --mixed_precision) keeps
  // its activations in fp32, twice the bf16 bytes the fitted constants count.
  double activation_precision_factor() const { return dtype_bytes(job_.dtype) >= 4 ? 2.0 : 1.0; }
  // A ControlNet's trainable copy of the encoder runs its own forward beside the denoiser's and
  // keeps its activations for the backward pass too: as many more as the share it copies.
  double controlnet_activation_factor() const {
    return job_.training == "controlnet" ? 1.0 + kControlNetShare : 1.0;
  }

  void add_overhead(Terms& t, double transient) const {
    t.add("allocator_overhead", kFitted.workspace_bytes + kFitted.fragmentation * transient);
  }

  Terms train_step() const {
    Terms t;
    add_weights(t);
    add_training_state(t, true);
    const double act = activations();
    t.add("activations", act);
    add_overhead(t, act);
    return t;
  }

  Terms sampling() const {
    Terms t;
    t.add("denoiser_weights", denoiser_weights());
    // Prompts are encoded again unless their embeddings were cached with the dataset's.
    if (text_encoder_resident()) t.add("text_encoder_weights", text_encoder_weights());
    t.add("vae_weights", vae_weights());
    add_training_state(t, false);
    const SamplingSpec& s = job_.sampling;
    const double passes = a_.previews_use_cfg ? 2 : 1;
    const double act = s.batch_size * passes * tokens(s.width, s.height, s.frames) * a_.hidden *
                       kFitted.inference_bytes;
    t.add("denoise_activations", act);
    t.add("vae_decode", vae_work(s.width, s.height, s.frames, s.tiled_vae) * s.batch_size);
    add_overhead(t, act);
    // With checkpointing the step keeps block inputs of one size, which a preview's tensors
    // reuse; without it the varied intermediates of every block stay cached.
    const double carried = job_.checkpointing ? 0 : kFitted.training_reserve * activations();
    const double room_under_training = train_step().sum() - t.sum();
    t.add("training_reserve", std::clamp(carried, 0.0, std::max(0.0, room_under_training)));
    return t;
  }

  // A VAE's working memory for one image or clip; a video VAE works a few frames at a time.
  double vae_work(int width, int height, int frames, bool tiled) const {
    double pixels = double(width) * height;
    if (tiled) pixels = std::min(pixels, 512.0 * 512);
    const double chunk = video() ? std::min(frames, a_.frames_per_token) : 1;
    return pixels * chunk * kFitted.vae_bytes_per_pixel;
  }

  Terms cache_text() const {
    Terms t;
    t.add("text_encoder_weights", text_encoder_weights());
    t.add("encode_activations", 0.2 * kGiB);
    add_overhead(t, 0);
    return t;
  }

  Terms cache_latents() const {
    Terms t;
    t.add("vae_weights", vae_weights());
    t.add("vae_encode", vae_work(job_.width, job_.height, job_.frames, false) / 2);
    add_overhead(t, 0);
    return t;
  }

  Terms model_load() const {
    Terms t;
    add_weights(t);
    // Quantizing materialises one block in 16 bits before it is packed.
    if (quantized(job_.quantization)) {
      t.add("block_being_quantized", params() / std::max(1, a_.blocks) * 2);
    }
    add_overhead(t, 0);
    return t;
  }

  Terms saving() const {
    Terms t;
    add_weights(t);
    add_training_state(t, false);
    t.add("state_dict_copy", (full() ? params() / std::max(1, a_.blocks) : trainable_params()) * 2);
    add_overhead(t, 0);
    return t;
  }

  Job job_;
  const Architecture& a_;
};

}  // namespace

bool is_working_memory(const MemoryTerm& term) {
  // The training reserve is not: it is what the training step left, priced there.
  return is_one_of(term.name, {"activations", "denoise_activations", "vae_decode", "vae_encode",
                               "encode_activations", "block_being_quantized", "state_dict_copy",
                               "allocator_overhead", "logits", "gathered_layers"});
}

const PhaseEstimate& MemoryEstimate::peak() const {
  static const PhaseEstimate kNone;
  const PhaseEstimate* best = nullptr;
  for (const PhaseEstimate& p : phases) {
    if (is_caching(p.phase)) continue;
    if (best == nullptr || p.peak_bytes > best->peak_bytes ||
        (p.peak_bytes == best->peak_bytes && p.phase == Phase::kTrainStep)) {
      best = &p;
    }
  }
  return best != nullptr ? *best : kNone;
}

const PhaseEstimate* MemoryEstimate::phase(Phase wanted) const {
  for (const PhaseEstimate& p : phases) {
    if (p.phase == wanted) return &p;
  }
  return nullptr;
}

// Why a family the table does not know is not known: a variable a README's command leaves for
// the shell, no name at all, or a name the table lacks.
std::string why_unknown(const std::string& family) {
  if (family.find('$') != std::string::npos) {
    return fmt::format("the model is '{}', a shell variable the command line did not expand",
                       family);
  }
  if (family.empty() || family == "other" || family == "unknown") {
    return "the job does not name its model";
  }
  return fmt::format("the model '{}' is not in the architecture table", family);
}

namespace {

PhaseEstimate* find_phase(MemoryEstimate& estimate, Phase phase) {
  for (PhaseEstimate& p : estimate.phases) {
    if (p.phase == phase) return &p;
  }
  return nullptr;
}

// A crash's need raises its phase; a phase the job came through is capped by the room it had,
// its working memory scaled down (the weights are what the parameter counts fix).
void apply_evidence(MemoryEstimate& estimate, const std::vector<PhaseEvidence>& evidence) {
  for (const PhaseEvidence& e : evidence) {
    if (PhaseEstimate* p = find_phase(estimate, e.phase); p && e.need_bytes > p->peak_bytes) {
      p->terms.push_back({"crash_evidence", e.need_bytes - p->peak_bytes});
      p->peak_bytes = e.need_bytes;
      estimate.assumptions.push_back(fmt::format("{} raised to {:.2f} GiB: {}",
                                                 parsers::to_string(e.phase), e.need_bytes / kGiB,
                                                 e.source));
    }
    for (const Phase ran : e.came_through) {
      PhaseEstimate* p = find_phase(estimate, ran);
      if (p == nullptr || e.room_bytes == 0 || p->peak_bytes <= e.room_bytes) continue;
      double working = 0;
      for (const MemoryTerm& term : p->terms) {
        if (is_working_memory(term)) working += term.bytes;
      }
      const double excess = static_cast<double>(p->peak_bytes - e.room_bytes);
      if (working <= excess) continue;  // the weights alone exceed it: the evidence is odd
      const double scale = (working - excess) / working;
      for (MemoryTerm& term : p->terms) {
        if (is_working_memory(term)) term.bytes = static_cast<uint64_t>(term.bytes * scale);
      }
      p->peak_bytes = e.room_bytes;
      estimate.assumptions.push_back(
          fmt::format("{} capped at {:.2f} GiB: the job came through it ({})",
                      parsers::to_string(ran), e.room_bytes / kGiB, e.source));
    }
  }
}

}  // namespace

MemoryEstimate estimate_memory(const MemorySpec& spec, const MemoryCorrection& correction) {
  MemoryEstimate estimate;
  if (is_llm_spec(spec)) {  // a decoder LLM: triage/llm_memory.h
    estimate = estimate_llm_memory(spec);
  } else {
    Job job = settle(spec);
    estimate.family = std::string(job.arch.id);
    estimate.assumptions = job.assumptions;
    if (job.arch.guessed) estimate.model_unknown = why_unknown(spec.model_family);
    estimate.processes = job.parallel.processes;
    estimate.per_gpu = job.parallel.summary;
    estimate.phases = Model(std::move(job)).phases();
  }
  estimate.correction = correction;
  if (correction.factor != 1.0 && correction.factor > 0) {
    for (PhaseEstimate& p : estimate.phases) {
      const double delta = p.peak_bytes * (correction.factor - 1.0);
      p.terms.push_back({fmt::format("fleet_correction_{:+.0f}%", (correction.factor - 1) * 100),
                         static_cast<uint64_t>(std::abs(delta))});
      p.peak_bytes = static_cast<uint64_t>(std::max(0.0, p.peak_bytes + delta));
    }
  }
  apply_evidence(estimate, correction.evidence);
  return estimate;
}

double bytes_per_weight(std::string_view dtype, std::string_view quantization) {
  const std::string q = lower(std::string(quantization));
  if (!quantized(q)) return dtype_bytes(lower(std::string(dtype)));
  return *quantized_bytes(known_quantization(q).value_or("int8"));
}

uint64_t usable_bytes(uint64_t card_bytes) {
  constexpr uint64_t kContext = 512ull << 20;  // the CUDA context
  // The caching allocator's reserved-but-unallocated memory grows with the blocks it caches, so
  // with the card a job fills: the model's peak is what is allocated, the card must hold what is
  // reserved (docs/memory-model.md: the share was chosen by leave-one-source-out on dev).
  constexpr double kAllocatorReserve = 0.06;
  const auto reserve = static_cast<uint64_t>(static_cast<double>(card_bytes) * kAllocatorReserve);
  return card_bytes > kContext + reserve ? card_bytes - kContext - reserve : 0;
}

std::string_view to_string(Fit fit) {
  switch (fit) {
    case Fit::kFits: return "fits";
    case Fit::kTight: return "tight";
    case Fit::kWillNotFit: return "will_not_fit";
    case Fit::kUnknown: return "unknown";
  }
  return "fits";
}

FitVerdict judge(const MemoryEstimate& estimate, uint64_t usable) {
  FitVerdict verdict;
  if (!estimate.model_unknown.empty()) {
    verdict.fit = Fit::kUnknown;
    verdict.unread.emplace_back("model");
    return verdict;
  }
  for (const PhaseEstimate& p : estimate.phases) {
    if (is_caching(p.phase)) {
      if (p.peak_bytes > usable) verdict.caching_over.push_back(p.phase);
      continue;
    }
    if (verdict.fit != Fit::kWillNotFit && p.peak_bytes > usable) {
      verdict.fit = Fit::kWillNotFit;
      verdict.first_failing = p.phase;
    }
  }
  if (verdict.fit == Fit::kFits && estimate.peak().peak_bytes * 10 > usable * 9) {
    verdict.fit = Fit::kTight;
  }
  return verdict;
}

}  // namespace oomtriage::triage
