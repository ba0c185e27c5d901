// parsers/progress.cc: a hand-written tqdm frame reader (it runs on every frame, so no regex)
// and the bar-description table (it runs once per distinct description).
#include "parsers/progress.h"

#include <re2/re2.h>

#include <cctype>
#include <cstring>

namespace oomtriage::parsers {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// "01:23", "1:02:03": tqdm's elapsed time right after '['.
bool starts_with_time(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_digit(s[i])) ++i;
  return i > 0 && i + 2 < s.size() && s[i] == ':' && is_digit(s[i + 1]) && is_digit(s[i + 2]);
}

std::optional<int64_t> parse_count(std::string_view s) {
  if (s.empty() || s.size() > 15) return std::nullopt;
  int64_t value = 0;
  for (char c : s) {
    if (!is_digit(c)) return std::nullopt;  // "1.23k" (unit_scale) is no exact count
    value = value * 10 + (c - '0');
  }
  return value;
}

// Parses "N/T" or "Nit" ending just before `end` (the space before '['). Returns the start.
std::optional<size_t> parse_counter(std::string_view record, size_t end, ProgressFrame& frame) {
  size_t start = end;
  while (start > 0 && record[start - 1] != ' ' && record[start - 1] != '|') --start;
  const std::string_view token = record.substr(start, end - start);
  if (token.empty()) return std::nullopt;
  if (const size_t slash = token.find('/'); slash != std::string_view::npos) {
    frame.n = parse_count(token.substr(0, slash));
    const std::string_view total = token.substr(slash + 1);
    if (total != "?") frame.total = parse_count(total);
    if (!is_digit(token.front())) return std::nullopt;
    return start;
  }
  // Unknown total: "57it", "0it".
  size_t digits = 0;
  while (digits < token.size() && (is_digit(token[digits]) || token[digits] == '.')) ++digits;
  if (digits == 0 || digits == token.size()) return std::nullopt;
  frame.n = parse_count(token.substr(0, digits));
  return start;
}

std::optional<ProgressFrame> parse_notebook_widget(std::string_view record, size_t bracket) {
  // " [ 501/1500 06:35 < 13:11, 1.26 it/s, Epoch 1/3]"
  size_t i = bracket + 1;
  while (i < record.size() && record[i] == ' ') ++i;
  const size_t start = i;
  while (i < record.size() && (is_digit(record[i]) || record[i] == '/')) ++i;
  const std::string_view token = record.substr(start, i - start);
  const size_t slash = token.find('/');
  if (slash == std::string_view::npos || i >= record.size() || record[i] != ' ') {
    return std::nullopt;
  }
  if (!starts_with_time(record.substr(i + 1))) return std::nullopt;
  const size_t close = record.find(']', i);
  if (close == std::string_view::npos || record.find(" < ", i) > close) return std::nullopt;
  ProgressFrame frame;
  frame.n = parse_count(token.substr(0, slash));
  frame.total = parse_count(token.substr(slash + 1));
  frame.end = close + 1;
  frame.notebook = true;
  return frame;
}

}  // namespace

std::optional<ProgressFrame> parse_progress_frame(std::string_view record) {
  const char* data = record.data();
  size_t from = 0;
  while (from < record.size()) {
    const void* hit = std::memchr(data + from, '[', record.size() - from);
    if (hit == nullptr) return std::nullopt;
    const size_t bracket = static_cast<size_t>(static_cast<const char*>(hit) - data);
    from = bracket + 1;
    const std::string_view after = record.substr(bracket + 1);
    if (!starts_with_time(after)) {
      if (!after.empty() && after.front() == ' ') {
        if (auto widget = parse_notebook_widget(record, bracket)) return widget;
      }
      continue;
    }
    if (bracket < 2 || record[bracket - 1] != ' ') continue;
    const size_t close = record.find(']', bracket);
    if (close == std::string_view::npos) continue;
    const std::string_view inside = record.substr(bracket + 1, close - bracket - 1);
    if (inside.find("/s") == std::string_view::npos && inside.find("s/") == std::string_view::npos) {
      continue;  // tqdm always prints a rate: "1.44it/s", "12.34s/it", "?it/s"
    }
    ProgressFrame frame;
    const auto counter_start = parse_counter(record, bracket - 1, frame);
    if (!counter_start) continue;
    frame.end = close + 1;
    // What precedes the counter: "desc: 12%|bar| " or "desc: 12% " or "desc: ".
    std::string_view head = record.substr(0, *counter_start);
    head = trim(head);
    if (!head.empty() && head.back() == '|') {
      head.remove_suffix(1);
      const size_t bar_start = head.rfind('|');
      if (bar_start == std::string_view::npos) continue;
      head = trim(head.substr(0, bar_start));
    }
    if (!head.empty() && head.back() == '%') {
      head.remove_suffix(1);
      while (!head.empty() && (is_digit(head.back()) || head.back() == ' ')) head.remove_suffix(1);
    }
    head = trim(head);
    if (!head.empty() && head.back() == ':') head.remove_suffix(1);
    frame.desc = trim(head);
    return frame;
  }
  return std::nullopt;
}

BarClass classify_bar(std::string_view desc, std::string_view job_name, Trainer trainer_guess) {
  static const RE2::Options kOptions = [] {
    RE2::Options options;
    options.set_log_errors(false);
    options.set_case_sensitive(false);
    return options;
  }();
  // Order matters: "validation steps" is sampling, "Epoch 1/10 Steps" is training.
  static const RE2 kSampling(
      R"(generating (?:samples|images)|sampl|valid|eval|predict|decod|inference|denois|test\b)",
      kOptions);
  static const RE2 kLatents(R"(latent)", kOptions);
  static const RE2 kTextEmbeddings(R"(text.?embed|text.?encoder|prompt.?embed)", kOptions);
  static const RE2 kQuantize(R"(quantiz)", kOptions);
  static const RE2 kLoading(R"(loading|checkpoint shards|fetching|download)", kOptions);
  static const RE2 kCaching(R"(cach)", kOptions);
  static const RE2 kSteps(R"(\bsteps\b|\btrain|\biter)", kOptions);
  static const RE2 kPerEpoch(R"(\bepoch|^step$|^batch)", kOptions);

  if (!desc.empty() && !job_name.empty() && desc == job_name) {
    return {BarRole::kTrainingSteps, Phase::kTrainStep};
  }
  if (RE2::PartialMatch(desc, kSampling)) return {BarRole::kPhase, Phase::kSampling};
  if (RE2::PartialMatch(desc, kLatents)) return {BarRole::kPhase, Phase::kCacheLatents};
  if (RE2::PartialMatch(desc, kTextEmbeddings)) {
    return {BarRole::kPhase, Phase::kCacheTextEmbeddings};
  }
  if (RE2::PartialMatch(desc, kQuantize)) return {BarRole::kPhase, Phase::kQuantize};
  if (RE2::PartialMatch(desc, kLoading)) return {BarRole::kPhase, Phase::kModelLoad};
  if (RE2::PartialMatch(desc, kCaching)) return {BarRole::kPhase, Phase::kCacheLatents};
  // "Epoch 1/10 Steps" counts steps; "0/10 * Epoch (train)" and OneTrainer's "step" count
  // batches of the current epoch.
  static const RE2 kStepWord(R"(\bsteps\b)", kOptions);
  if (RE2::PartialMatch(desc, kPerEpoch) && !RE2::PartialMatch(desc, kStepWord)) {
    return {BarRole::kTrainingPerEpoch, Phase::kTrainStep};
  }
  if (RE2::PartialMatch(desc, kSteps)) return {BarRole::kTrainingSteps, Phase::kTrainStep};
  if (desc.empty()) {
    // HF Trainer's training bar has no description; so do pipeline and quantizer bars.
    if (trainer_guess == Trainer::kTransformers) {
      return {BarRole::kTrainingSteps, Phase::kTrainStep};
    }
    return {};
  }
  // AI Toolkit describes its training bar with the job name, which can be anything.
  if (trainer_guess == Trainer::kAiToolkit && job_name.empty()) {
    return {BarRole::kTrainingSteps, Phase::kTrainStep};
  }
  return {};
}

}  // namespace oomtriage::parsers
