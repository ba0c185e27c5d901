// tests/support/cri_writer.h
//
// Writes what a container runtime writes to /var/log/pods/.../<n>.log for a process's output:
// containerd reads each stream up to '\n' or 16 KiB and writes one CRI line per read,
// "<RFC3339Nano> <stream> <P|F> <content>", P when the line goes on. Tests build container logs
// from plain logs with it and check the decoder gives the plain log back.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace oomtriage::testing {

class CriWriter {
 public:
  explicit CriWriter(size_t max_line = 16384) : max_line_(max_line) {}

  // Appends to the log what the runtime writes for `text` written to the stream (which may end
  // mid-line: the rest waits for the stream's next write, as the runtime's buffer does).
  void write(bool to_stderr, std::string_view text) {
    std::string& pending = pending_[to_stderr ? 1 : 0];
    pending.append(text);
    size_t start = 0;
    while (true) {
      const size_t newline = pending.find('\n', start);
      const size_t line_end = newline == std::string::npos ? pending.size() : newline;
      while (line_end - start >= max_line_) {
        emit(to_stderr, 'P', std::string_view(pending).substr(start, max_line_));
        start += max_line_;
      }
      if (newline == std::string::npos) break;
      emit(to_stderr, 'F', std::string_view(pending).substr(start, newline - start));
      start = newline + 1;
    }
    pending.erase(0, start);
  }

  // The process exits: a stream's unfinished line is written as it is.
  void close() {
    for (int stream = 0; stream < 2; ++stream) {
      if (!pending_[stream].empty()) emit(stream == 1, 'F', pending_[stream]);
      pending_[stream].clear();
    }
  }

  const std::string& log() const { return log_; }

 private:
  void emit(bool to_stderr, char tag, std::string_view content) {
    ++nanos_;
    log_ += fmt::format("2026-11-30T10:{:02}:{:02}.{:09}Z {} {} ", nanos_ / 60000000000 % 60,
                        nanos_ / 1000000000 % 60, nanos_ % 1000000000,
                        to_stderr ? "stderr" : "stdout", tag);
    log_.append(content);
    log_.push_back('\n');
  }

  size_t max_line_;
  std::string pending_[2];
  std::string log_;
  uint64_t nanos_ = 123456789;
};

}  // namespace oomtriage::testing
