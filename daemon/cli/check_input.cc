// daemon/cli/check_input.cc: `check`'s three inputs read through the readers the rest of
// oomtriage uses (the spec parser, the job registry's config reader, the analyzer's reading of an
// echoed command line); nothing here reads a trainer's format itself.
#include "daemon/cli/check_input.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "daemon/cli/launch_input.h"
#include "daemon/cli/trainer_command.h"
#include "daemon/common/user_file.h"
#include "daemon/service/job_locator.h"
#include "parsers/bounded_document.h"
#include "parsers/launcher.h"
#include "parsers/log_analyzer.h"
#include "parsers/native_config.h"
#include "parsers/printed_arguments.h"
#include "parsers/trainer_dialect.h"
#include "parsers/trainer_words.h"

namespace oomtriage::daemon {
namespace {

namespace fs = std::filesystem;

// Records where JSON stopped parsing; accepts everything else (nlohmann's SAX interface, which
// reports a parse error to the handler instead of throwing).
class JsonErrorFinder final : public nlohmann::json_sax<nlohmann::json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t byte, const std::string&,
                   const nlohmann::detail::exception& error) override {
    byte_ = byte;
    reason_ = error.what();
    return false;
  }
  std::size_t byte() const { return byte_; }
  const std::string& reason() const { return reason_; }

 private:
  std::size_t byte_ = 0;
  std::string reason_;
};

// "spec.json:3: not valid JSON: syntax error while parsing object key ..." for JSON that does
// not parse: the readers say only "not valid JSON", and a user looking for a stray comma needs
// the line.
std::string json_error(const std::string& text, const std::string& source) {
  JsonErrorFinder finder;
  (void)nlohmann::json::sax_parse(text, &finder);
  const size_t byte = std::min(finder.byte(), text.size());
  const long line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(byte), '\n');
  std::string reason = finder.reason();
  // "[json.exception.parse_error.101] parse error at line 3, column 1: syntax error ..."
  if (const size_t colon = reason.find(": "); colon != std::string::npos) {
    reason = reason.substr(colon + 2);
  }
  return fmt::format("{}:{}: not valid JSON: {}", source, line, reason);
}

// The config's bad fields and the reader's warnings, as assumptions.
CheckInput from_config_file(ConfigFile read) {
  CheckInput input;
  input.assumptions = std::move(read.warnings);
  // A bad field's knob is unknown, so the model's own line says what it assumed for it.
  input.assumptions.insert(input.assumptions.end(), read.config.problems.begin(),
                           read.config.problems.end());
  input.config = std::move(read.config);
  input.files = std::move(read.files);
  return input;
}

// The command line as a launch script echoes it into a log, so that the analyzer reads it as it
// reads one: words with a space keep their quotes.
std::string echoed(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& word : argv) {
    if (!line.empty()) line += ' ';
    line += word.find_first_of(" \t") == std::string::npos ? word : "\"" + word + "\"";
  }
  return line + "\n";
}

// The arguments a command passes beside its config file, which the file's reading leaves out.
std::vector<std::string> arguments_beside(const parsers::Arguments& arguments) {
  std::vector<std::string> names;
  for (const auto& [name, value] : arguments) {
    if (name != "config_file" && name != "dataset_config") names.push_back("--" + name);
  }
  return names;
}

// The arguments that name a file the trainer reads beside its command line (issue 44): kohya's
// and musubi's dataset TOML, SimpleTuner's data-backend JSON and LyCORIS config.
constexpr const char* kFilesBeside[] = {"dataset_config", "data_backend_config", "lycoris_config"};

bool names_file_beside(const parsers::Arguments& arguments, const std::string& file) {
  for (const auto& [name, value] : arguments) {
    for (const char* beside : kFilesBeside) {
      if (name == beside && value == file) return true;
    }
  }
  return false;
}

// Those files, read; one that cannot be read is an assumption, and only its settings are lost.
std::vector<parsers::NativeFile> files_beside(const parsers::Arguments& arguments,
                                              std::vector<std::string>& assumptions) {
  std::vector<parsers::NativeFile> files;
  for (const auto& [name, value] : arguments) {
    if (std::find(std::begin(kFilesBeside), std::end(kFilesBeside), name) ==
        std::end(kFilesBeside)) {
      continue;
    }
    Result<std::string> text = read_user_file(value);
    if (!text) {
      assumptions.push_back(
          fmt::format("--{} {}: {}; its settings are unknown", name, value, text.error().message));
      continue;
    }
    const std::string ext = fs::path(value).extension().string();
    const parsers::TargetKind kind =
        ext == ".toml" ? parsers::TargetKind::kToml
                       : (ext == ".json" ? parsers::TargetKind::kJson : parsers::TargetKind::kYaml);
    files.push_back({kind, value, std::move(*text)});
  }
  return files;
}

}  // namespace

// JSON within the limits of parsers/bounded_document.h; where it stopped parsing when it does
// not parse.
Result<nlohmann::json> parse_json_file(const std::string& text, const std::string& path) {
  Result<nlohmann::json> doc = parsers::parse_json(text, path);
  if (!doc && parsers::size_ok(text, path) && parsers::json_nesting_ok(text)) {
    return make_error(ErrorCode::kBadInput, json_error(text, path));
  }
  return doc;
}

Result<CheckInput> read_spec_input(const std::string& path) {
  OOMTRIAGE_ASSIGN_OR_RETURN(const std::string text, read_user_file(path));
  OOMTRIAGE_ASSIGN_OR_RETURN(const nlohmann::json doc, parse_json_file(text, path));
  // A row of the measured-jobs file carries its spec under "spec".
  const nlohmann::json& object = doc.is_object() && doc.contains("spec") ? doc["spec"] : doc;
  CheckInput input;
  OOMTRIAGE_ASSIGN_OR_RETURN(input.spec, triage::parse_memory_spec(object, path));
  return input;
}

Result<CheckInput> read_config_input(const std::string& path, parsers::Trainer trainer) {
  std::error_code ec;
  if (fs::path(path).extension() == ".json" && fs::is_regular_file(path, ec)) {
    OOMTRIAGE_ASSIGN_OR_RETURN(const std::string text, read_user_file(path));
    OOMTRIAGE_TRY(parse_json_file(text, path));
  }
  // An LLM trainer's config (axolotl, LLaMA-Factory, TRL, HF Trainer, unsloth): launch_input.h.
  OOMTRIAGE_ASSIGN_OR_RETURN(std::optional<CheckInput> llm, read_llm_config_input(path));
  if (llm) return std::move(*llm);
  OOMTRIAGE_ASSIGN_OR_RETURN(ConfigFile read, read_config_file(path, trainer, std::nullopt));
  return from_config_file(std::move(read));
}

namespace {

// Issue 45: the launcher's --mixed_precision (accelerate's, or its config file's) is the job's
// when the script leaves its own out and takes accelerate's (parsers/trainer_words.h): returned
// then. sd-scripts passes its own default, "no", instead: the user is told where the word goes.
std::optional<std::string> launcher_precision(const parsers::DistributedSetup& setup,
                                              const std::optional<parsers::ScriptFacts>& script,
                                              bool script_states_it,
                                              std::vector<std::string>& said) {
  if (!setup.mixed_precision || !script || script_states_it) return std::nullopt;
  const std::string& precision = *setup.mixed_precision;
  if (script->precision_from_launcher) {
    said.push_back(fmt::format(
        "mixed precision {}: the launcher's --mixed_precision, which the script takes when its "
        "own is left out",
        precision));
    return precision;
  }
  if (script->trainer == parsers::Trainer::kSdScripts && precision != "no") {
    said.push_back(fmt::format(
        "the launcher's --mixed_precision {} does not reach sd-scripts, which passes its own "
        "(default no: fp32) to accelerate; to train in {}, put --mixed_precision {} after the "
        "script",
        precision, precision, precision));
  }
  return std::nullopt;
}

Result<CheckInput> read_image_command_input(const std::vector<std::string>& argv,
                                            parsers::Trainer trainer,
                                            const parsers::DistributedSetup& launch) {
  parsers::AnalyzerOptions options;
  options.trainer = trainer;
  parsers::LogAnalyzer analyzer(options);
  analyzer.feed(echoed(argv));
  parsers::LogAnalysis facts = analyzer.job_facts();
  // The script a command runs names its trainer, family and training type (issue 44).
  const std::optional<parsers::ScriptFacts> script =
      parsers::script_facts(parsers::script_in(argv));
  if (facts.trainer == parsers::Trainer::kUnknown && script) facts.trainer = script->trainer;
  std::vector<std::string> launch_said;

  // --config_file names the main config even when a dataset config comes first; a dataset
  // config alone (musubi's `--dataset_config x.toml` beside its arguments) is not the job's.
  std::optional<std::string> file =
      facts.named_config ? facts.named_config : config_in_command(argv);
  if (file && !facts.named_config &&
      (file == facts.named_dataset_config || names_file_beside(facts.printed_arguments, *file))) {
    file.reset();
  }
  if (file) {
    OOMTRIAGE_ASSIGN_OR_RETURN(CheckInput input, read_config_input(*file, facts.trainer));
    if (script && input.config) parsers::apply_script(*input.config, *script);
    if (input.config) {
      const auto precision = launcher_precision(
          launch, script, input.config->slots.count("train.dtype") > 0, input.assumptions);
      const auto dtype =
          precision ? parsers::decode(parsers::Codec::kDtype, *precision) : std::nullopt;
      if (dtype && dtype->is_string()) input.config->dtype = dtype->get<std::string>();
    }
    if (const auto beside = arguments_beside(facts.printed_arguments); !beside.empty()) {
      input.assumptions.push_back(fmt::format(
          "the command line's own {} not read: {}'s values used", fmt::join(beside, ", "), *file));
    }
    return input;
  }
  if (facts.printed_arguments.empty()) {
    return make_error(ErrorCode::kBadInput,
                      fmt::format("`{}` names no config file (.yaml, .json, .toml) and passes no "
                                  "--arguments to read the job from",
                                  fmt::join(argv, " ")));
  }
  const bool states_precision =
      std::any_of(facts.printed_arguments.begin(), facts.printed_arguments.end(),
                  [](const auto& argument) { return argument.first == "mixed_precision"; });
  if (const auto precision = launcher_precision(launch, script, states_precision, launch_said)) {
    facts.printed_arguments.emplace_back("mixed_precision", *precision);
  }
  // A whole command line shows every setting: one it leaves out takes the trainer's default.
  std::vector<std::string> beside_assumptions;
  const std::vector<parsers::NativeFile> beside =
      files_beside(facts.printed_arguments, beside_assumptions);
  std::optional<parsers::JobConfig> config = parsers::config_from_printed_arguments(
      facts.trainer, facts.printed_arguments, true, "the command line", beside);
  if (config && script) parsers::apply_script(*config, *script);
  if (!config) {
    return make_error(
        ErrorCode::kBadInput,
        fmt::format("`{}`: which trainer it runs is not known from the command line; name it "
                    "with --trainer",
                    fmt::join(argv, " ")));
  }
  config->targets[0].path.clear();  // fixes say "on the trainer's command line"
  CheckInput input;
  input.assumptions = config->problems;
  input.assumptions.insert(input.assumptions.end(), beside_assumptions.begin(),
                           beside_assumptions.end());
  input.assumptions.insert(input.assumptions.end(), launch_said.begin(), launch_said.end());
  input.config = std::move(config);
  return input;
}

}  // namespace

// The launcher's words first (processes, DeepSpeed, FSDP: launch_input.h), then an LLM trainer's
// command, else an image trainer's.
Result<CheckInput> read_command_input(const std::vector<std::string>& argv,
                                      parsers::Trainer trainer) {
  const parsers::LaunchedCommand launched = parsers::read_launcher(argv);
  if (auto llm = read_llm_command_input(launched)) return std::move(*llm);
  std::vector<std::string> launch_said;
  const parsers::DistributedSetup setup =
      launched.setup.any() ? with_distributed_files(launched.setup, "", launch_said)
                           : launched.setup;
  OOMTRIAGE_ASSIGN_OR_RETURN(CheckInput input, read_image_command_input(argv, trainer, setup));
  input.assumptions.insert(input.assumptions.end(), launch_said.begin(), launch_said.end());
  apply_launch(input, setup);
  return input;
}

}  // namespace oomtriage::daemon
