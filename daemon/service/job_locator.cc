// daemon/service/job_locator.cc: the job registry: candidates in order, content sniffing, reading,
// hashing, and the job name.
#include "daemon/service/job_locator.h"

#include "triage/run_config.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

#include "daemon/common/digest.h"
#include "daemon/common/user_file.h"
#include "parsers/bounded_document.h"
#include "parsers/cri_log.h"
#include "parsers/log_analyzer.h"
#include "parsers/trainer_table.h"

namespace oomtriage::daemon {
namespace fs = std::filesystem;
namespace {

using parsers::TargetKind;
using parsers::Trainer;

TargetKind kind_for(const fs::path& path) {
  const std::string ext = path.extension().string();
  if (ext == ".json" || ext == ".jsonc") return TargetKind::kJson;
  if (ext == ".toml") return TargetKind::kToml;
  return TargetKind::kYaml;
}

// Which trainer wrote a config file, from its content; nullopt when none is recognised.
std::optional<Trainer> sniff_trainer(const std::string& text, TargetKind kind) {
  if (kind == TargetKind::kYaml) {
    const auto doc = parsers::yaml_to_json(text, "");
    if (doc && doc->is_object() && doc->contains("config")) return Trainer::kAiToolkit;
    return std::nullopt;
  }
  if (kind == TargetKind::kJson) {
    const Result<nlohmann::json> parsed = parsers::parse_json(text, "");
    if (!parsed || !parsed->is_object()) return std::nullopt;
    const nlohmann::json& doc = *parsed;
    if (doc.contains("config") && doc["config"].is_object()) return Trainer::kAiToolkit;
    for (const auto& [key, value] : doc.items()) {
      if (key.rfind("--", 0) == 0) return Trainer::kSimpleTuner;
    }
    if (doc.contains("__version") || doc.contains("base_model_name") ||
        doc.contains("training_method")) {
      return Trainer::kOneTrainer;
    }
    if (doc.contains("per_device_train_batch_size")) return Trainer::kTransformers;
    if (doc.contains("model_family")) return Trainer::kSimpleTuner;
    return std::nullopt;
  }
  const Result<toml::table> parsed = parsers::parse_toml(text, "");
  if (parsed) {
    const toml::table& doc = *parsed;
    if (doc.contains("model_family") || doc.contains("--model_family")) {
      return Trainer::kSimpleTuner;
    }
    for (const char* key : {"pretrained_model_name_or_path", "train_batch_size", "network_module",
                            "dataset_config", "output_name", "dit", "mixed_precision"}) {
      if (doc.contains(key)) return Trainer::kSdScripts;
    }
    // kohya's config files may group their keys in tables.
    for (const auto& [key, node] : doc) {
      if (const toml::table* t = node.as_table()) {
        if (t->contains("pretrained_model_name_or_path") || t->contains("train_batch_size")) {
          return Trainer::kSdScripts;
        }
      }
    }
  }
  return std::nullopt;
}

// A relative path named by a config or the log: as given, else beside `near`.
fs::path resolve(const std::string& named, const fs::path& near) {
  fs::path path(named);
  std::error_code ec;
  if (path.is_absolute() || fs::is_regular_file(path, ec)) return path;
  return near.parent_path() / path;
}

// The dataset config a kohya/musubi TOML names (`dataset_config = "dataset.toml"`).
std::optional<std::string> dataset_config_of(const std::string& text) {
  const Result<toml::table> doc = parsers::parse_toml(text, "");
  if (!doc) return std::nullopt;
  if (const auto* value = (*doc)["dataset_config"].as_string()) return value->get();
  for (const auto& [key, node] : *doc) {
    if (const toml::table* t = node.as_table()) {
      if (const auto* value = (*t)["dataset_config"].as_string()) return value->get();
    }
  }
  return std::nullopt;
}

// What the log shows about its job, read from its first MiB: the same for every caller.
parsers::LogAnalysis head_facts(const fs::path& log, Trainer trainer,
                                const parsers::LogAnalysis& fallback) {
  constexpr size_t kHeadBytes = 1 << 20;
  std::ifstream in(log, std::ios::binary);
  char magic[2] = {0, 0};
  if (log == "-" || !in || !in.read(magic, 2) || (magic[0] == '\x1f' && magic[1] == '\x8b')) {
    return fallback;  // standard input or gzip: the caller's own reading is all there is
  }
  // Sized by the file: a 1 MiB buffer filled with zeros costs a small log's whole scan time again.
  std::error_code ec;
  const uintmax_t size = fs::file_size(log, ec);
  in.seekg(0);
  std::string head(ec ? kHeadBytes : static_cast<size_t>(std::min<uintmax_t>(size, kHeadBytes)),
                   '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  parsers::AnalyzerOptions options;
  options.trainer = trainer;
  parsers::LogAnalyzer analyzer(options);
  if (parsers::looks_like_cri(head)) {
    parsers::CriDecoder decoder;
    std::string content;
    decoder.feed(head, content);
    analyzer.feed(content);
  } else {
    analyzer.feed(head);
  }
  return analyzer.job_facts();
}

// Which trainer's config a file is: its content says, else AI Toolkit's own file names, else
// the log's trainer for a JSON/TOML file beside its log. A file the user named
// (`explicit_file`) is read as the log's trainer's, or as AI Toolkit's YAML/JSON. nullopt: a
// file of something else.
std::optional<Trainer> config_owner(const fs::path& path, const std::string& text, Trainer trainer,
                                    bool explicit_file) {
  const TargetKind kind = kind_for(path);
  std::optional<Trainer> owner = sniff_trainer(text, kind);
  const std::string name = path.filename().string();
  const auto& own_names = parsers::trainer_row(Trainer::kAiToolkit).config_files;
  if (!owner && std::find(own_names.begin(), own_names.end(), name) != own_names.end()) {
    owner = Trainer::kAiToolkit;  // AI Toolkit's own names: a broken one is reported, not skipped
  } else if (!owner && trainer != Trainer::kUnknown && trainer != Trainer::kAiToolkit &&
             kind != TargetKind::kYaml) {
    owner = trainer;  // config.json/config.toml beside a log of a known trainer
  }
  if (!owner && explicit_file) {
    owner =
        trainer != Trainer::kUnknown && kind != TargetKind::kYaml ? trainer : Trainer::kAiToolkit;
  }
  return owner;
}

// Issue 44: the files a SimpleTuner config names that SimpleTuner reads beside it (the
// data-backend JSON: sizes, frames, per-dataset batch; the LyCORIS config: the algorithm).
void add_simpletuner_files(const fs::path& path, const std::string& text,
                           std::vector<parsers::NativeFile>& files,
                           std::vector<std::string>& warnings) {
  nlohmann::json doc;
  if (kind_for(path) == TargetKind::kJson) {
    if (auto parsed = parsers::parse_json(text, ""); parsed && parsed->is_object()) doc = *parsed;
  } else if (kind_for(path) == TargetKind::kToml) {
    if (const Result<toml::table> parsed = parsers::parse_toml(text, "")) {
      for (const auto& [key, node] : *parsed) {
        if (const auto* value = node.as_string()) doc[std::string(key.str())] = value->get();
      }
    }
  }
  if (!doc.is_object()) return;
  for (const char* key : {"data_backend_config", "lycoris_config"}) {
    std::string named;
    for (const std::string& spelling : {std::string(key), "--" + std::string(key)}) {
      if (doc.contains(spelling) && doc[spelling].is_string()) named = doc[spelling];
    }
    if (named.empty()) continue;
    const fs::path beside = resolve(named, path);
    if (auto beside_text = read_user_file(beside.string())) {
      files.push_back({kind_for(beside), beside.string(), std::move(*beside_text)});
    } else {
      warnings.push_back(
          fmt::format("the {} {}; its settings are unknown", key, beside_text.error().message));
    }
  }
}

// `text` read as `owner`'s config; `files` gets it, and for kohya the dataset config its TOML
// names (else `named_dataset`, the one its log or command line names), read from beside it. A
// dataset config that cannot be read is a warning: only its settings are unknown.
Result<parsers::JobConfig> read_as(Trainer owner, const fs::path& path, const std::string& text,
                                   const std::optional<std::string>& named_dataset,
                                   std::vector<parsers::NativeFile>& files,
                                   std::vector<std::string>& warnings) {
  const TargetKind kind = kind_for(path);
  files = {{kind, path.string(), text}};
  if (owner == Trainer::kAiToolkit) {
    return parsers::parse_job_config(
        text,
        kind == TargetKind::kJson ? parsers::ConfigFormat::kJson : parsers::ConfigFormat::kYaml,
        path.string());
  }
  std::optional<std::string> dataset =
      kind == TargetKind::kToml ? dataset_config_of(text) : std::nullopt;
  if (!dataset && named_dataset) dataset = named_dataset;
  if (owner == Trainer::kSimpleTuner) {
    add_simpletuner_files(path, text, files, warnings);
  }
  if (dataset && owner == Trainer::kSdScripts) {
    const fs::path dataset_path = resolve(*dataset, path);
    if (auto dataset_text = read_user_file(dataset_path.string())) {
      files.push_back({TargetKind::kToml, dataset_path.string(), std::move(*dataset_text)});
    } else {
      warnings.push_back(fmt::format("the dataset config {}; its settings are unknown",
                                     dataset_text.error().message));
    }
  }
  return parsers::read_native_config(owner, files);
}

struct Candidate {
  fs::path path;
  bool explicit_file = false;
};

}  // namespace

Result<JobLookup> locate_job(const fs::path& log, const std::optional<fs::path>& explicit_config,
                             Trainer trainer, const parsers::LogAnalysis& facts_if_unreadable) {
  JobLookup lookup;
  const parsers::LogAnalysis facts = head_facts(log, trainer, facts_if_unreadable);
  if (trainer == Trainer::kUnknown) trainer = facts.trainer;

  std::vector<Candidate> candidates;
  if (explicit_config) {
    candidates.push_back({*explicit_config, true});
  } else {
    if (facts.named_config) candidates.push_back({resolve(*facts.named_config, log)});
    // Standard input has no folder: nothing beside it (not the current folder's config).
    // Every trainer's config files, in the table's order, each name once.
    std::vector<std::string_view> names;
    for (const parsers::TrainerRow& row : parsers::trainer_table()) {
      for (const std::string_view name : row.config_files) {
        if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
      }
    }
    for (const std::string_view name : names) {
      if (log != "-") candidates.push_back({log.parent_path() / name});
    }
  }

  std::vector<std::string> warnings;
  for (const Candidate& candidate : candidates) {
    std::error_code ec;
    if (!candidate.explicit_file && !fs::is_regular_file(candidate.path, ec)) continue;
    const Result<std::string> text = read_user_file(candidate.path.string());
    if (!text) {
      if (candidate.explicit_file) return text.error();
      warnings.push_back(text.error().message + "; triaging without it");
      continue;
    }
    const std::optional<Trainer> owner =
        config_owner(candidate.path, *text, trainer, candidate.explicit_file);
    if (!owner) continue;  // a config.json of something else
    std::vector<parsers::NativeFile> files;
    Result<parsers::JobConfig> load =
        read_as(*owner, candidate.path, *text, facts.named_dataset_config, files, warnings);
    if (!load) {
      warnings.push_back(load.error().message + "; triaging without the config");
      lookup.config_problem = "the job config did not parse";
      if (candidate.explicit_file) break;
      continue;
    }
    lookup.config = std::move(*load);
    lookup.files = std::move(files);
    break;
  }

  if (lookup.config && !facts.printed_config.empty()) {
    Result<parsers::JobConfig> printed =
        parsers::parse_job_config(facts.printed_config, parsers::ConfigFormat::kPrintedProcess,
                                  log.string() + " (the config printed at its top)");
    if (printed) {
      const triage::RunConfig as_run = triage::as_the_run_had_it(*lookup.config, *printed);
      if (!as_run.changed.empty()) {
        lookup.run_config = std::move(*printed);
        if (!lookup.warning.empty()) lookup.warning += "\n";
        lookup.warning += fmt::format(
            "{}: the config changed since this run ({}); the crash is explained from the config "
            "the run printed",
            log.string(), fmt::join(as_run.changed, ", "));
      }
    }
  }
  if (!lookup.config && lookup.config_problem.empty() && !facts.printed_config.empty()) {
    Result<parsers::JobConfig> load =
        parsers::parse_job_config(facts.printed_config, parsers::ConfigFormat::kPrintedProcess,
                                  log.string() + " (the config printed at its top)");
    if (load) {
      lookup.config = std::move(*load);
      lookup.config->targets = {{TargetKind::kYaml, "", ""}};
    } else {
      lookup.config_problem = "the config printed in the log did not parse";
    }
  }
  if (!lookup.config && lookup.config_problem.empty() && !facts.printed_arguments.empty()) {
    // A whole namespace or command line shows every setting but those a --config_file holds.
    const bool complete =
        std::none_of(facts.printed_arguments.begin(), facts.printed_arguments.end(),
                     [](const auto& a) { return a.first == "config_file"; });
    lookup.config = parsers::config_from_printed_arguments(trainer, facts.printed_arguments,
                                                           complete, log.string());
  }
  if (!lookup.config && lookup.config_problem.empty()) {
    lookup.config_problem = "no job config was found";
  }
  if (lookup.config) {
    for (const std::string& problem : lookup.config->problems) warnings.push_back(problem);
  }
  for (size_t i = 0; i < warnings.size(); ++i) {
    lookup.warning += (i ? "\n" : "") + warnings[i];
  }

  triage::JobInfo job;
  if (!lookup.files.empty()) {
    std::string all;
    for (const auto& file : lookup.files) all += file.text + '\0';
    job.config_path = lookup.files.front().path;
    job.config_sha256 = sha256_hex(lookup.files.size() == 1 ? lookup.files.front().text : all);
    lookup.config_text = lookup.files.front().text;
  }
  if (lookup.config && !lookup.config->name.empty()) job.name = lookup.config->name;
  if (job.name.empty() && facts.job_name) job.name = *facts.job_name;
  if (job.name.empty() && job.config_path) {
    job.name = fs::absolute(*job.config_path).parent_path().filename().string();
  }
  if (!job.name.empty()) lookup.job = std::move(job);
  return lookup;
}

Result<ConfigFile> read_config_file(const fs::path& path, Trainer trainer,
                                    const std::optional<std::string>& named_dataset_config) {
  OOMTRIAGE_ASSIGN_OR_RETURN(const std::string text, read_user_file(path.string()));
  return read_config_text(path, text, trainer, named_dataset_config);
}

Result<ConfigFile> read_config_text(const fs::path& path, const std::string& text, Trainer trainer,
                                    const std::optional<std::string>& named_dataset_config) {
  ConfigFile read;
  const std::optional<Trainer> owner = config_owner(path, text, trainer, true);
  OOMTRIAGE_ASSIGN_OR_RETURN(
      read.config, read_as(*owner, path, text, named_dataset_config, read.files, read.warnings));
  return read;
}

}  // namespace oomtriage::daemon
