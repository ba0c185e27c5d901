// parsers/line_cleaner.cc: the prefix table. One RE2 alternation, applied repeatedly, because
// prefixes stack: "[80746] [rank0]:[E321 02:07:08.408 ProcessGroupNCCL.cpp:607] ..." or
// "2025-07-08 10:39:40 ERROR    !!! Exception ...".
#include "parsers/line_cleaner.h"

#include <re2/re2.h>

#include <cctype>
#include <cstdlib>
#include <cstring>

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
      // "[rank0]: ", "[default3]:", "[RANK 0] ", "[80746] " (log-viewer line number)
      R"(\[(?:(?:rank|default|RANK |Rank )(?P<rank>\d+)|\d+)\]:?)"
      // "(RayWorkerVllm pid=7009) "
      R"(|\([\w-]+ pid=\d+\))"
      // "2025-01-21T23:09:55.550258 - ", "2026-02-16 08:07:29 ", "2024-01-01T00:00:00.1Z "
      R"(|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?(?:\s+-(?:\s|$))?)"
      // "[2025-01-09 02:45:30] ", "[2022-05-05 12:33:52,875] "
      R"(|\[\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?\])"
      // "08/23/2026 00:34:28 - "
      R"(|\d\d/\d\d/\d{4} \d\d:\d\d:\d\d(?:\s+-(?:\s|$))?)"
      // dmesg "[12345.678901] ", "[Mon May  1 12:00:00 2024] "
      R"(|\[ *\d+\.\d+\])"
      R"(|\[\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\])"
      // syslog / journald "May 01 12:00:00 host kernel: "
      R"(|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [\w.\-\[\]]+:)"
      // glog "E0705 15:48:23.150000 434379 torch/x.py:2100] ", "[W1004 01:37:03.19 P.cpp:1538]"
      R"(|\[?[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+(?: +\d+)? [\w./\-]+:\d+\])"
      // diffusers "ERROR - __main__ - " (after its timestamp)
      R"(|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+-\s+[\w.]+\s+-(?:\s|$))"
      // "ERROR:root:", "INFO:dataset.image_video_dataset:", "ERROR    | ", "INFO     ", "WARN - "
      R"(|(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL|TRACE|SUCCESS)(?::[\w.]*:|\s*\|\s*|\s+-\s+|\s+))"
      // "[INFO] ", "[ERROR|trainer.py:2128] "
      R"(|\[(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)(?:\|[\w.]+:\d+)?\])"
      // diffusers "- INFO - __main__ - " (after its timestamp), HF explicit format ">> "
      R"(|-\s+(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+-\s+[\w.]+\s+-(?:\s|$))"
      R"(|>>\s)"
      // loguru "| 2024-08-21 22:56:04 | autotrain.trainers.common:wrapper:121 - "
      R"(|\|\s+(?:[\w.]+:[\w<>]+:\d+\s+-\s)?)"
      // Kubernetes CRI "stdout F "
      R"(|(?:stdout|stderr) [FP] )"
      // markdown residue and blockquotes: "`", "**", "> ", "_"
      R"(|[`*>_']+)"
      R"(|\s+)"
      ")",
      quiet_options());
  return kPrefix;
}

const RE2& ansi_regex() {
  static const RE2 kAnsi(R"(\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_])",
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

CleanLine clean_line(std::string_view raw, std::string& scratch) {
  CleanLine result;
  std::string_view text = raw;
  if (std::memchr(raw.data(), '\x1b', raw.size()) != nullptr) {
    scratch = strip_ansi(raw);
    text = scratch;
  }
  const RE2& prefix = prefix_regex();
  for (int round = 0; round < 12 && !text.empty(); ++round) {
    const unsigned char first = static_cast<unsigned char>(text.front());
    // Most lines start with a letter that begins no prefix; skip the regex for them.
    if (std::isalpha(first) && !std::isupper(first) && first != 's') {
      break;
    }
    re2::StringPiece rest(text);
    re2::StringPiece rank;
    if (!RE2::Consume(&rest, prefix, &rank) || rest.size() == text.size()) {
      break;
    }
    if (!rank.empty() && !result.rank) {
      result.rank = std::atoi(std::string(rank.data(), rank.size()).c_str());
    }
    text = std::string_view(rest.data(), rest.size());
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) {
    text.remove_suffix(1);
  }
  result.text = text;
  return result;
}

}  // namespace oomtriage::parsers
