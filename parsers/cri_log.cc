// parsers/cri_log.cc: the CRI line parser and the decoder that joins P fragments per stream.
#include "parsers/cri_log.h"

#include <nlohmann/json.hpp>

#include <cstring>

#include "parsers/record_splitter.h"

namespace oomtriage::parsers {
namespace {

// A raw line this long without a '\n' is not CRI (containerd cuts at 16 KiB): it is handed on.
constexpr size_t kMaxRawLine = 1 << 20;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// "2026-11-30T10:15:00.123456789Z" or with an offset: the date, a 'T', no space.
bool looks_like_timestamp(std::string_view t) {
  return t.size() >= 20 && is_digit(t[0]) && is_digit(t[1]) && is_digit(t[2]) && is_digit(t[3]) &&
         t[4] == '-' && is_digit(t[5]) && is_digit(t[6]) && t[7] == '-' && t[10] == 'T';
}

std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

std::optional<std::string> unhex(std::string_view text) {
  if (text.size() % 2 != 0) return std::nullopt;
  const auto value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  out.reserve(text.size() / 2);
  for (size_t i = 0; i < text.size(); i += 2) {
    const int high = value(text[i]);
    const int low = value(text[i + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    out.push_back(static_cast<char>(high << 4 | low));
  }
  return out;
}

}  // namespace

std::optional<CriLine> parse_cri_line(std::string_view line) {
  const size_t time_end = line.find(' ');
  if (time_end == std::string_view::npos || !looks_like_timestamp(line.substr(0, time_end))) {
    return std::nullopt;
  }
  std::string_view rest = line.substr(time_end + 1);
  CriLine parsed;
  if (rest.substr(0, 7) == "stdout ") {
    parsed.stderr_stream = false;
  } else if (rest.substr(0, 7) == "stderr ") {
    parsed.stderr_stream = true;
  } else {
    return std::nullopt;
  }
  rest.remove_prefix(7);
  // The tags, ':'-separated; the first says whether the line is partial.
  const size_t tags_end = std::min(rest.find(' '), rest.size());
  const std::string_view first_tag = rest.substr(0, std::min(rest.find(':'), tags_end));
  if (first_tag != "P" && first_tag != "F") return std::nullopt;
  parsed.partial = first_tag == "P";
  parsed.content = tags_end < rest.size() ? rest.substr(tags_end + 1) : std::string_view();
  return parsed;
}

bool looks_like_cri(std::string_view head) {
  const size_t end = head.find('\n');
  return end != std::string_view::npos && parse_cri_line(head.substr(0, end)).has_value();
}

void CriDecoder::feed(std::string_view chunk, std::string& out) {
  while (!chunk.empty()) {
    const char* newline = static_cast<const char*>(std::memchr(chunk.data(), '\n', chunk.size()));
    if (newline == nullptr) {
      partial_raw_.append(chunk);
      if (partial_raw_.size() > kMaxRawLine) {
        raw_offset_ += partial_raw_.size();
        ++malformed_lines_;
        out.append(partial_raw_);
        out.push_back('\n');
        partial_raw_.clear();
      }
      return;
    }
    const size_t n = static_cast<size_t>(newline - chunk.data());
    if (partial_raw_.empty()) {
      take_line(chunk.substr(0, n), out);
    } else {
      partial_raw_.append(chunk.substr(0, n));
      take_line(partial_raw_, out);
      partial_raw_.clear();
    }
    chunk.remove_prefix(n + 1);
  }
}

void CriDecoder::take_line(std::string_view line, std::string& out) {
  raw_offset_ += line.size() + 1;
  if (const std::optional<CriLine> parsed = parse_cri_line(line)) {
    hand_on(parsed->stderr_stream ? 1 : 0, parsed->content, parsed->partial, out);
  } else {
    ++malformed_lines_;
    out.append(line);
    out.push_back('\n');
  }
}

void CriDecoder::hand_on(int stream, std::string_view content, bool partial, std::string& out) {
  std::string& held = held_[stream];
  held.append(content);
  if (!partial) held.push_back('\n');
  // Hand on up to the last record end. A '\r' that ends a partial line stays: it may be the
  // first half of a "\r\n" whose '\n' ends the next line of the stream.
  size_t end = held.size();
  if (partial && end > 0 && held[end - 1] == '\r') --end;
  size_t cut = 0;
  for (size_t i = end; i > 0; --i) {
    if (held[i - 1] == '\r' || held[i - 1] == '\n') {
      cut = i;
      break;
    }
  }
  if (cut == 0 && held.size() > kMaxRecordBytes) {
    // A record longer than the analyzer keeps: cut it here, as the analyzer would, so the other
    // stream is not held up behind it.
    held.push_back('\n');
    cut = held.size();
  }
  out.append(held, 0, cut);
  held.erase(0, cut);
}

void CriDecoder::finish(std::string& out) {
  if (!partial_raw_.empty()) {
    const std::string line = std::move(partial_raw_);
    partial_raw_.clear();
    take_line(line, out);
    --raw_offset_;  // that line had no '\n'
  }
  for (std::string& held : held_) {
    out.append(held);
    held.clear();
  }
}

std::string CriDecoder::state() const {
  return nlohmann::json{
      {"stdout", hex(held_[0])}, {"stderr", hex(held_[1])}, {"malformed_lines", malformed_lines_}}
      .dump();
}

bool CriDecoder::restore(std::string_view state, uint64_t raw_offset) {
  *this = CriDecoder();
  raw_offset_ = raw_offset;
  const nlohmann::json j = nlohmann::json::parse(state, nullptr, false);
  if (!j.is_object()) return false;
  const auto field = [&](const char* name) -> std::optional<std::string> {
    const auto it = j.find(name);
    if (it == j.end() || !it->is_string()) return std::nullopt;
    return unhex(it->get<std::string>());
  };
  const std::optional<std::string> out = field("stdout");
  const std::optional<std::string> err = field("stderr");
  if (!out || !err) return false;
  held_[0] = *out;
  held_[1] = *err;
  if (const auto it = j.find("malformed_lines"); it != j.end() && it->is_number_unsigned()) {
    malformed_lines_ = it->get<uint64_t>();
  }
  return true;
}

}  // namespace oomtriage::parsers
