// parsers/native_config.cc: each file becomes a flat list of (native key, value, table, line),
// then the trainer's dialect rows pick the knobs out of it.
#include "parsers/native_config.h"

#include <algorithm>
#include <map>
#include <set>

#include "parsers/bounded_document.h"
#include "parsers/family_names.h"
#include "parsers/trainer_dialect.h"
#include "parsers/trainer_words.h"

namespace oomtriage::parsers {
namespace {

using nlohmann::json;

struct Entry {
  json value;
  size_t target = 0;
  std::string table;
  std::string key;  // as written
  int line = 0;
  // A JSON file's text: its line is found when it is wanted (nlohmann keeps no marks, and
  // searching for every key of a file with many is quadratic).
  std::string_view json_text;
  int line_of() const;
};

// Native key (without SimpleTuner's "--") -> where it is. Later files do not override earlier
// ones: the main config names the job, the dataset config only adds dataset keys.
using Flat = std::map<std::string, Entry>;

struct Document {
  Flat flat;
  std::vector<Flat> datasets;  // kohya's [[datasets]] (each with [general]'s keys under it)
};

std::string bare(std::string_view key) {
  while (!key.empty() && key.front() == '-') key.remove_prefix(1);
  return std::string(key);
}

json from_toml(const toml::node& node) {
  if (const auto* v = node.as_boolean()) return v->get();
  if (const auto* v = node.as_integer()) return v->get();
  if (const auto* v = node.as_floating_point()) return v->get();
  if (const auto* v = node.as_string()) return v->get();
  if (const auto* a = node.as_array()) {
    json out = json::array();
    for (const toml::node& item : *a) out.push_back(from_toml(item));
    return out;
  }
  if (node.is_table()) return json::object();
  return nullptr;  // dates and times: no knob is one
}

void add_toml_table(const toml::table& table, const std::string& name, size_t target, Flat& flat) {
  for (const auto& [key, node] : table) {
    const std::string k(key.str());
    if (node.is_table() || node.is_array_of_tables()) continue;
    flat.try_emplace(
        bare(k),
        Entry{from_toml(node), target, name, k, static_cast<int>(node.source().begin.line), {}});
  }
}

// The line of `"key"` in a JSON text (nlohmann keeps no marks): the first occurrence.
int json_line(std::string_view text, std::string_view key) {
  const std::string quoted = "\"" + std::string(key) + "\"";
  const size_t at = text.find(quoted);
  if (at == std::string_view::npos) return 0;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(at), '\n'));
}

int Entry::line_of() const { return json_text.empty() ? line : json_line(json_text, key); }

// SimpleTuner's data-backend JSON: a list of datasets; the caches (text and image embeds) and
// disabled ones train nothing. One level of nesting is kept as "video.num_frames".
void read_backends(const json& list, size_t target, std::string_view text, Document& doc) {
  for (const json& backend : list) {
    if (!backend.is_object()) continue;
    const auto type = backend.find("dataset_type");
    if (type != backend.end() && *type != "image" && *type != "video") continue;
    const auto off = [&](const char* key) {
      const auto it = backend.find(key);
      return it != backend.end() && *it == true;
    };
    if (off("disabled") || off("disable")) continue;
    const std::string table = "datasets[" + std::to_string(doc.datasets.size()) + "]";
    Flat flat;
    for (const auto& [key, value] : backend.items()) {
      flat.try_emplace(key, Entry{value, target, table, key, 0, text});
      if (!value.is_object()) continue;
      for (const auto& [inner, inner_value] : value.items()) {
        flat.try_emplace(key + "." + inner, Entry{inner_value, target, table, inner, 0, text});
      }
    }
    doc.datasets.push_back(std::move(flat));
  }
}

std::string read_file_into(const NativeFile& file, size_t target, bool dataset_file,
                           Document& doc) {
  if (file.kind == TargetKind::kToml) {
    Result<toml::table> parsed = parse_toml(file.text, file.path);
    if (!parsed) return parsed.error().message;
    const toml::table& root = *parsed;
    if (dataset_file) {
      // [general] applies to every dataset unless the dataset sets the key itself.
      Flat general;
      if (const toml::table* g = root["general"].as_table()) {
        add_toml_table(*g, "general", target, general);
      }
      if (const toml::array* list = root["datasets"].as_array()) {
        for (size_t i = 0; i < list->size(); ++i) {
          const toml::table* d = list->get(i)->as_table();
          if (d == nullptr) continue;
          Flat flat;
          add_toml_table(*d, "datasets[" + std::to_string(i) + "]", target, flat);
          for (const auto& [key, entry] : general) flat.try_emplace(key, entry);
          doc.datasets.push_back(std::move(flat));
        }
      }
      if (doc.datasets.empty() && !general.empty()) doc.datasets.push_back(std::move(general));
      return "";
    }
    // kohya's --config_file may group keys in any tables; it reads them as one namespace.
    add_toml_table(root, "", target, doc.flat);
    for (const auto& [key, node] : root) {
      if (const toml::table* t = node.as_table()) {
        add_toml_table(*t, std::string(key.str()), target, doc.flat);
      }
    }
    return "";
  }
  Result<json> parsed = parse_json(file.text, file.path);
  if (!parsed) return parsed.error().message;
  const json& root = *parsed;
  if (dataset_file && root.is_array()) {
    read_backends(root, target, file.text, doc);
    return "";
  }
  if (!root.is_object()) return file.path + ": not a JSON object";
  for (const auto& [key, value] : root.items()) {
    doc.flat.try_emplace(bare(key), Entry{value, target, "", key, 0, file.text});
    if (value.is_object()) {
      // One level of nesting, as OneTrainer writes its optimizer: "optimizer.optimizer".
      for (const auto& [inner, inner_value] : value.items()) {
        doc.flat.try_emplace(bare(key) + "." + inner,
                             Entry{inner_value, target, key, inner, 0, file.text});
      }
    }
  }
  return "";
}

// Knobs of the issue-44 keys (nullopt: not one of them).
std::optional<Knob> word_knob(std::string_view neutral) {
  if (neutral == "network.type") return Knob::kNetwork;
  if (neutral == "model.qtype" || neutral == "model.te_qtype") return Knob::kQuantize;
  if (neutral == "datasets[].size") return Knob::kResolution;
  if (neutral == "datasets[].num_frames") return Knob::kNumFrames;
  if (neutral == "train.cache_text_to_disk") return Knob::kTextEncoder;
  if (neutral == "train.prior_preservation") return Knob::kBatchSize;
  if (neutral == "train.text_encoder_trained") return Knob::kNetwork;  // what trains
  if (neutral == "train.full_bf16" || neutral == "train.full_fp16" ||
      neutral == "train.weight_dtype") {
    return Knob::kDtype;
  }
  if (neutral.rfind("model.", 0) == 0) return Knob::kNetwork;  // the model's own words
  if (neutral == "train.ema" || neutral == "train.ema_device" ||
      neutral == "train.fused_backward_pass") {
    return Knob::kOptimizer;
  }
  return std::nullopt;  // block swap, offloading: kOffloading
}

Knob knob_of(std::string_view neutral) {
  if (const auto knob = word_knob(neutral)) return *knob;
  if (neutral == "train.gradient_checkpointing") return Knob::kGradientCheckpointing;
  if (neutral == "train.batch_size" || neutral == "datasets[].batch_size") return Knob::kBatchSize;
  if (neutral == "train.gradient_accumulation") return Knob::kGradientAccumulation;
  if (neutral == "datasets[].resolution") return Knob::kResolution;
  if (neutral == "train.dtype") return Knob::kDtype;
  if (neutral == "train.optimizer") return Knob::kOptimizer;
  if (neutral == "train.disable_sampling" || neutral == "sample.sample_every") {
    return Knob::kSampling;
  }
  if (neutral.rfind("sample.", 0) == 0) return Knob::kPreviewSize;
  if (neutral == "datasets[].num_workers") return Knob::kNumWorkers;
  if (neutral == "datasets[].cache_latents_to_disk") return Knob::kLatentCache;
  if (neutral == "train.cache_text_embeddings") return Knob::kTextEncoder;
  if (neutral == "model.quantize") return Knob::kQuantize;
  if (neutral == "network.linear") return Knob::kNetwork;
  return Knob::kOffloading;
}

DatasetView& dataset(JobConfig& config, size_t index) {
  while (config.datasets.size() <= index) {
    DatasetView view;
    view.resolutions.clear();
    view.num_workers = 0;
    config.datasets.push_back(view);
  }
  return config.datasets[index];
}

// The issue-44 keys (what the trainers' own words say of the model and how it trains).
void set_word(JobConfig& c, std::string_view neutral, size_t index, const json& value) {
  const std::string word = value.is_string() ? value.get<std::string>() : "";
  if (neutral == "network.type") {
    // A full fine-tune stays one whatever adapter options sit beside it; an adapter's algorithm
    // (LyCORIS algo) refines the adapter.
    if (!word.empty() && c.network_type != "full") c.network_type = word;
  } else if (neutral == "model.qtype") {
    // Two flags may both say it (--fp8_base --fp8_scaled): one unset does not undo the other.
    if (word == "none" && c.quantize) return;
    c.quantize = word != "none";
    c.qtype = word;
  } else if (neutral == "model.te_qtype") {
    c.quantize_te = word != "none";
    c.qtype_te = word;
  } else if (neutral == "model.family" || neutral == "model.task") {
    c.family_words = word + (c.family_words.empty() ? "" : "/" + c.family_words);
  } else if (neutral == "model.flavour") {
    c.family_words += "/" + word;
  } else if (neutral == "datasets[].size") {
    dataset(c, index).width = value[0].get<int>();
    dataset(c, index).height = value[1].get<int>();
  } else if (neutral == "datasets[].num_frames") {
    if (value.get<int>() > 0) dataset(c, index).num_frames = value.get<int>();
  } else if (neutral == "train.block_swap") {
    c.blocks_to_swap = value.get<int>();
  } else if (neutral == "train.layer_offload_fraction") {
    c.layer_offload_fraction = value.get<double>();
  } else if (neutral == "train.activation_offload") {
    c.activation_offload = c.activation_offload || value.get<bool>();
  } else if (neutral == "train.stream_offload") {
    if (value.get<bool>()) c.layer_offload_fraction = 1.0;
  } else if (neutral == "train.fused_backward_pass") {
    c.fused_backward_pass = value.get<bool>();
  } else if (neutral == "train.full_bf16" || neutral == "train.full_fp16") {
    if (value.get<bool>()) c.weight_dtype = neutral == "train.full_bf16" ? "bf16" : "fp16";
  } else if (neutral == "train.weight_dtype") {
    if (!word.empty()) c.weight_dtype = word;
  } else if (neutral == "train.cache_text_to_disk") {
    c.cache_text_embeddings = c.cache_text_embeddings || value.get<bool>();
  } else if (neutral == "train.prior_preservation") {
    c.prior_preservation = value.get<bool>();
  } else if (neutral == "train.ema") {
    c.ema = value.get<bool>();
  } else if (neutral == "train.ema_device") {
    if (c.ema && word == "cpu") c.ema = false;  // its copy lives in host memory
  } else if (neutral == "train.text_encoder_trained") {
    c.train_text_encoder = value.get<bool>();
  }
}

// Sets one neutral key; `value` is already decoded.
void set_neutral(JobConfig& c, std::string_view neutral, size_t index, const json& value) {
  if (neutral == "train.gradient_checkpointing") {
    c.gradient_checkpointing = value.get<bool>();
    c.gradient_checkpointing_explicit = true;
  } else if (neutral == "train.batch_size") {
    c.batch_size = value.get<int>();
  } else if (neutral == "datasets[].batch_size") {
    dataset(c, index).batch_size = value.get<int>();
  } else if (neutral == "train.gradient_accumulation") {
    c.gradient_accumulation = value.get<int>();
  } else if (neutral == "datasets[].resolution") {
    dataset(c, index).resolutions = {value.get<int>()};
  } else if (neutral == "train.dtype") {
    c.dtype = value.get<std::string>();
  } else if (neutral == "train.optimizer") {
    // diffusers' --optimizer AdamW beside --use_8bit_adam trains 8-bit AdamW.
    if (c.optimizer == "adamw8bit" && value.get<std::string>() == "adamw") return;
    c.optimizer = value.get<std::string>();
  } else if (neutral == "train.disable_sampling") {
    c.disable_sampling = value.get<bool>();
  } else if (neutral == "sample.sample_every") {
    c.sample.every = value.get<int>();
  } else if (neutral == "sample.width") {
    c.sample.width = c.sample.height = c.sample.max_width = c.sample.max_height = value.get<int>();
  } else if (neutral == "sample.sample_steps") {
    c.sample.steps = c.sample.max_steps = value.get<int>();
  } else if (neutral == "sample.batch_size") {
    c.sample.batch_size = value.get<int>();
  } else if (neutral == "datasets[].num_workers") {
    dataset(c, index).num_workers = value.get<int>();
  } else if (neutral == "datasets[].cache_latents_to_disk") {
    dataset(c, index).cache_latents_to_disk = value.get<bool>();
  } else if (neutral == "train.cache_text_embeddings") {
    c.cache_text_embeddings = value.get<bool>();
  } else if (neutral == "model.quantize") {
    c.quantize = value.get<bool>();
  } else if (neutral == "network.linear") {
    c.lora_rank = value.get<int>();
  } else {
    set_word(c, neutral, index, value);
  }
}

std::string neutral_path(std::string_view neutral, size_t index) {
  const std::string prefix = "datasets[]";
  if (neutral.rfind(prefix, 0) != 0) return std::string(neutral);
  return "datasets[" + std::to_string(index) + "]" + std::string(neutral.substr(prefix.size()));
}

std::string shown(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string problem(const std::string& where, const std::string& key, const json& value) {
  return where + ": " + key + " has a value this trainer does not take, got " + shown(value) +
         "; the rest of the config is used";
}

const Entry* find(const Flat& flat, std::string_view key) {
  const auto it = flat.find(std::string(key));
  return it == flat.end() ? nullptr : &it->second;
}

// Applies every dialect row to the flat documents. `complete`: the document holds every
// setting the job runs with (a config file, a printed namespace), so an absent key took the
// trainer's default.
void apply_rows(Trainer trainer, const Document& doc, bool complete,
                const std::vector<std::string>& files, JobConfig& config) {
  std::set<size_t> known, bad;
  for (const DialectRow* row : dialect_of(trainer)) {
    const Knob knob = knob_of(row->neutral);
    const bool per_dataset = row->neutral.rfind("datasets[]", 0) == 0;
    // Per-dataset keys come from each dataset of a dataset config, else from the main file.
    std::vector<const Flat*> sources;
    if (per_dataset && row->in_dataset_file && !doc.datasets.empty()) {
      for (const Flat& flat : doc.datasets) sources.push_back(&flat);
    } else {
      sources.push_back(&doc.flat);
    }
    bool any = false;
    for (size_t i = 0; i < sources.size(); ++i) {
      const Entry* entry = find(*sources[i], row->native);
      if (entry == nullptr && sources[i] != &doc.flat) entry = find(doc.flat, row->native);
      if (entry == nullptr) {
        // kohya's sample_prompts or diffusers' --validation_prompt left out: no sampling.
        if (row->codec == Codec::kPresentIsFalse && complete) {
          set_neutral(config, row->neutral, i, true);
          any = true;
        }
        continue;
      }
      const std::optional<json> value = decode(row->codec, entry->value);
      if (!value) {
        const int line = entry->line_of();
        const std::string where = files[std::min(entry->target, files.size() - 1)] +
                                  (line > 0 ? ":" + std::to_string(line) : "");
        config.problems.push_back(problem(where, entry->key, entry->value));
        bad.insert(static_cast<size_t>(knob));
        continue;
      }
      set_neutral(config, row->neutral, i, *value);
      config.slots[neutral_path(row->neutral, i)] =
          NativeSlot{entry->target, entry->table, entry->key, entry->value, entry->line_of()};
      any = true;
    }
    if (any) {
      known.insert(static_cast<size_t>(knob));
    } else if (complete && !row->default_json.empty()) {
      if (const auto value = decode(row->codec, json::parse(row->default_json))) {
        set_neutral(config, row->neutral, 0, *value);
        if (knob == Knob::kGradientCheckpointing) config.gradient_checkpointing_explicit = false;
        known.insert(static_cast<size_t>(knob));
      }
    }
  }
  config.unknown.set();
  for (const size_t k : known) config.unknown.reset(k);
  for (const size_t k : bad) {
    config.unknown.set(k);
    config.unread.set(k);
  }
}

// The family the trainer's own words name (SimpleTuner's model_family/model_flavour, OneTrainer's
// model_type, musubi's --task), preferred to a guess from the model's file name.
void settle_family(Trainer trainer, JobConfig& config) {
  const std::string& words = config.family_words;
  if (words.empty()) return;
  const size_t slash = words.find('/');
  const std::string first = words.substr(0, slash);
  const std::string rest = slash == std::string::npos ? "" : words.substr(slash + 1);
  if (trainer == Trainer::kSimpleTuner) config.family_id = simpletuner_family(first, rest);
  if (trainer == Trainer::kOneTrainer) config.family_id = onetrainer_family(first);
  if (trainer == Trainer::kSdScripts) config.family_id = musubi_task_family(first);
  if (!config.family_id.empty() && config.family == ModelFamily::kOther) {
    // An architecture id ("flux2-dev") is filed by the family table, not guessed from its
    // letters (which read "flux2-dev" as FLUX.1).
    config.family =
        family_of_architecture(config.family_id).value_or(family_from_name(config.family_id));
  }
}

// What a trainer always does, whatever its config says. SimpleTuner caches text embeddings (its
// text_embeds data backend) and unloads the text encoders before training
// (docs/trainer-readers.md).
void settle_trainer_defaults(Trainer trainer, JobConfig& config) {
  if (trainer == Trainer::kSimpleTuner) {
    config.cache_text_embeddings = true;
    config.unknown.reset(static_cast<size_t>(Knob::kTextEncoder));
  }
}

}  // namespace

Result<JobConfig> read_native_config(Trainer trainer, const std::vector<NativeFile>& files) {
  if (files.empty()) return make_error(ErrorCode::kBadInput, "no config file");
  std::string dataset_error;
  Document doc;
  std::vector<std::string> names;
  for (size_t i = 0; i < files.size(); ++i) {
    names.push_back(files[i].path);
    std::string error = read_file_into(files[i], i, i > 0, doc);
    if (!error.empty()) {
      if (i == 0) return make_error(ErrorCode::kBadInput, std::move(error));
      // A broken dataset config loses the dataset keys, not the job.
      doc.datasets.clear();
      dataset_error = std::move(error);
    }
  }
  JobConfig config;
  config.trainer = trainer;
  config.format = files[0].kind == TargetKind::kToml ? ConfigFormat::kYaml : ConfigFormat::kJson;
  config.process_path = "";
  for (const NativeFile& file : files) {
    // SimpleTuner's config.json spells its keys like the command line: "--resolution".
    const bool dashes =
        file.kind == TargetKind::kJson && file.text.find("\"--") != std::string::npos;
    config.targets.push_back({file.kind, file.path, dashes ? "--" : ""});
  }
  config.datasets.clear();
  if (!dataset_error.empty()) {
    config.problems.push_back(dataset_error + "; the dataset settings are unknown");
  }
  for (const char* key : {"pretrained_model_name_or_path", "model_name_or_path", "base_model_name",
                          "pretrained_model", "dit"}) {
    if (const auto it = doc.flat.find(key); it != doc.flat.end() && it->second.value.is_string()) {
      config.name_or_path = it->second.value.get<std::string>();
      break;
    }
  }
  config.family = family_from_name(config.name_or_path);
  if (const auto it = doc.flat.find("output_name");
      it != doc.flat.end() && it->second.value.is_string()) {
    config.name = it->second.value.get<std::string>();
  }
  apply_rows(trainer, doc, true, names, config);
  settle_family(trainer, config);
  settle_trainer_defaults(trainer, config);
  return config;
}

std::optional<JobConfig> config_from_printed_arguments(
    Trainer trainer, const std::vector<std::pair<std::string, std::string>>& arguments,
    bool complete, const std::string& log, const std::vector<NativeFile>& beside) {
  if (arguments.empty() || dialect_of(trainer).empty()) return std::nullopt;
  Document doc;
  for (const auto& [key, text] : arguments) {
    // Python's repr: 'quoted', None, True/False, numbers.
    json value;
    if (text == "None") {
      value = nullptr;
    } else if (text == "True" || text == "False") {
      value = text == "True";
    } else if (text.size() >= 2 && (text.front() == '\'' || text.front() == '"') &&
               text.back() == text.front()) {
      value = text.substr(1, text.size() - 2);
    } else {
      Result<json> parsed = parse_json(text, log);
      value = parsed ? std::move(*parsed) : json(text);
    }
    doc.flat.try_emplace(bare(key), Entry{value, 0, "", key, 0, {}});
  }
  JobConfig config;
  config.trainer = trainer;
  config.format = ConfigFormat::kJson;
  config.process_path = "";
  config.targets.push_back({TargetKind::kArgs, log, ""});
  config.datasets.clear();
  std::vector<std::string> names = {log};
  for (size_t i = 0; i < beside.size(); ++i) {
    names.push_back(beside[i].path);
    config.targets.push_back({beside[i].kind, beside[i].path, ""});
    std::string error = read_file_into(beside[i], i + 1, true, doc);
    if (!error.empty()) config.problems.push_back(error + "; its settings are unknown");
  }
  for (const char* key : {"pretrained_model_name_or_path", "dit", "pretrained_model"}) {
    if (const auto it = doc.flat.find(key); it != doc.flat.end() && it->second.value.is_string()) {
      config.name_or_path = it->second.value.get<std::string>();
      config.family = family_from_name(config.name_or_path);
      break;
    }
  }
  apply_rows(trainer, doc, complete, names, config);
  settle_family(trainer, config);
  settle_trainer_defaults(trainer, config);
  return config;
}

}  // namespace oomtriage::parsers
