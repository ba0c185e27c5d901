// parsers/analyzer_job_facts.cc: what a log shows about its job, kept as the analyzer reads it:
// the process config AI Toolkit prints at the top, the arguments and config files a trainer
// prints, and the trainer the markers vote for (which also says whose rules apply).
#include "parsers/log_analyzer.h"

#include "parsers/printed_arguments.h"

namespace oomtriage::parsers {

// AI Toolkit prints its process config with json.dumps(indent=4) before anything else: a line
// "{", the body, and a line "}". Only the first one near the top is kept, bounded in size.
void LogAnalyzer::capture_printed_config(std::string_view text) {
  constexpr size_t kMaxPrintedConfigBytes = 256 * 1024;
  constexpr int64_t kSearchRecords = 200;
  if (config_capture_ == ConfigCapture::kLooking) {
    if (text == "{") {
      config_capture_ = ConfigCapture::kCapturing;
      printed_config_ = "{\n";
    } else if (seq_ > kSearchRecords) {
      config_capture_ = ConfigCapture::kDone;
    }
    return;
  }
  printed_config_.append(text);
  printed_config_.push_back('\n');
  if (text == "}") {
    config_capture_ = ConfigCapture::kDone;
  } else if (printed_config_.size() > kMaxPrintedConfigBytes) {
    printed_config_.clear();
    config_capture_ = ConfigCapture::kDone;
  }
}

// Trainers print their arguments and the config files they load near the top; only the first
// namespace and the first names are kept, bounded.
void LogAnalyzer::capture_job_arguments(std::string_view text) {
  constexpr size_t kMaxArguments = 1000;
  if (in_arguments_block_) {
    auto field = parse_field_line(text);
    if (field && printed_arguments_.size() < kMaxArguments) {
      printed_arguments_.push_back(std::move(*field));
      return;
    }
    in_arguments_block_ = false;
  }
  if (printed_arguments_.empty()) {
    if (text.find("Namespace(") != std::string_view::npos) {
      printed_arguments_ = parse_namespace(text);
    } else if (text.size() >= 18 && text.substr(text.size() - 18) == "TrainingArguments(") {
      in_arguments_block_ = true;
    } else if (text.find(".py ") != std::string_view::npos &&
               text.find(" --") != std::string_view::npos) {
      // A launch script's echo: its --config_file is the config the job loads.
      Arguments args = parse_command_line(text);
      for (const auto& [name, value] : args) {
        if (name == "config_file" && !named_config_) named_config_ = value;
        if (name == "dataset_config" && !named_dataset_config_) named_dataset_config_ = value;
      }
      printed_arguments_ = std::move(args);
    }
  }
  if (!named_config_ || !named_dataset_config_) {
    if (auto named = named_config_file(text)) {
      auto& slot = named->dataset ? named_dataset_config_ : named_config_;
      if (!slot) slot = std::move(named->path);
    }
  }
}

LogAnalysis LogAnalyzer::job_facts() const {
  LogAnalysis facts;
  facts.trainer = trainer_guess();
  if (!job_name_.empty()) facts.job_name = job_name_;
  if (config_capture_ == ConfigCapture::kDone) facts.printed_config = printed_config_;
  facts.arguments = arguments_;
  facts.printed_arguments = printed_arguments_;
  facts.named_config = named_config_;
  facts.named_dataset_config = named_dataset_config_;
  return facts;
}

Trainer LogAnalyzer::trainer_guess() const {
  if (options_.trainer != Trainer::kUnknown) return options_.trainer;
  size_t best = 0;
  for (size_t i = 1; i < trainer_votes_.size(); ++i) {
    if (trainer_votes_[i] > trainer_votes_[best]) best = i;
  }
  return static_cast<Trainer>(best);
}

bool LogAnalyzer::rules_on(Trainer trainer) const {
  return trainer == Trainer::kUnknown || trainer != options_.without_rules_of;
}

}  // namespace oomtriage::parsers
