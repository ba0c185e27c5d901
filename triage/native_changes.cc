// triage/native_changes.cc: neutral path -> dialect row -> the slot the value was read from (or
// the trainer's main file for a key it leaves out) -> the native key and value.
#include "triage/native_changes.h"

#include <nlohmann/json.hpp>

#include "parsers/trainer_dialect.h"

namespace oomtriage::triage {
namespace {

using nlohmann::json;
using parsers::TargetKind;

// Changes that come with a fix but are not what it is for: accumulation keeps the effective
// batch of a smaller batch; previews less often do not make one preview cheaper.
bool essential(const std::string& neutral) {
  return neutral != "sample.sample_every" &&
         neutral.find("gradient_accumulation") == std::string::npos;
}

}  // namespace

bool to_native(Fix& fix, const parsers::JobConfig& config) {
  std::vector<ConfigChange> out;
  bool wanted = false, kept = false;
  for (ConfigChange& change : fix.changes) {
    if (!change.neutral) {
      out.push_back(std::move(change));
      continue;
    }
    const bool needed = essential(change.path);
    wanted |= needed;
    const parsers::ConfigTarget main =
        config.targets.empty() ? parsers::ConfigTarget{} : config.targets.front();
    if (config.trainer == parsers::Trainer::kAiToolkit) {
      if (!config.process_path.empty()) change.path = config.process_path + "." + change.path;
      change.kind = main.kind;
      change.file = main.path;
      change.neutral = false;
      out.push_back(std::move(change));
      kept |= needed;
      continue;
    }
    const parsers::DialectRow* row = parsers::row_for(config.trainer, change.path);
    if (row == nullptr) continue;
    size_t target = 0;
    std::string table;
    std::string key(row->native);
    json current = nullptr;
    if (const auto slot = config.slots.find(change.path); slot != config.slots.end()) {
      target = slot->second.target;
      table = slot->second.table;
      key = slot->second.key;
      current = slot->second.value;
    } else if (const size_t dot = key.find('.'); dot != std::string::npos) {
      table = key.substr(0, dot);  // OneTrainer's "optimizer": {"optimizer": ...}
      key = key.substr(dot + 1);
    } else if (!config.targets.empty() && main.kind == TargetKind::kToml) {
      // kohya reads every table of its --config_file as one namespace: a new key joins the
      // table its neighbours are in (the GUI's [training_arguments]), not a bare root.
      for (const auto& [neutral, slot] : config.slots) {
        if (slot.target == 0 && !slot.table.empty()) {
          table = slot.table;
          if (neutral.rfind("train.", 0) == 0) break;
        }
      }
    }
    const parsers::ConfigTarget& where =
        target < config.targets.size() ? config.targets[target] : main;
    json to_shape = current;  // what a new value is shaped like
    if (current.is_null()) {
      // Not written down. On a command line the log shows, an absent flag is added ("+"); in a
      // file, `from` is the value the job runs with: the trainer's default, or what the log
      // printed.
      const bool shown_command_line = where.kind == TargetKind::kArgs && !where.path.empty();
      if (!shown_command_line) {
        // The trainer's own spelling when the value is its default ("AdamW"), else the value.
        const json& neutral_from = change.from;
        const json default_value =
            row->default_json.empty() ? json() : json::parse(row->default_json);
        const auto decoded_default = parsers::decode(row->codec, default_value);
        current = decoded_default && *decoded_default == neutral_from
                      ? default_value
                      : parsers::encode(row->codec, neutral_from, nullptr);
        to_shape = current;
      }
    }
    if (current.is_null() && table.empty()) key = where.key_prefix + key;
    if (where.kind == TargetKind::kArgs && key.rfind("--", 0) != 0) key = "--" + key;
    const json to = parsers::encode(row->codec, change.to, to_shape);
    if (to == current) continue;
    ConfigChange native;
    native.path = key;
    native.from = current;
    native.to = to;
    native.kind = where.kind;
    native.file = where.path;
    native.table = table;
    out.push_back(std::move(native));
    kept |= needed;
  }
  fix.changes = std::move(out);
  return !wanted || kept;
}

}  // namespace oomtriage::triage
