// parsers/cri_log.h
//
// Container logs as kubelet keeps them under /var/log/pods/<ns>_<pod>_<uid>/<container>/<n>.log,
// in the CRI format: one line per write of the runtime,
//   2026-11-30T10:15:00.123456789Z stderr P <content>
// (timestamp, stream, tags whose first is P for a partial line or F for the full one, a space,
// the content). containerd cuts a line longer than 16 KiB into P fragments; the logical line is
// the P fragments of one stream up to its next F (kubelet's parseCRILog, Fluent Bit's `cri`
// parser). The decoder turns the file into what the trainer wrote, for the analyzer: each
// stream's content in order, only whole records ('\r' or '\n' ended) handed on, so stdout and
// stderr interleave at record boundaries and a tqdm frame or an OOM message cut at 16 KiB is
// whole again. Offsets and lines the analyzer reports are then the content's (what `kubectl logs`
// shows), not the file's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace oomtriage::parsers {

struct CriLine {
  bool stderr_stream = false;
  bool partial = false;  // P: the content goes on in the stream's next line
  std::string_view content;
};

// One line of a CRI log without its '\n', or nullopt when it is not one.
std::optional<CriLine> parse_cri_line(std::string_view line);

// Whether a log's first bytes are CRI lines (its first complete line parses as one).
bool looks_like_cri(std::string_view head);

class CriDecoder {
 public:
  // Appends to `out` the content the raw bytes `chunk` complete. A line that is not CRI (a file
  // that is only partly so) is passed on whole, as a line, and counted.
  void feed(std::string_view chunk, std::string& out);
  // The end of the file: what the streams hold back is handed on.
  void finish(std::string& out);

  // Raw bytes taken as whole lines: a checkpoint may resume reading here with state().
  uint64_t raw_offset() const { return raw_offset_; }
  uint64_t malformed_lines() const { return malformed_lines_; }

  // What a resumed decoder needs besides the raw offset (the streams' held-back content), as
  // JSON text; restore() takes it back (false, and a fresh decoder, on text it cannot read).
  std::string state() const;
  bool restore(std::string_view state, uint64_t raw_offset);

 private:
  void take_line(std::string_view line, std::string& out);
  void hand_on(int stream, std::string_view content, bool partial, std::string& out);

  std::string partial_raw_;  // the unfinished raw line at the end of the last chunk
  std::string held_[2];      // per stream (stdout, stderr): content after its last record end
  uint64_t raw_offset_ = 0;
  uint64_t malformed_lines_ = 0;
};

}  // namespace oomtriage::parsers
