// triage/llm_memory.cc: the spec settled with each trainer-neutral default said once, then the
// phases' terms. The constants and where they come from are in docs/memory-model.md ("Decoder
// LLMs"); tests/triage/llm_memory_test.cc holds them to the measurements in
// tests/testdata/llm-vram.jsonl.
#include "triage/llm_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "triage/architectures.h"
#include "triage/llm_families.h"
#include "triage/parallel_memory.h"

namespace oomtriage::triage {
namespace {

using parsers::Phase;

constexpr double kGiB = 1024.0 * 1024 * 1024;

struct LlmConstants {
  // Bytes a layer keeps per token for its backward pass, per unit of hidden width (norms'
  // outputs, q/k/v/o, the residual stream) and per unit of MLP width (gate, up, activation and
  // their product), in bf16: the common 34*s*h per layer of a Llama-shaped block with flash
  // attention, split between the two widths.
  double layer_bytes_per_hidden = 16;
  double layer_bytes_per_mlp = 8;
  // With checkpointing a layer keeps only its input (bf16).
  double checkpoint_bytes = 2;
  // The loss over the vocabulary per token and vocabulary entry: the bf16 logits, their fp32
  // copy, the log-softmax and its gradient (fitted on unsloth's Hugging Face + FA2 column).
  double logit_bytes = 16;
  // NF4 with a 16-bit... absmax per 64 weights: 4.5 bits; double quantization: 4.127 bits.
  double nf4_bits = 4.5;
  double nf4_double_quant_bits = 4.127;
  double int8_bits = 8.1;
  double fragmentation = 0.08;
  double workspace_bytes = 0.3 * kGiB;
};
constexpr LlmConstants kLlm;

bool is_one_of(std::string_view word, std::initializer_list<std::string_view> words) {
  return std::find(words.begin(), words.end(), word) != words.end();
}

std::string lower(std::string word) {
  for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return word;
}

bool contains(const std::string& s, std::string_view part) {
  return s.find(part) != std::string::npos;
}

// The linear layers a LoRA adapts, per layer, as counts of each projection.
struct Targets {
  int q = 0, k = 0, v = 0, o = 0, gate = 0, up = 0, down = 0;
  bool experts = false;  // the MoE experts' MLPs are adapted too
  int count() const { return q + k + v + o + gate + up + down; }
};

Targets targets_of(const std::optional<std::vector<std::string>>& names, bool* assumed) {
  Targets t;
  if (!names || names->empty()) {
    *assumed = true;
    t.q = t.v = 1;  // PEFT's default for Llama-shaped models
    return t;
  }
  for (const std::string& raw : *names) {
    const std::string n = lower(raw);
    if (is_one_of(n, {"all-linear", "all_linear", "all", "linear", "true"})) {
      t = Targets{1, 1, 1, 1, 1, 1, 1, true};
      continue;
    }
    if (is_one_of(n, {"q_proj", "q", "query", "wq"})) t.q = 1;
    if (is_one_of(n, {"k_proj", "k", "key", "wk"})) t.k = 1;
    if (is_one_of(n, {"v_proj", "v", "value", "wv"})) t.v = 1;
    if (n == "qkv_proj" || n == "query_key_value" || n == "c_attn") t.q = t.k = t.v = 1;
    if (is_one_of(n, {"o_proj", "o", "out_proj", "dense", "wo"})) t.o = 1;
    if (is_one_of(n, {"gate_proj", "w1"})) t.gate = 1;
    if (is_one_of(n, {"up_proj", "w3"})) t.up = 1;
    if (n == "gate_up_proj") t.gate = t.up = 1;
    if (is_one_of(n, {"down_proj", "w2"})) t.down = 1;
    if (is_one_of(n, {"w1", "w2", "w3"})) t.experts = true;
  }
  if (t.count() == 0) t.q = t.v = 1;
  return t;
}

struct LlmJob {
  LlmFamily f;
  std::string training = "lora";  // lora | full | freeze
  std::string quantization = "none";
  bool double_quant = false;
  std::string dtype = "bf16";
  std::string weights_dtype = "bf16";  // of the weights not quantized
  std::string optimizer = "adamw";
  int batch = 1, sequence = 2048, rank = 8;
  Targets targets;
  bool checkpointing = false, checkpoints_offloaded = false, fused_loss = false;
  std::string attention = "sdpa";
  ParallelPlan parallel;
  std::vector<std::string> assumptions;
};

bool quantized(const std::string& q) {
  return !q.empty() && !is_one_of(q, {"none", "no", "false", "bf16", "fp16", "16"});
}

LlmJob settle(const MemorySpec& spec) {
  LlmJob job;
  auto& said = job.assumptions;
  std::string guess;
  job.f = llm_family_for(spec.model_family, &guess);
  if (!guess.empty()) said.push_back(guess);
  job.training = lower(spec.training_type.value_or("lora"));
  if (!spec.training_type) said.push_back("training type not stated: LoRA assumed");
  if (is_one_of(job.training,
                {"finetune", "fine_tune", "full_finetune", "fine-tune", "fft", "native", "full"})) {
    job.training = "full";
  } else if (job.training == "freeze") {
    job.training = "freeze";
  } else {
    if (job.training == "qlora" && !spec.quantization) job.quantization = "nf4";
    job.training = "lora";
  }
  job.quantization = lower(spec.quantization.value_or(job.quantization));
  if (job.quantization == "4bit" || job.quantization == "4" || job.quantization == "bnb_4bit") {
    job.quantization = "nf4";
  }
  if (contains(job.quantization, "double") || contains(job.quantization, "_dq")) {
    job.double_quant = true;
    job.quantization = "nf4";
  }
  if (job.quantization == "8bit" || job.quantization == "8" || job.quantization == "bnb_8bit") {
    job.quantization = "int8";
  }
  if (quantized(job.quantization) && job.training == "full") {
    said.push_back("a quantized base cannot train every weight: the quantization is ignored");
    job.quantization = "none";
  }
  job.dtype = lower(spec.dtype.value_or("bf16"));
  if (!spec.dtype) said.push_back("precision not stated: bf16 assumed");
  job.parallel = parallel_plan(spec);
  said.insert(said.end(), job.parallel.assumptions.begin(), job.parallel.assumptions.end());
  // The dtype the weights are loaded in: a full fine-tune in mixed precision keeps fp32 weights
  // (HF Trainer's default load); PEFT's k-bit preparation casts a 4/8-bit model's remaining
  // weights (embeddings, lm_head, norms) to fp32; DeepSpeed loads them in 16 bits and keeps
  // the fp32 masters with its optimizer.
  if (spec.weights_dtype) {
    job.weights_dtype = lower(*spec.weights_dtype);
  } else if (job.parallel.deepspeed) {
    job.weights_dtype = job.dtype == "fp32" ? "fp32" : "bf16";
  } else if (job.training == "full" && job.dtype != "fp32") {
    job.weights_dtype = "fp32";
    said.push_back(
        "weights' dtype not stated: fp32 master weights under mixed precision "
        "assumed (HF Trainer's default load)");
  } else if (quantized(job.quantization)) {
    job.weights_dtype = "fp32";
    said.push_back(
        "weights' dtype not stated: embeddings and norms cast to fp32 beside the "
        "quantized layers assumed (PEFT's k-bit preparation)");
  } else {
    job.weights_dtype = job.dtype;
  }
  job.optimizer = lower(spec.optimizer.value_or("adamw"));
  if (!spec.optimizer) said.push_back("optimizer not stated: AdamW assumed");
  job.batch = std::max(1, spec.batch_size.value_or(1));
  if (!spec.batch_size) said.push_back("micro batch not stated: 1 assumed");
  job.sequence = std::max(1, spec.sequence_length.value_or(2048));
  if (!spec.sequence_length) said.push_back("sequence length not stated: 2048 tokens assumed");
  job.rank = std::max(1, spec.lora_rank.value_or(8));
  bool default_targets = false;
  job.targets = targets_of(spec.lora_targets, &default_targets);
  if (job.training == "lora") {
    if (!spec.lora_rank) said.push_back("LoRA rank not stated: 8 assumed");
    if (default_targets) said.push_back("LoRA target modules not stated: q_proj, v_proj assumed");
  }
  job.checkpointing = spec.gradient_checkpointing.value_or(false);
  if (!spec.gradient_checkpointing) {
    said.push_back("gradient checkpointing not stated: off assumed (HF Trainer's default)");
  }
  job.checkpoints_offloaded = spec.offload && spec.offload->kind == "activation_offload";
  job.fused_loss = spec.fused_loss.value_or(false);
  job.attention = lower(spec.attention.value_or("sdpa"));
  return job;
}

struct Terms {
  std::vector<MemoryTerm> list;
  void add(std::string name, double bytes) {
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

class LlmModel {
 public:
  explicit LlmModel(LlmJob job) : j_(std::move(job)), f_(j_.f), p_(j_.parallel) {}

  std::vector<PhaseEstimate> phases() const {
    return {phase(Phase::kModelLoad, model_load()), phase(Phase::kTrainStep, train_step()),
            phase(Phase::kSaving, saving())};
  }

 private:
  static PhaseEstimate phase(Phase p, Terms terms) {
    PhaseEstimate e;
    e.phase = p;
    e.peak_bytes = terms.sum();
    e.terms = std::move(terms.list);
    return e;
  }

  bool full() const { return j_.training == "full"; }
  double h() const { return f_.hidden; }
  double q_width() const { return double(f_.heads) * f_.head_width(); }
  double kv_width() const { return double(f_.kv_heads) * f_.head_width(); }
  double experts() const { return f_.experts > 0 ? f_.experts : 1; }
  // Per token, the MLP width a token passes through (the active experts' for an MoE).
  double active_mlp() const {
    return double(f_.intermediate) * (f_.experts > 0 ? f_.active_experts : 1);
  }

  double linear_params_per_layer() const {
    return h() * q_width() * 2 + h() * kv_width() * 2 + 3 * h() * f_.intermediate * experts();
  }
  double linear_params() const { return f_.layers * linear_params_per_layer(); }
  double other_params() const { return llm_parameters(f_) - linear_params(); }
  double layer_params() const { return linear_params_per_layer() + 2 * h(); }

  double quantized_bits() const {
    if (j_.quantization == "nf4" || j_.quantization == "int4" || j_.quantization == "fp4") {
      return j_.double_quant ? kLlm.nf4_double_quant_bits : kLlm.nf4_bits;
    }
    if (is_one_of(j_.quantization, {"int8", "fp8", "qint8", "float8"})) return kLlm.int8_bits;
    return 8.1;  // a quantization the table does not know: 8-bit
  }
  // DeepSpeed casts the model to its 16-bit compute dtype and keeps the fp32 masters with the
  // optimizer's states, whatever dtype the weights were loaded in.
  double weight_bytes() const {
    // The memory model's one table of bytes per weight (triage/memory_model.h).
    if (p_.deepspeed && bytes_per_weight(j_.dtype) < 4) return bytes_per_weight(j_.dtype);
    return bytes_per_weight(j_.weights_dtype);
  }
  double base_weights() const {
    const double rest = weight_bytes();
    if (quantized(j_.quantization)) {
      return linear_params() * quantized_bits() / 8 + other_params() * rest;
    }
    return llm_parameters(f_) * rest;
  }

  double lora_params() const {
    const Targets& t = j_.targets;
    const double mlp_copies = t.experts ? experts() : 1;
    const double per_layer = t.q * (h() + q_width()) + t.k * (h() + kv_width()) +
                             t.v * (h() + kv_width()) + t.o * (q_width() + h()) +
                             (t.gate + t.up + t.down) * (h() + f_.intermediate) * mlp_copies;
    return double(j_.rank) * per_layer * f_.layers;
  }
  double trainable_params() const {
    if (full()) return llm_parameters(f_);
    if (j_.training == "freeze") return 2 * layer_params();  // LLaMA-Factory's last 2 layers
    return lora_params();
  }
  // Adapters train in fp32 (PEFT keeps them so beside a 16-bit base); a full fine-tune trains
  // the weights in the dtype they are loaded in.
  double trainable_bytes() const {
    if (j_.training == "lora") return 4;
    return weight_bytes();
  }
  double optimizer_bytes_per_param() const {
    const std::string& o = j_.optimizer;
    // DeepSpeed keeps fp32 masters and fp32 Adam states for 16-bit weights (the ZeRO paper's
    // K = 12).
    const double s = p_.deepspeed && full() ? 4 : trainable_bytes();
    const double master = p_.deepspeed && full() && weight_bytes() < 4 ? 4 : 0;
    double states = 2 * s;
    if (contains(o, "8bit") || contains(o, "8_bit") || o == "adamw8bit") {
      states = contains(o, "lion") ? 1 : 2;
    } else if (contains(o, "32bit")) {
      states = 8;
    } else if (contains(o, "adafactor")) {
      states = 0.05 * s;
    } else if (o == "sgd") {
      states = 0;
    } else if (contains(o, "lion") || contains(o, "sgdm")) {
      states = s;
    } else if (contains(o, "prodigy")) {
      states = 4 * s;
    }
    return states + master;
  }

  double one_layer_activations() const {
    const Targets& t = j_.targets;
    double per_token = kLlm.layer_bytes_per_hidden * h() + 4 * kv_width() +
                       kLlm.layer_bytes_per_mlp * active_mlp();
    if (j_.training == "lora") {
      // Each adapted linear keeps its (dropped-out) input for the adapter's backward.
      per_token += 2 * ((t.q + t.k + t.v + t.o + t.gate + t.up) * h() + t.down * active_mlp());
    }
    double bytes = per_token * tokens();
    if (is_one_of(j_.attention, {"eager", "math", "none"})) {
      bytes += double(j_.batch) * f_.heads * sequence() * sequence() * 2 * 2;
    }
    return bytes;
  }
  double sequence() const { return double(j_.sequence) * p_.activations; }
  double tokens() const { return double(j_.batch) * sequence(); }
  double activations() const {
    const double one = one_layer_activations();
    if (!j_.checkpointing) return one * f_.layers;
    const double kept =
        j_.checkpoints_offloaded ? 0 : tokens() * h() * kLlm.checkpoint_bytes * f_.layers;
    // A 4/8-bit layer is dequantized to 16 bits while it computes.
    return kept + one;
  }
  double logits() const {
    if (j_.fused_loss) return tokens() * h() * 4;  // chunked: a hidden-sized fp32 buffer
    return tokens() * f_.vocab * kLlm.logit_bytes;
  }
  double dequantized_layer() const {
    if (!quantized(j_.quantization)) return 0;
    return 3 * h() * f_.intermediate * 2 / 3;  // the largest linear in 16 bits
  }

  void add_weights(Terms& t) const {
    t.add("base_weights", base_weights() * p_.weights);
    if (p_.gathers_layers) {
      // The layer in use and the next one (prefetch), and the embeddings when they are used.
      // A gathered layer is in its compute dtype: 16 bits unless the job trains in fp32.
      const double layer_bytes =
          quantized(j_.quantization) ? quantized_bits() / 8 : std::min(weight_bytes(), 2.0);
      t.add("gathered_layers", 2 * layer_params() * layer_bytes +
                                   double(f_.vocab) * h() * std::min(weight_bytes(), 2.0));
    }
  }
  void add_training_state(Terms& t, bool with_gradients) const {
    const double n = trainable_params();
    if (!full()) t.add("trainable_weights", n * trainable_bytes() * p_.weights);
    if (with_gradients) {
      const double grad_bytes = trainable_bytes();
      t.add("gradients", n * grad_bytes * p_.gradients);
      if (p_.gradient_buckets) t.add("gradient_buckets", n * grad_bytes);
    }
    t.add("optimizer_states", n * optimizer_bytes_per_param() * p_.optimizer);
  }
  void add_overhead(Terms& t, double transient) const {
    t.add("allocator_overhead", kLlm.workspace_bytes + kLlm.fragmentation * transient);
  }

  Terms model_load() const {
    Terms t;
    add_weights(t);
    if (quantized(j_.quantization)) t.add("block_being_quantized", layer_params() * 2);
    add_overhead(t, 0);
    return t;
  }
  Terms train_step() const {
    Terms t;
    add_weights(t);
    add_training_state(t, true);
    const double act = activations() + dequantized_layer();
    t.add("activations", act);
    const double loss = logits();
    t.add("logits", loss);
    add_overhead(t, act + loss);
    return t;
  }
  Terms saving() const {
    Terms t;
    add_weights(t);
    add_training_state(t, false);
    t.add("state_dict_copy", (full() ? layer_params() : trainable_params()) * 2);
    add_overhead(t, 0);
    return t;
  }

  LlmJob j_;
  const LlmFamily& f_;
  const ParallelPlan& p_;
};

}  // namespace

bool is_llm_spec(const MemorySpec& spec) {
  if (find_llm_family(spec.model_family) != nullptr) return true;
  if (find_architecture(spec.model_family) != nullptr) return false;
  return spec.sequence_length.has_value() || looks_like_llm(spec.model_family);
}

MemoryEstimate estimate_llm_memory(const MemorySpec& spec) {
  LlmJob job = settle(spec);
  MemoryEstimate estimate;
  estimate.family = std::string(job.f.id);
  estimate.assumptions = job.assumptions;
  if (job.f.guessed) {
    estimate.model_unknown = fmt::format(
        "the model '{}' is not in the LLM table and its name states no size", spec.model_family);
  }
  estimate.processes = job.parallel.processes;
  estimate.per_gpu = job.parallel.summary;
  estimate.phases = LlmModel(std::move(job)).phases();
  return estimate;
}

}  // namespace oomtriage::triage
