// parsers/native_config.h
//
// Reads the config files of trainers other than AI Toolkit into the neutral JobConfig, through
// the dialect table (parsers/trainer_dialect.h): kohya sd-scripts / musubi-tuner (--config_file
// TOML, its section tables flattened as kohya does, plus --dataset_config TOML with [general]
// and [[datasets]]), SimpleTuner (config.json with "--" keys, or config.toml), OneTrainer (its
// JSON config), HF Trainer (training_args.json), and the arguments a log prints (diffusers'
// `Namespace(...)`, HF's `TrainingArguments(...)`). A complete config file takes the trainer's
// documented default for a key it leaves out; printed arguments show only what they show, the
// rest stays unknown. A bad value is one problem line (file, line, reason) and only its knob is
// lost. Pure: text in, view out.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "parsers/event.h"
#include "parsers/job_config.h"

namespace oomtriage::parsers {

struct NativeFile {
  TargetKind kind = TargetKind::kToml;  // kToml, kJson or kYaml
  std::string path;
  std::string text;
};

// files[0] is the trainer's main config; kohya's dataset config, when there is one, follows.
Result<JobConfig> read_native_config(Trainer trainer, const std::vector<NativeFile>& files);

// The arguments a log printed (name, value as Python prints it), read as a config of `trainer`
// whose target is the command line. `complete`: the print shows every argument (a whole
// `Namespace(...)`), so an absent one took the trainer's default; else absent ones are unknown.
// `log` names the log in problems. `beside`: the files the arguments name that the trainer reads
// too (kohya/musubi's --dataset_config TOML, SimpleTuner's --data_backend_config JSON and
// --lycoris_config), read as files[1...] are by read_native_config. nullopt when nothing was
// printed or the trainer has no dialect.
std::optional<JobConfig> config_from_printed_arguments(
    Trainer trainer, const std::vector<std::pair<std::string, std::string>>& arguments,
    bool complete, const std::string& log, const std::vector<NativeFile>& beside = {});

}  // namespace oomtriage::parsers
