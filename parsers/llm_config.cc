// parsers/llm_config.cc: each LLM trainer's options and defaults. Sources: axolotl's config
// schema (src/axolotl/utils/schemas/), LLaMA-Factory's hparams, TRL's SFTConfig and ModelConfig,
// transformers' TrainingArguments and examples/pytorch/language-modeling/run_clm.py, unsloth
// Studio's configs (studio/backend/assets/configs/); docs/memory-model.md lists the commits.
#include "parsers/llm_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "parsers/distributed_config.h"

namespace oomtriage::parsers {
namespace {

using nlohmann::json;

std::string lower(std::string word) {
  for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return word;
}

const json* field(const json& doc, std::string_view key) {
  if (!doc.is_object()) return nullptr;
  const auto it = doc.find(std::string(key));
  return it == doc.end() || it->is_null() ? nullptr : &*it;
}

// Reads fields of one document, with its problems collected.
class Fields {
 public:
  Fields(const json& doc, LlmJobConfig& job) : doc_(doc), job_(job) {}

  const json* get(std::string_view key) const { return field(doc_, key); }
  bool has(std::string_view key) const { return get(key) != nullptr; }

  std::optional<std::string> text(std::string_view key) const {
    const json* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (v->is_string()) return v->get<std::string>();
    if (v->is_boolean()) return v->get<bool>() ? "true" : "false";
    if (v->is_number()) return v->dump();
    return std::nullopt;
  }
  std::optional<int> integer(std::string_view key) const {
    const json* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (v->is_number()) {
      const double d = v->get<double>();
      if (d >= 0 && d < 1e9) return static_cast<int>(d);
    }
    if (v->is_string()) {
      const std::string s = v->get<std::string>();
      int n = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
      if (ec == std::errc() && end == s.data() + s.size()) return n;
    }
    job_.problems.push_back(fmt::format("{}: '{}' is not a whole number", key, v->dump()));
    return std::nullopt;
  }
  // true / false, "true" / "false", "auto" (read as true: the GPUs these run on support it).
  std::optional<bool> flag(std::string_view key) const {
    const json* v = get(key);
    if (v == nullptr) return std::nullopt;
    if (v->is_boolean()) return v->get<bool>();
    if (v->is_number()) return v->get<double>() != 0;
    if (v->is_string()) {
      const std::string s = lower(v->get<std::string>());
      if (s == "true" || s == "auto" || s == "1" || s == "yes") return true;
      if (s == "false" || s == "0" || s == "no" || s.empty()) return false;
      return true;  // a word ("unsloth", "offload"): on, in that way
    }
    return std::nullopt;
  }
  std::optional<std::vector<std::string>> list(std::string_view key) const {
    const json* v = get(key);
    if (v == nullptr) return std::nullopt;
    std::vector<std::string> out;
    if (v->is_array()) {
      for (const json& item : *v) {
        if (item.is_string()) out.push_back(item.get<std::string>());
      }
    } else if (v->is_string()) {
      std::string s = v->get<std::string>();
      std::replace(s.begin(), s.end(), ',', ' ');
      size_t at = 0;
      while (at < s.size()) {
        const size_t end = std::min(s.find(' ', at), s.size());
        if (end > at) out.push_back(s.substr(at, end - at));
        at = end + 1;
      }
    }
    if (out.empty()) return std::nullopt;
    return out;
  }

 private:
  const json& doc_;
  LlmJobConfig& job_;
};

// `value` when set, else `fallback`, saying that the trainer's default was taken.
template <class T>
void set_or_default(std::optional<T>& to, std::optional<T> value, T fallback,
                    std::string_view option, std::string_view said, LlmJobConfig& job) {
  if (value) {
    to = value;
    return;
  }
  to = fallback;
  job.defaults.push_back(
      fmt::format("{} not set: {}'s default {} taken", option, job.reader, said));
}

std::optional<std::string> dtype_word(const std::optional<std::string>& word) {
  if (!word) return std::nullopt;
  const std::string w = lower(*word);
  if (w == "bfloat16" || w == "bf16") return "bf16";
  if (w == "float16" || w == "fp16" || w == "half") return "fp16";
  if (w == "float32" || w == "fp32" || w == "float") return "fp32";
  if (w == "auto") return "bf16";  // the checkpoint's own dtype: these models ship in bf16
  return std::nullopt;
}

// The compute precision from bf16 / fp16 switches.
std::optional<std::string> precision(const Fields& f) {
  if (f.flag("bf16").value_or(false)) return "bf16";
  if (f.flag("fp16").value_or(false)) return "fp16";
  if (f.has("bf16") || f.has("fp16")) return "fp32";
  return std::nullopt;
}

void read_distributed(const Fields& f, LlmJobConfig& job) {
  if (const json* ds = f.get("deepspeed")) {
    if (ds->is_string()) {
      job.distributed.deepspeed_config = ds->get<std::string>();
    } else if (ds->is_object()) {
      fill_unset(job.distributed, deepspeed_setup(*ds));
    }
  }
  if (f.has("fsdp") || f.has("fsdp_config")) {
    const json* words = f.get("fsdp");
    const bool off =
        words != nullptr && ((words->is_boolean() && !words->get<bool>()) ||
                             (words->is_string() && words->get<std::string>().empty()));
    if (!off) fill_unset(job.distributed, fsdp_setup(words, f.get("fsdp_config")));
  }
  if (const auto cp = f.integer("context_parallel_size")) job.distributed.context_parallel = cp;
  if (const auto sp = f.integer("sequence_parallel_degree")) job.distributed.context_parallel = sp;
}

bool fused_loss_of(const Fields& f) {
  for (const char* key : {"liger_fused_linear_cross_entropy", "cut_cross_entropy",
                          "use_liger_kernel", "enable_liger_kernel", "use_liger"}) {
    if (f.flag(key).value_or(false)) return true;
  }
  if (const auto plugins = f.list("plugins")) {
    for (const std::string& p : *plugins) {
      if (p.find("CutCrossEntropy") != std::string::npos) return true;
    }
  }
  return false;
}

void read_checkpointing(const Fields& f, const char* key, bool fallback, LlmJobConfig& job) {
  const auto text = f.text(key);
  set_or_default(job.gradient_checkpointing, f.flag(key), fallback, key, fallback ? "on" : "off",
                 job);
  if (text && (lower(*text) == "unsloth" || lower(*text).rfind("offload", 0) == 0)) {
    job.checkpoints_offloaded = true;
  }
}

// axolotl: base_model, adapter, load_in_4bit/8bit, lora_*, sequence_len, micro_batch_size, ...
LlmJobConfig read_axolotl(const json& doc) {
  LlmJobConfig job;
  job.reader = "axolotl";
  const Fields f(doc, job);
  job.model = f.text("base_model");
  const std::string adapter = lower(f.text("adapter").value_or(""));
  job.training = adapter.empty() ? "full" : "lora";
  if (f.flag("load_in_4bit").value_or(false) || adapter == "qlora") {
    // axolotl quantizes with double quantization.
    job.quantization = "nf4_double_quant";
  } else if (f.flag("load_in_8bit").value_or(false)) {
    job.quantization = "int8";
  } else {
    job.quantization = "none";
  }
  job.lora_rank = f.integer("lora_r");
  if (f.flag("lora_target_linear").value_or(false)) {
    job.lora_targets = std::vector<std::string>{"all-linear"};
  } else {
    job.lora_targets = f.list("lora_target_modules");
  }
  set_or_default(job.sequence_length, f.integer("sequence_len"), 512, "sequence_len", "512", job);
  set_or_default(job.micro_batch, f.integer("micro_batch_size"), 1, "micro_batch_size", "1", job);
  job.gradient_accumulation = f.integer("gradient_accumulation_steps");
  read_checkpointing(f, "gradient_checkpointing", false, job);
  if (f.flag("activation_offloading").value_or(false)) job.checkpoints_offloaded = true;
  job.dtype = precision(f);
  read_distributed(f, job);
  // axolotl loads the model in its compute dtype; PEFT's k-bit preparation casts the rest of a
  // quantized model to fp32, which axolotl skips under FSDP and ZeRO-3.
  const bool sharded =
      job.distributed.sharding &&
      (job.distributed.sharding->rfind("fsdp", 0) == 0 || job.distributed.sharding == "zero3");
  if (job.quantization != "none" && !sharded) {
    job.weights_dtype = "fp32";
  } else {
    job.weights_dtype = job.dtype.value_or("fp32");
  }
  set_or_default(job.optimizer, f.text("optimizer"), std::string("adamw_torch_fused"), "optimizer",
                 "adamw_torch_fused", job);
  job.fused_loss = fused_loss_of(f);
  if (f.flag("flash_attention").value_or(false)) job.attention = "flash";
  if (const auto a = f.text("attn_implementation")) job.attention = lower(*a);
  return job;
}

// LLaMA-Factory: model_name_or_path, finetuning_type, quantization_bit, lora_rank, cutoff_len...
LlmJobConfig read_llama_factory(const json& doc) {
  LlmJobConfig job;
  job.reader = "llama-factory";
  const Fields f(doc, job);
  job.model = f.text("model_name_or_path");
  std::optional<std::string> type = f.text("finetuning_type");
  set_or_default(job.training, type, std::string("lora"), "finetuning_type", "lora", job);
  if (const auto bits = f.integer("quantization_bit")) {
    // LLaMA-Factory quantizes 4-bit with double quantization (its double_quantization: true).
    job.quantization =
        *bits <= 4 ? (f.flag("double_quantization").value_or(true) ? "nf4_double_quant" : "nf4")
                   : "int8";
  } else {
    job.quantization = "none";
  }
  set_or_default(job.lora_rank, f.integer("lora_rank"), 8, "lora_rank", "8", job);
  job.lora_targets = f.list("lora_target");
  if (!job.lora_targets) job.lora_targets = std::vector<std::string>{"all"};
  set_or_default(job.sequence_length, f.integer("cutoff_len"), 2048, "cutoff_len", "2048", job);
  set_or_default(job.micro_batch, f.integer("per_device_train_batch_size"), 8,
                 "per_device_train_batch_size", "8", job);
  job.gradient_accumulation = f.integer("gradient_accumulation_steps");
  job.gradient_checkpointing = !f.flag("disable_gradient_checkpointing").value_or(false);
  if (f.flag("use_unsloth_gc").value_or(false)) job.checkpoints_offloaded = true;
  job.dtype = precision(f);
  // A full fine-tune keeps fp32 weights under mixed precision unless pure_bf16 (its README's
  // "Full (bf16 or fp16) 32 bits" row); adapters and frozen weights are in the compute dtype.
  if (job.training == "full" && !f.flag("pure_bf16").value_or(false)) {
    job.weights_dtype = "fp32";
  } else {
    job.weights_dtype = job.dtype.value_or("bf16");
  }
  if (f.flag("pure_bf16").value_or(false)) job.dtype = "bf16";
  set_or_default(job.optimizer, f.text("optim"), std::string("adamw_torch"), "optim", "adamw_torch",
                 job);
  job.fused_loss = fused_loss_of(f) || f.flag("use_unsloth").value_or(false);
  if (f.flag("use_unsloth").value_or(false)) job.checkpoints_offloaded = true;
  if (const auto a = f.text("flash_attn")) job.attention = lower(*a) == "fa2" ? "flash" : lower(*a);
  read_distributed(f, job);
  return job;
}

// TRL's SFT and HF Trainer scripts share TrainingArguments; TRL's own defaults differ.
LlmJobConfig read_hf_arguments(const json& doc, bool trl) {
  LlmJobConfig job;
  job.reader = trl ? "trl" : "transformers";
  const Fields f(doc, job);
  job.model = f.text("model_name_or_path");
  if (!job.model) job.model = f.text("model_name");
  if (!job.model) job.model = f.text("model");
  const bool peft = f.flag("use_peft").value_or(false) || f.has("lora_r") ||
                    f.flag("load_in_4bit").value_or(false);
  job.training = peft ? "lora" : "full";
  if (f.flag("load_in_4bit").value_or(false)) {
    job.quantization = f.flag("use_bnb_nested_quant").value_or(false) ? "nf4_double_quant" : "nf4";
  } else if (f.flag("load_in_8bit").value_or(false)) {
    job.quantization = "int8";
  } else {
    job.quantization = "none";
  }
  if (peft) {
    set_or_default(job.lora_rank, f.integer("lora_r"), trl ? 16 : 8, "lora_r", trl ? "16" : "8",
                   job);
    job.lora_targets = f.list("lora_target_modules");
  }
  std::optional<int> length = f.integer("max_length");
  if (!length) length = f.integer("max_seq_length");
  if (!length) length = f.integer("block_size");
  if (!length) length = f.integer("model_max_length");
  set_or_default(job.sequence_length, length, 1024, trl ? "max_length" : "block_size", "1024", job);
  set_or_default(job.micro_batch, f.integer("per_device_train_batch_size"), 8,
                 "per_device_train_batch_size", "8", job);
  job.gradient_accumulation = f.integer("gradient_accumulation_steps");
  read_checkpointing(f, "gradient_checkpointing", trl, job);
  job.dtype = precision(f);
  if (!job.dtype) {
    job.dtype = trl ? "bf16" : "fp32";
    job.defaults.push_back(fmt::format("bf16 / fp16 not set: {}'s default {} taken", job.reader,
                                       trl ? "bf16" : "fp32"));
  }
  std::optional<std::string> load = dtype_word(f.text("dtype"));
  if (!load) load = dtype_word(f.text("torch_dtype"));
  if (job.quantization != "none") {
    job.weights_dtype = "fp32";  // PEFT's k-bit preparation (TRL calls it)
  } else if (load) {
    job.weights_dtype = load;
  } else {
    job.weights_dtype = "fp32";
    job.defaults.push_back(fmt::format("{} not set: {}'s default float32 load taken",
                                       trl ? "dtype" : "torch_dtype", job.reader));
  }
  set_or_default(job.optimizer, f.text("optim"), std::string("adamw_torch"), "optim", "adamw_torch",
                 job);
  job.fused_loss = fused_loss_of(f);
  if (const auto a = f.text("attn_implementation")) job.attention = lower(*a);
  read_distributed(f, job);
  return job;
}

// unsloth Studio's YAML: model, training{training_type, max_seq_length, load_in_4bit,
// batch_size, gradient_checkpointing, optim}, lora{lora_r, target_modules}.
LlmJobConfig read_unsloth(const json& doc) {
  LlmJobConfig job;
  job.reader = "unsloth";
  const json empty = json::object();
  const json& training = field(doc, "training") ? doc["training"] : doc;
  const json& lora = field(doc, "lora") ? doc["lora"] : doc;
  const Fields top(doc, job), t(training, job), l(lora, job);
  job.model = top.text("model");
  if (!job.model) job.model = top.text("model_name");
  set_or_default(job.training, t.text("training_type"), std::string("lora"), "training_type",
                 "lora", job);
  if (job.training == "qlora") job.training = "lora";
  const bool four = t.flag("load_in_4bit").value_or(job.training != "full");
  job.quantization =
      four ? "nf4_double_quant" : (t.flag("load_in_8bit").value_or(false) ? "int8" : "none");
  std::optional<int> rank = l.integer("lora_r");
  if (!rank) rank = l.integer("r");
  set_or_default(job.lora_rank, rank, 16, "lora_r", "16", job);
  job.lora_targets = l.list("target_modules");
  set_or_default(job.sequence_length, t.integer("max_seq_length"), 2048, "max_seq_length", "2048",
                 job);
  std::optional<int> batch = t.integer("batch_size");
  if (!batch) batch = t.integer("per_device_train_batch_size");
  set_or_default(job.micro_batch, batch, 2, "batch_size", "2", job);
  job.gradient_accumulation = t.integer("gradient_accumulation_steps");
  job.gradient_checkpointing = t.flag("gradient_checkpointing").value_or(true);
  const std::string gc = lower(t.text("gradient_checkpointing").value_or("unsloth"));
  job.checkpoints_offloaded = gc == "unsloth";
  job.dtype = "bf16";
  job.weights_dtype = "bf16";
  set_or_default(job.optimizer, t.text("optim"), std::string("adamw_8bit"), "optim", "adamw_8bit",
                 job);
  job.fused_loss = true;  // unsloth's chunked cross-entropy
  (void)empty;
  return job;
}

// Which LLM trainer wrote a config, by the keys only it uses.
std::optional<LlmJobConfig> read_by_keys(const json& doc) {
  if (!doc.is_object()) return std::nullopt;
  const auto has = [&](const char* key) { return field(doc, key) != nullptr; };
  if (has("base_model") && (has("adapter") || has("sequence_len") || has("micro_batch_size") ||
                            has("datasets") || has("load_in_4bit"))) {
    return read_axolotl(doc);
  }
  if (has("model_name_or_path") && (has("finetuning_type") || has("stage") || has("cutoff_len") ||
                                    has("template") || has("quantization_bit"))) {
    return read_llama_factory(doc);
  }
  const json* training = field(doc, "training");
  if (has("model") && training != nullptr && training->is_object() &&
      (field(*training, "max_seq_length") || field(*training, "load_in_4bit"))) {
    return read_unsloth(doc);
  }
  if (has("model_name") && has("max_seq_length") && !has("model_name_or_path")) {
    return read_unsloth(doc);
  }
  if (has("model_name_or_path") || has("per_device_train_batch_size")) {
    const bool trl = has("max_length") || has("max_seq_length") || has("use_peft") ||
                     has("dataset_name") || has("packing") || has("lora_r");
    return read_hf_arguments(doc, trl);
  }
  return std::nullopt;
}

// `--name value`, `--name=value`, a bare `--flag` as true; list options take every word up to
// the next option.
json arguments_as_json(const std::vector<std::string>& argv, size_t from) {
  json doc = json::object();
  for (size_t i = from; i < argv.size(); ++i) {
    const std::string& word = argv[i];
    if (word.rfind("--", 0) != 0) continue;
    std::string name = word.substr(2);
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      doc[name.substr(0, eq)] = name.substr(eq + 1);
      continue;
    }
    std::replace(name.begin(), name.end(), '-', '_');
    std::vector<std::string> values;
    while (i + 1 < argv.size() && argv[i + 1].rfind("--", 0) != 0) values.push_back(argv[++i]);
    if (values.empty()) {
      doc[name] = true;
    } else if (values.size() == 1) {
      doc[name] = values.front();
    } else {
      doc[name] = values;
    }
  }
  return doc;
}

std::string base_name(const std::string& word) {
  const size_t slash = word.find_last_of('/');
  return slash == std::string::npos ? word : word.substr(slash + 1);
}

bool is_config_path(const std::string& word) {
  const std::string w = lower(word);
  for (const char* ext : {".yaml", ".yml", ".json"}) {
    if (w.size() > std::string_view(ext).size() && w.ends_with(ext)) return true;
  }
  return false;
}

}  // namespace

std::optional<LlmJobConfig> read_llm_config(const json& doc) { return read_by_keys(doc); }

std::optional<LlmJobConfig> read_llm_command(const std::vector<std::string>& argv,
                                             const ConfigLoader& load) {
  if (argv.empty()) return std::nullopt;
  size_t at = 0;
  if (base_name(argv[0]).rfind("python", 0) == 0) {
    at = 1;
    if (at < argv.size() && argv[at] == "-m") ++at;
  }
  if (at >= argv.size()) return std::nullopt;
  const std::string program = base_name(argv[at]);
  const auto loaded = [&](const std::string& path) -> std::optional<json> {
    if (!load) return std::nullopt;
    return load(path);
  };
  // A CLI that takes a config file: axolotl, LLaMA-Factory, `trl sft --config`.
  const bool axolotl = program == "axolotl" || program.rfind("axolotl.cli", 0) == 0;
  const bool factory =
      program == "llamafactory-cli" || program == "lmf" ||
      (program == "train.py" && at + 1 < argv.size() && is_config_path(argv[at + 1]));
  const bool trl = program == "trl";
  json cli = arguments_as_json(argv, at + 1);
  std::optional<std::string> file;
  for (size_t i = at + 1; i < argv.size() && !file; ++i) {
    if (argv[i].rfind("--", 0) == 0) {
      if (argv[i] == "--config" && i + 1 < argv.size()) file = argv[i + 1];
      if (argv[i].rfind("--config=", 0) == 0) file = argv[i].substr(9);
      // A flag's value: skip it unless the flag is a switch.
      continue;
    }
    if ((axolotl || factory) && is_config_path(argv[i])) file = argv[i];
  }
  json doc = json::object();
  if (file) {
    if (const auto read = loaded(*file); read && read->is_object()) doc = *read;
  }
  // The command line's own arguments win over its config file.
  for (const auto& [key, value] : cli.items()) {
    if (key != "config") doc[key] = value;
  }
  if (trl) {
    if (!doc.contains("model_name_or_path") && !doc.contains("per_device_train_batch_size"))
      return std::nullopt;
    LlmJobConfig job = read_hf_arguments(doc, true);
    return job;
  }
  if (axolotl || factory) {
    if (auto job = read_by_keys(doc)) return job;
    return std::nullopt;
  }
  // A training script with HF Trainer's arguments (run_clm.py, train.py, ...).
  if (!cli.contains("model_name_or_path") && !doc.contains("per_device_train_batch_size")) {
    return std::nullopt;
  }
  return read_by_keys(doc);
}

}  // namespace oomtriage::parsers
