// triage/memory_spec.cc: the spec object read from JSON and written back.
#include "triage/memory_spec.h"

#include <fmt/format.h>

namespace oomtriage::triage {
namespace {

using nlohmann::json;

// Reads one optional field: absent or null leaves it unset; a value of another type is an error.
class FieldReader {
 public:
  FieldReader(const json& object, std::string_view source) : object_(object), source_(source) {}

  const json* find(const char* key) const {
    const auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  void integer(const char* key, std::optional<int>& out) {
    const json* v = find(key);
    if (v == nullptr) return;
    if (v->is_number() && v->get<double>() >= 0 && v->get<double>() < 1e7) {
      out = static_cast<int>(v->get<double>());
    } else {
      fail(key, "a non-negative integer");
    }
  }
  void boolean(const char* key, std::optional<bool>& out) {
    const json* v = find(key);
    if (v == nullptr) return;
    if (v->is_boolean()) {
      out = v->get<bool>();
    } else {
      fail(key, "true, false or null");
    }
  }
  void word(const char* key, std::optional<std::string>& out) {
    const json* v = find(key);
    if (v == nullptr) return;
    if (v->is_string()) {
      out = v->get<std::string>();
    } else {
      fail(key, "a string or null");
    }
  }
  void fail(const char* key, const char* what) {
    if (error_.empty()) error_ = fmt::format("{}: {} must be {}", source_, key, what);
  }
  const std::string& error() const { return error_; }

 private:
  const json& object_;
  std::string_view source_;
  std::string error_;
};

void read_resolution(FieldReader& in, MemorySpec& spec) {
  const json* v = in.find("resolution");
  if (v == nullptr) return;
  const auto positive = [](const json& n) {
    return n.is_number() && n.get<double>() > 0 && n.get<double>() < 1e6;
  };
  if (positive(*v)) {  // one number: a square bucket
    spec.width = spec.height = static_cast<int>(v->get<double>());
  } else if (v->is_array() && v->size() == 2 && positive((*v)[0]) && positive((*v)[1])) {
    spec.width = static_cast<int>((*v)[0].get<double>());
    spec.height = static_cast<int>((*v)[1].get<double>());
  } else {
    in.fail("resolution", "[width, height], one number or null (pixels, under a million)");
  }
}

void read_offload(FieldReader& in, MemorySpec& spec) {
  const json* v = in.find("offload");
  if (v == nullptr) return;
  Offload offload;
  if (v->is_string()) {
    offload.kind = v->get<std::string>();
  } else if (v->is_object()) {
    const auto kind = v->find("kind");
    if (kind != v->end() && kind->is_string()) offload.kind = kind->get<std::string>();
    if (kind != v->end() && kind->is_null()) return;  // {"kind": null}: not stated
    const auto amount = v->find("amount");
    if (amount != v->end() && amount->is_number()) offload.amount = amount->get<double>();
  } else {
    in.fail("offload", "{\"kind\": ..., \"amount\": ...} or null");
    return;
  }
  spec.offload = offload;
}

// The per-GPU and LLM fields (issue 44): lora_targets is a list of words or one word.
void read_parallel_and_llm(FieldReader& in, MemorySpec& spec) {
  in.integer("processes", spec.processes);
  in.integer("machines", spec.machines);
  in.word("sharding", spec.sharding);
  in.word("offload_optimizer", spec.offload_optimizer);
  in.word("offload_params", spec.offload_params);
  in.integer("context_parallel", spec.context_parallel);
  in.integer("sequence_length", spec.sequence_length);
  in.word("weights_dtype", spec.weights_dtype);
  in.boolean("fused_loss", spec.fused_loss);
  const json* targets = in.find("lora_targets");
  if (targets == nullptr) return;
  std::vector<std::string> words;
  if (targets->is_string()) words.push_back(targets->get<std::string>());
  if (targets->is_array()) {
    for (const json& t : *targets) {
      if (!t.is_string()) return in.fail("lora_targets", "a list of module names or null");
      words.push_back(t.get<std::string>());
    }
  }
  if (!targets->is_string() && !targets->is_array()) {
    return in.fail("lora_targets", "a list of module names or null");
  }
  spec.lora_targets = std::move(words);
}

void read_sampling(FieldReader& in, MemorySpec& spec) {
  const json* v = in.find("sampling");
  if (v == nullptr) return;
  if (v->is_boolean()) {
    spec.sampling = SamplingSpec{.enabled = v->get<bool>()};
    return;
  }
  if (!v->is_object()) return in.fail("sampling", "an object, true, false or null");
  SamplingSpec sampling;
  FieldReader sub(*v, "sampling");
  std::optional<bool> enabled, tiled;
  std::optional<int> width, height, frames, batch;
  sub.boolean("enabled", enabled);
  sub.boolean("tiled_vae", tiled);
  sub.integer("width", width);
  sub.integer("height", height);
  sub.integer("frames", frames);
  sub.integer("batch_size", batch);
  if (!sub.error().empty()) return in.fail("sampling", "an object of booleans and integers");
  sampling.enabled = enabled.value_or(true);
  sampling.tiled_vae = tiled.value_or(false);
  sampling.width = width.value_or(0);
  sampling.height = height.value_or(0);
  sampling.frames = frames.value_or(0);
  sampling.batch_size = std::max(1, batch.value_or(1));
  spec.sampling = sampling;
}

}  // namespace

Result<MemorySpec> parse_memory_spec(const json& object, std::string_view source) {
  if (!object.is_object()) {
    return make_error(ErrorCode::kBadInput, fmt::format("{}: a spec is a JSON object", source));
  }
  MemorySpec spec;
  FieldReader in(object, source);
  std::optional<std::string> family;
  in.word("model_family", family);
  if (!family || family->empty()) in.fail("model_family", "a model family id (\"flux1-dev\")");
  spec.model_family = family.value_or("");
  in.word("training_type", spec.training_type);
  read_resolution(in, spec);
  in.integer("frames", spec.frames);
  in.integer("batch_size", spec.batch_size);
  in.integer("gradient_accumulation", spec.gradient_accumulation);
  in.integer("lora_rank", spec.lora_rank);
  in.boolean("gradient_checkpointing", spec.gradient_checkpointing);
  in.boolean("text_encoder_cached", spec.text_encoder_cached);
  in.boolean("text_encoder_trained", spec.text_encoder_trained);
  in.word("quantization", spec.quantization);
  in.word("text_encoder_quantization", spec.text_encoder_quantization);
  in.word("dtype", spec.dtype);
  in.word("optimizer", spec.optimizer);
  in.word("attention", spec.attention);
  read_offload(in, spec);
  read_sampling(in, spec);
  read_parallel_and_llm(in, spec);
  in.boolean("ema", spec.ema);
  in.boolean("fused_backward_pass", spec.fused_backward_pass);
  in.word("master_weights", spec.master_weights);
  if (!in.error().empty()) return make_error(ErrorCode::kBadInput, in.error());
  return spec;
}

nlohmann::ordered_json to_json(const MemorySpec& spec) {
  const auto opt = [](const auto& v) { return v ? nlohmann::ordered_json(*v) : nullptr; };
  nlohmann::ordered_json out;
  out["model_family"] = spec.model_family;
  out["training_type"] = opt(spec.training_type);
  out["resolution"] = spec.width && spec.height
                          ? nlohmann::ordered_json::array({*spec.width, *spec.height})
                          : nlohmann::ordered_json(nullptr);
  out["frames"] = opt(spec.frames);
  out["batch_size"] = opt(spec.batch_size);
  out["gradient_accumulation"] = opt(spec.gradient_accumulation);
  out["gradient_checkpointing"] = opt(spec.gradient_checkpointing);
  out["quantization"] = opt(spec.quantization);
  out["text_encoder_quantization"] = opt(spec.text_encoder_quantization);
  out["dtype"] = opt(spec.dtype);
  out["optimizer"] = opt(spec.optimizer);
  out["lora_rank"] = opt(spec.lora_rank);
  out["text_encoder_cached"] = opt(spec.text_encoder_cached);
  out["text_encoder_trained"] = opt(spec.text_encoder_trained);
  out["offload"] = spec.offload ? nlohmann::ordered_json{{"kind", spec.offload->kind},
                                                         {"amount", opt(spec.offload->amount)}}
                                : nlohmann::ordered_json(nullptr);
  out["attention"] = opt(spec.attention);
  if (spec.sampling) {
    const SamplingSpec& s = *spec.sampling;
    out["sampling"] = {{"enabled", s.enabled},       {"width", s.width},
                       {"height", s.height},         {"frames", s.frames},
                       {"batch_size", s.batch_size}, {"tiled_vae", s.tiled_vae}};
  } else {
    out["sampling"] = nullptr;
  }
  // The per-GPU and LLM fields, shown when a spec uses them.
  if (spec.processes || spec.machines || spec.sharding || spec.offload_optimizer ||
      spec.offload_params || spec.context_parallel || spec.sequence_length || spec.lora_targets ||
      spec.weights_dtype || spec.fused_loss) {
    out["processes"] = opt(spec.processes);
    out["machines"] = opt(spec.machines);
    out["sharding"] = opt(spec.sharding);
    out["offload_optimizer"] = opt(spec.offload_optimizer);
    out["offload_params"] = opt(spec.offload_params);
    out["context_parallel"] = opt(spec.context_parallel);
    out["sequence_length"] = opt(spec.sequence_length);
    out["lora_targets"] = opt(spec.lora_targets);
    out["weights_dtype"] = opt(spec.weights_dtype);
    out["fused_loss"] = opt(spec.fused_loss);
  }
  // Issue 44's fields, shown when a reader or the spec states them.
  if (spec.ema) out["ema"] = *spec.ema;
  if (spec.fused_backward_pass) out["fused_backward_pass"] = *spec.fused_backward_pass;
  if (spec.master_weights) out["master_weights"] = *spec.master_weights;
  return out;
}

}  // namespace oomtriage::triage
