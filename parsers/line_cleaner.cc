// parsers/line_cleaner.cc: the prefix table. One RE2 alternation, applied repeatedly, because
// prefixes stack: "[80746] [rank0]:[E321 02:07:08.408 ProcessGroupNCCL.cpp:607] ..." or
// "2025-07-08 10:39:40 ERROR    !!! Exception ...".
#include "parsers/line_cleaner.h"

#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace oomtriage::parsers {
namespace {

RE2::Options quiet_options() {
  RE2::Options options;
  options.set_log_errors(false);
  return options;
}

// Each alternative with a sample it must strip (tested in line_cleaner_test.cc).
const RE2& prefix_regex() {
  static const RE2 kPrefix(
      "^(?:"
      // "[rank0]: ", "[default3]:", "[RANK 0] ", "[Rank 1]", Lightning's "[rank: 0] ",
      // "[80746] " (log-viewer line number)
      R"(\[(?:(?:rank|Rank|RANK|default)(?:: ?| |=)?(?P<rank>\d+)|\d+)\]:?)"
      // "(RayWorkerVllm pid=7009) ", "(pid=3959, ip=172.31.41.219) "
      R"(|\((?:[\w-]+ )?pid=\d+(?:,\s*ip=[\w.:]+)?\))"
      // "2025-01-21T23:09:55.550258 - ", "2026-02-16 08:07:29 ", "2024-01-01T00:00:00.1Z ",
      // GitHub Actions "2026-01-01T00:00:00.0000000Z "
      R"(|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?(?:\s+-(?:\s|$))?)"
      // "[2025-01-09 02:45:30] ", "[2022-05-05 12:33:52,875] "
      R"(|\[\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?\])"
      // "08/23/2026 00:34:28 - "
      R"(|\d\d/\d\d/\d{4} \d\d:\d\d:\d\d(?:\s+-(?:\s|$))?)"
      // a time alone: "10:00:00 | ERROR | ", "[19:27:22] " (MXNet, some rich consoles)
      R"(|\[\d\d:\d\d:\d\d(?:[.,]\d+)?\])"
      R"(|\d\d:\d\d:\d\d(?:[.,]\d+)?(?:\s|$))"
      // dmesg "[12345.678901] ", "[Mon May  1 12:00:00 2024] "
      R"(|\[ *\d+\.\d+\])"
      R"(|\[\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\])"
      // after a timestamp, a host and a program with its pid: "host root[14429] DEBUG ..."
      R"(|[\w.\-]+ [\w.\-]+\[\d+\]:? )"
      // a logger's dotted name in a "| LEVEL | name | " layout (fairseq): "fairseq.trainer | "
      R"(|[a-z_]\w*(?:\.\w+)+\s+\|\s)"
      // syslog / journald "May 01 12:00:00 host kernel: "
      R"(|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [\w.\-\[\]]+:)"
      // glog "E0705 15:48:23.150000 434379 torch/x.py:2100] ", "[W1004 01:37:03.19 P.cpp:1538]"
      R"(|\[?[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+(?: +\d+)? [\w./\-]+:\d+\])"
      // diffusers "ERROR - __main__ - " (after its timestamp)
      R"(|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+-\s+[\w.]+\s+-(?:\s|$))"
      // "ERROR:root:", "INFO:dataset.image_video_dataset:", "ERROR    | ", "INFO     ", "WARN - "
      R"(|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|TRACE|SUCCESS)(?::[\w.]*:|\s*\|\s*|\s+-\s+|\s+))"
      // "[INFO] ", "[ERROR|trainer.py:2128] ", a level with a rank: "[ERROR rank1] ",
      // "[WARNING|rank 3]"
      R"(|\[(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)(?:\|[\w.]+:\d+)?)"
      R"((?:[ |,:]+(?:rank|Rank|RANK)(?:: ?| |=)?(?P<level_rank>\d+))?\])"
      // a source location: "[trainer.py:88] ", DeepSpeed's "[stage3.py:2657:step] "
      R"(|\[[\w.\-/]+\.\w+:\d+(?::[\w<>.]+)?\])"
      // diffusers "- INFO - __main__ - " (after its timestamp), HF explicit format ">> "
      R"(|-\s+(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+-\s+[\w.]+\s+-(?:\s|$))"
      R"(|>>\s)"
      // pytest's own traceback: "INTERNALERROR> "
      R"(|INTERNALERROR>\s?)"
      // loguru "| 2024-08-21 22:56:04 | autotrain.trainers.common:wrapper:121 - ", and its
      // location alone after "| INFO     | ": "mod:fn:12 - ", "__main__:<module>:5 - "
      R"(|\|\s+(?:[\w.]+:[\w<>]+:\d+\s+-\s)?)"
      R"(|[\w.]+:[\w<>]+:\d+\s+-\s)"
      // Kubernetes CRI "stdout F "
      R"(|(?:stdout|stderr) [FP] )"
      // ComfyUI's "## Error Details" report: "- **Exception Type:** ", "- **Exception Message:** "
      R"(|(?:[-*+]\s+)?(?:\*\*)?Exception (?:Type|Message)(?:\*\*)?:(?:\*\*)?)"
      // srun --label "0: ", " 12: " (the task id); pdsh "node-3: ", "gpu01.cluster: " (a
      // lower-case host name with a digit in it)
      R"(|(?P<task>\d{1,5}): )"
      R"(|[a-z][a-z.\-]*\d[a-z0-9.\-]*: )"
      // markdown residue and blockquotes: "`", "**", "> ", "_", a list bullet "- "
      R"(|[`*>_']+)"
      R"(|[-+]\s)"
      R"(|\s+)"
      ")",
      quiet_options());
  return kPrefix;
}

struct PrefixGroups {
  int count = 0;
  int rank = -1;
  int level_rank = -1;
  int task = -1;
};

const PrefixGroups& prefix_groups() {
  static const PrefixGroups kGroups = [] {
    PrefixGroups groups;
    const RE2& regex = prefix_regex();
    groups.count = regex.NumberOfCapturingGroups();
    const auto& named = regex.NamedCapturingGroups();
    auto index = [&](const char* name) {
      auto it = named.find(name);
      return it == named.end() ? -1 : it->second;
    };
    groups.rank = index("rank");
    groups.level_rank = index("level_rank");
    groups.task = index("task");
    return groups;
  }();
  return kGroups;
}

// Lower-case letters start no prefix except a host name ("node-3: "), loguru's location
// ("mod:fn:12 - "), a CRI stream ("stdout F "), a host and a program ("host root[14429] ") and a
// logger's name ("fairseq.trainer | "): the regex runs only when the first word runs into a ':'
// (or starts with 's'), or into a space before a '|' or a word with a '['.
bool may_start_prefix(std::string_view text) {
  const unsigned char first = static_cast<unsigned char>(text.front());
  if (!std::isalpha(first) || std::isupper(first) || first == 's') return true;
  const size_t limit = std::min<size_t>(text.size(), 96);
  auto word_char = [](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '-' || c == '_' || c == '<' || c == '>';
  };
  for (size_t i = 1; i < limit; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == ':') return true;
    if (c == ' ') {
      size_t j = i;
      while (j < limit && text[j] == ' ') ++j;
      if (j < limit && text[j] == '|') return true;
      while (j < limit && word_char(static_cast<unsigned char>(text[j]))) ++j;
      return j < limit && text[j] == '[';
    }
    if (!word_char(c)) return false;
  }
  return false;
}

// A rank prefix names "rank"/"RANK"/"default", or is srun's task label "N: ".
bool may_carry_rank(std::string_view prefix) {
  if (prefix.find("ank") != std::string_view::npos ||
      prefix.find("ANK") != std::string_view::npos ||
      prefix.find("default") != std::string_view::npos) {
    return true;
  }
  return std::isdigit(static_cast<unsigned char>(prefix.front())) && prefix.size() >= 2 &&
         prefix.substr(prefix.size() - 2) == ": ";
}

std::optional<int> to_int(re2::StringPiece digits) {
  if (digits.empty() || digits.size() > 6) return std::nullopt;
  return std::atoi(std::string(digits.data(), digits.size()).c_str());
}

const RE2& ansi_regex() {
  static const RE2 kAnsi(
      R"(\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_])",
      quiet_options());
  return kAnsi;
}

}  // namespace

std::string strip_ansi(std::string_view raw) {
  std::string out(raw);
  RE2::GlobalReplace(&out, ansi_regex(), "");
  // A lone ESC left by a cut sequence carries no text.
  std::erase(out, '\x1b');
  return out;
}

Result<Ok> line_cleaner_ok() {
  std::string problems;
  for (const auto& [name, regex] :
       {std::pair<const char*, const RE2*>{"prefix", &prefix_regex()}, {"ansi", &ansi_regex()}}) {
    if (regex->ok()) continue;
    if (!problems.empty()) problems.append("; ");
    problems.append("line_cleaner ").append(name).append(": ").append(regex->error());
  }
  if (!problems.empty()) return make_error(ErrorCode::kBadInput, problems);
  return Ok{};
}

CleanLine clean_line(std::string_view raw, std::string& scratch) {
  CleanLine result;
  std::string_view text = raw;
  if (std::memchr(raw.data(), '\x1b', raw.size()) != nullptr) {
    scratch = strip_ansi(raw);
    text = scratch;
  }
  const RE2& prefix = prefix_regex();
  const PrefixGroups& groups = prefix_groups();
  re2::StringPiece submatch[8];
  const int nsub = std::min(groups.count + 1, 8);
  std::optional<int> task;  // srun's task id: the rank only when no rank prefix names one
  for (int round = 0; round < 16 && !text.empty(); ++round) {
    if (!may_start_prefix(text)) break;
    // The whole prefix first (a DFA pass); the groups only for a prefix that may carry a rank.
    if (!prefix.Match(text, 0, text.size(), RE2::ANCHOR_START, submatch, 1) ||
        submatch[0].empty()) {
      break;
    }
    if (may_carry_rank(std::string_view(submatch[0].data(), submatch[0].size())) && nsub > 1 &&
        prefix.Match(text, 0, text.size(), RE2::ANCHOR_START, submatch, nsub)) {
      for (int group : {groups.rank, groups.level_rank}) {
        if (group > 0 && group < nsub && !result.rank) result.rank = to_int(submatch[group]);
      }
      if (groups.task > 0 && groups.task < nsub && !task) task = to_int(submatch[groups.task]);
    }
    text.remove_prefix(submatch[0].size());
  }
  if (!result.rank) result.rank = task;
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  result.text = text;
  return result;
}

}  // namespace oomtriage::parsers
