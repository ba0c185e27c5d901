// parsers/progress.cc: a hand-written tqdm frame reader (it runs on every frame, so no regex)
// and the bar-description table (it runs once per distinct description).
#include "parsers/progress.h"

#include "parsers/stage_lexicon.h"

#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
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

bool is_key_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '/' || c == '.' ||
         c == '-';
}

// "loss", "train_loss", "avr_loss", "loss/total", "lr", "lr_unet", "learning_rate".
bool names_loss_or_rate(std::string_view key) {
  std::string lower(key);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("loss") != std::string::npos || lower.find("learning_rate") != std::string::npos) {
    return true;
  }
  const auto part = [&](size_t at) {
    const bool starts = at == 0 || !std::isalpha(static_cast<unsigned char>(lower[at - 1]));
    const bool ends =
        at + 2 == lower.size() || !std::isalpha(static_cast<unsigned char>(lower[at + 2]));
    return starts && ends;
  };
  for (size_t at = lower.find("lr"); at != std::string::npos; at = lower.find("lr", at + 1)) {
    if (part(at)) return true;
  }
  return false;
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

// "steps:  12%|█▏        | 120/1000 [01:2": a frame cut at the terminal's width. Needs the
// percentage, the closed bar and the full "N/T" counter; what follows it must be cut or a time.
std::optional<ProgressFrame> parse_cut_frame(std::string_view record) {
  const size_t pct = record.find("%|");
  if (pct == std::string_view::npos) return std::nullopt;
  const size_t bar_end = record.find('|', pct + 2);
  if (bar_end == std::string_view::npos) return std::nullopt;
  size_t i = bar_end + 1;
  if (i >= record.size() || record[i] != ' ') return std::nullopt;
  ++i;
  const size_t start = i;
  while (i < record.size() && is_digit(record[i])) ++i;
  if (i == start || i >= record.size() || record[i] != '/') return std::nullopt;
  const size_t slash = i++;
  while (i < record.size() && is_digit(record[i])) ++i;
  if (i == slash + 1) return std::nullopt;
  const std::string_view rest = record.substr(i);
  if (!(rest.empty() || rest == " " ||
        (rest.size() >= 2 && rest.substr(0, 2) == " [" &&
         (rest.size() == 2 || is_digit(rest[2]))))) {
    return std::nullopt;
  }
  if (rest.find(']') != std::string_view::npos) return std::nullopt;
  ProgressFrame frame;
  frame.n = parse_count(record.substr(start, slash - start));
  frame.total = parse_count(record.substr(slash + 1, i - slash - 1));
  // Text glued after the cut time ("[00:0Killed") is still read by the caller.
  size_t end = i + std::min<size_t>(rest.size(), 2);
  while (end < record.size() && (is_digit(record[end]) || record[end] == ':')) ++end;
  frame.end = end;
  std::string_view head = trim(record.substr(0, pct));
  while (!head.empty() && (is_digit(head.back()) || head.back() == ' ')) head.remove_suffix(1);
  head = trim(head);
  if (!head.empty() && head.back() == ':') head.remove_suffix(1);
  frame.desc = trim(head);
  return frame;
}

// Rich's bar glyphs, in UTF-8: the line "━", and the half lines "╸" and "╺" at the bar's edge.
constexpr std::string_view kRichLine = "\xe2\x94\x81";
bool rich_glyph_at(std::string_view s, size_t i) {
  if (i + 3 > s.size() || s[i] != '\xe2') return false;
  const std::string_view glyph = s.substr(i, 3);
  return glyph == kRichLine || glyph == "\xe2\x95\xb8" || glyph == "\xe2\x95\xba";
}

bool is_count_token(std::string_view token) {
  const size_t slash = token.find('/');
  return slash != std::string_view::npos && slash > 0 && slash + 1 < token.size() &&
         parse_count(token.substr(0, slash)) && parse_count(token.substr(slash + 1));
}

// The columns Rich prints beside its bar: "14%", "57/400", "0:00:50", "-:--:--", "•", "2.31it/s".
bool is_rich_column(std::string_view token) {
  if (token == "\xe2\x80\xa2" || token == "-:--:--" || token == "?it/s") return true;
  if (is_count_token(token)) return true;
  size_t digits = 0;
  while (digits < token.size() && (is_digit(token[digits]) || token[digits] == '.')) ++digits;
  if (digits == 0) return false;
  const std::string_view unit = token.substr(digits);
  if (unit == "%" || unit == "it/s" || unit == "s/it") return true;
  return starts_with_time(token) && unit.find_first_not_of(":0123456789") == std::string_view::npos;
}

// "Epoch 0/9  ━━━━━━━━━━━╸━━━━━━ 57/400 0:00:50 • 0:05:09 2.31it/s v_num: 0 loss: 2.3" (Rich,
// as PyTorch Lightning's RichProgressBar draws it). The count is the first "N/T" among the
// columns right after the bar, else a lone "N/T" before it; the text before the bar describes
// it. Coloured frames are read after their escapes are removed.
std::optional<ProgressFrame> parse_rich_frame(std::string_view record) {
  const size_t first = record.find(kRichLine);
  if (first == std::string_view::npos || record.find('\x1b') != std::string_view::npos) {
    return std::nullopt;
  }
  size_t start = first;
  while (start >= 3 && rich_glyph_at(record, start - 3)) start -= 3;
  size_t end = first;
  while (rich_glyph_at(record, end)) end += 3;
  if (end - start < 3 * 3) return std::nullopt;  // a rule of three or more glyphs, not one dash
  ProgressFrame frame;
  bool columns = false;
  std::string_view tail = record.substr(end);
  while (true) {
    tail = trim(tail);
    const std::string_view token = tail.substr(0, std::min(tail.find(' '), tail.size()));
    if (token.empty() || !is_rich_column(token)) break;
    columns = true;
    if (!frame.n && is_count_token(token)) {
      const size_t slash = token.find('/');
      frame.n = parse_count(token.substr(0, slash));
      frame.total = parse_count(token.substr(slash + 1));
    }
    tail.remove_prefix(token.size());
  }
  std::string_view head = trim(record.substr(0, start));
  if (!frame.n && is_count_token(head)) {
    const size_t slash = head.find('/');
    frame.n = parse_count(head.substr(0, slash));
    frame.total = parse_count(head.substr(slash + 1));
    head = {};
    columns = true;
  }
  if (!columns) return std::nullopt;  // a line of box-drawing characters, not a bar
  frame.training_postfix = has_training_postfix(tail);
  if (!head.empty() && head.back() == ':') head.remove_suffix(1);
  frame.desc = trim(head);
  frame.end = record.size();
  return frame;
}

}  // namespace

bool has_training_postfix(std::string_view postfix) {
  // Keys end at '=' ("loss=0.1") or at ':' before a space and a value ("lr: 1.0e-04").
  for (size_t i = 0; i < postfix.size(); ++i) {
    const char c = postfix[i];
    if (c != '=' && c != ':') continue;
    if (c == ':' && (i + 1 >= postfix.size() || postfix[i + 1] != ' ')) continue;
    size_t start = i;
    while (start > 0 && is_key_char(postfix[start - 1])) --start;
    if (start < i && !is_digit(postfix[start]) &&
        names_loss_or_rate(postfix.substr(start, i - start))) {
      return true;
    }
  }
  return false;
}

namespace {

// A decimal number ("1.40", "4.763e-01", "-0.5") at the start of `text`, finite.
std::optional<double> leading_number(std::string_view text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data() || !std::isfinite(value)) return std::nullopt;
  return value;
}

// The number that ends just before `at`, with at most one space between ("1.40s/it", "1.26 it/s").
std::optional<double> number_before(std::string_view text, size_t at) {
  if (at > 0 && text[at - 1] == ' ') --at;
  size_t start = at;
  while (start > 0 && (is_digit(text[start - 1]) || text[start - 1] == '.')) --start;
  if (start == at) return std::nullopt;
  return leading_number(text.substr(start, at - start));
}

}  // namespace

BarVitals read_bar_vitals(std::string_view text) {
  BarVitals vitals;
  for (const std::string_view unit : {std::string_view("it/s"), std::string_view("s/it")}) {
    for (size_t at = text.find(unit); at != std::string_view::npos && !vitals.steps_per_second;
         at = text.find(unit, at + 1)) {
      const auto figure = number_before(text, at);
      if (!figure || *figure <= 0) continue;
      vitals.steps_per_second = unit == "it/s" ? *figure : 1.0 / *figure;
    }
    if (vitals.steps_per_second) break;
  }
  // Keys end at '=' ("loss=0.1") or at ':' before a space ("loss: 4.763e-01").
  for (size_t i = 0; i < text.size() && !vitals.loss; ++i) {
    const char c = text[i];
    if (c != '=' && c != ':') continue;
    size_t value = i + 1;
    if (c == ':') {
      if (value >= text.size() || text[value] != ' ') continue;
      ++value;
    }
    while (value < text.size() && text[value] == ' ') ++value;
    size_t start = i;
    while (start > 0 && is_key_char(text[start - 1])) --start;
    if (start == i || is_digit(text[start])) continue;
    std::string key(text.substr(start, i - start));
    for (char& k : key) k = static_cast<char>(std::tolower(static_cast<unsigned char>(k)));
    if (key.find("loss") == std::string::npos) continue;
    vitals.loss = leading_number(text.substr(value));
  }
  return vitals;
}

std::optional<ProgressFrame> parse_progress_frame(std::string_view record) {
  const char* data = record.data();
  size_t from = 0;
  while (from < record.size()) {
    const void* hit = std::memchr(data + from, '[', record.size() - from);
    if (hit == nullptr) break;
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
    if (inside.find("/s") == std::string_view::npos &&
        inside.find("s/") == std::string_view::npos) {
      continue;  // tqdm always prints a rate: "1.44it/s", "12.34s/it", "?it/s"
    }
    ProgressFrame frame;
    const auto counter_start = parse_counter(record, bracket - 1, frame);
    if (!counter_start) continue;
    frame.end = close + 1;
    frame.training_postfix = has_training_postfix(inside);
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
      while (!head.empty() && (is_digit(head.back()) || head.back() == ' ' || head.back() == '.')) {
        head.remove_suffix(1);
      }
      // "Progress:|████|  0% 1/4700": a bar format that puts the percentage after the bar.
      if (!head.empty() && head.back() == '|') {
        head.remove_suffix(1);
        const size_t bar_start = head.rfind('|');
        if (bar_start == std::string_view::npos) continue;
        head = head.substr(0, bar_start);
      }
    }
    head = trim(head);
    if (!head.empty() && head.back() == ':') head.remove_suffix(1);
    frame.desc = trim(head);
    return frame;
  }
  if (auto cut = parse_cut_frame(record)) return cut;
  return parse_rich_frame(record);
}

BarClass classify_bar(std::string_view desc, std::string_view job_name, Trainer trainer_guess,
                      bool trainer_rules) {
  static const RE2 kEpochsBar(R"(^epochs?$)");
  static const RE2 kPerEpoch(R"(^(?:step|batch|batches|it|iter)$|\bepoch\b)");
  static const RE2 kGlobalSteps(R"(\bsteps\b)");
  static const RE2 kEpochIndex(R"(\bepoch (\d+)( \d+)?)");

  if (trainer_rules && !desc.empty() && !job_name.empty() && desc == job_name) {
    return bar_class(BarRole::kTrainingSteps, Phase::kTrainStep);
  }
  const Phase phase = stage_of(desc);
  if (phase != Phase::kUnknown && phase != Phase::kTrainStep)
    return bar_class(BarRole::kPhase, phase);
  if (phase == Phase::kTrainStep) {
    const std::string tokens = stage_tokens(desc);
    if (RE2::FullMatch(tokens, kEpochsBar)) return bar_class(BarRole::kEpochs, Phase::kTrainStep);
    // "Epoch 1/10 Steps" counts steps; "Epoch 0", "0/10 * Epoch (train)" and OneTrainer's
    // "step" count the batches of the current epoch.
    if (RE2::PartialMatch(tokens, kPerEpoch) && !RE2::PartialMatch(tokens, kGlobalSteps)) {
      BarClass cls = bar_class(BarRole::kTrainingPerEpoch, Phase::kTrainStep);
      int epoch = 0;
      re2::StringPiece total;
      if (RE2::PartialMatch(tokens, kEpochIndex, &epoch, &total)) {
        cls.first_epoch = epoch == 0 || (epoch == 1 && !total.empty());
        cls.epoch = epoch;
        cls.epoch_has_total = !total.empty();
      }
      return cls;
    }
    return bar_class(BarRole::kTrainingSteps, Phase::kTrainStep);
  }
  if (!trainer_rules) return {};
  // HF Trainer's training bar has no description; pipelines' and quantizers' bars neither.
  if (desc.empty()) {
    if (trainer_guess == Trainer::kTransformers) {
      return bar_class(BarRole::kTrainingSteps, Phase::kTrainStep);
    }
    return {};
  }
  // AI Toolkit describes its training bar with the job name, which can be anything.
  if (trainer_guess == Trainer::kAiToolkit && job_name.empty()) {
    return bar_class(BarRole::kTrainingSteps, Phase::kTrainStep);
  }
  return {};
}

Result<Ok> progress_patterns_ok() { return stage_lexicon_ok(); }

}  // namespace oomtriage::parsers
