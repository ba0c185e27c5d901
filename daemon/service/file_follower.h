// daemon/service/file_follower.h
//
// One followed log: its descriptor and identity, how far it was read, the analyzer its bytes go
// to, and the checkpoint the store last accepted. A read first checks that the last bytes read
// are still where they were (a copytruncated or rewritten file is a new generation, read from
// byte 0), skips the NUL hole copytruncate leaves, and feeds at most a budget of bytes. Offsets
// move for good only through committed(): after a refused commit, rewind() goes back to the
// store's checkpoint and the same bytes are read again, so no event is skipped.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "parsers/cri_log.h"
#include "parsers/log_analyzer.h"

namespace oomtriage::daemon {

// Where the store says a file's reading stands (and where a new reader of it starts).
struct Checkpoint {
  uint64_t offset = 0;
  int64_t line = 1;
  std::string analyzer_state = "{}";
  int64_t generation = 0;
};

class FileFollower {
 public:
  // Takes `fd` (an open descriptor of `path`, whose (dev, ino) are given); reading starts at
  // `start`, with the analyzer state saved there.
  // A `cri` log (kubelet's container log format) is decoded before the analyzer: its events'
  // offsets and lines are the content's, its checkpoints the file's raw offset at a line end
  // with the decoder's state beside the analyzer's.
  FileFollower(std::string path, parsers::Trainer trainer, int fd, uint64_t dev, uint64_t ino,
               const Checkpoint& start, bool cri = false);
  FileFollower(const FileFollower&) = delete;
  FileFollower& operator=(const FileFollower&) = delete;
  ~FileFollower();

  const std::string& path() const { return path_; }
  uint64_t dev() const { return dev_; }
  uint64_t ino() const { return ino_; }
  int fd() const { return fd_; }
  uint64_t read_pos() const { return read_pos_; }
  int64_t generation() const { return generation_; }
  parsers::LogAnalyzer& analyzer() { return *analyzer_; }
  const parsers::LogAnalyzer& analyzer() const { return *analyzer_; }
  const Checkpoint& last_committed() const { return committed_; }

  // The file does not hold what was read any more: it is shorter than the read position, or
  // other bytes stand where the last read ended (truncated and written past the old offset,
  // rewritten in place).
  bool rewritten() const;
  // Reading starts over at byte 0 with a new analyzer, as the next generation.
  void restart();

  struct Read {
    uint64_t bytes = 0;      // fed to the analyzer
    bool more = false;       // the budget ran out before the end of the file
    bool rewritten = false;  // see rewritten(): nothing was fed; restart() and read again
    int error = 0;           // errno of a failed read
  };
  // Feeds up to `budget` new bytes to the analyzer through `buffer` (which must hold more than
  // kTailBytes). Usually one pread(2), which also checks that the last bytes read are unchanged.
  Read read(size_t budget, std::span<char> buffer);

  // What a commit now would store: the analyzer's resume point and state, this generation.
  Checkpoint checkpoint() const;
  // The store accepted `checkpoint`.
  void committed(const Checkpoint& checkpoint);
  // The store refused: back to the last accepted checkpoint, to read the same bytes again.
  void rewind();

  // Whether the store holds this generation's head fingerprint (or needs it once a KiB exists).
  bool fingerprinted() const { return fingerprinted_; }
  void set_fingerprinted() { fingerprinted_ = true; }

  // The analyzer's counters since the last call (for metrics).
  uint64_t take_new_records();
  uint64_t take_new_cut_records();

  // Descriptors are bounded: an idle follower may give its descriptor back and get one later.
  bool is_open() const { return fd_ >= 0; }
  void close_descriptor();
  void adopt_descriptor(int fd) { fd_ = fd; }
  // Whether `candidate` holds the bytes this follower read last (so it is the same file).
  bool holds_last_read(int candidate) const;

 private:
  // A new analyzer (and decoder) where `checkpoint` says.
  void start_at(const Checkpoint& checkpoint);
  void feed(std::string_view bytes);

  std::string path_;
  parsers::Trainer trainer_;
  int fd_;
  uint64_t dev_;
  uint64_t ino_;
  uint64_t read_pos_ = 0;
  int64_t generation_ = 0;
  std::string tail_;  // the last bytes fed, ending at read_pos_
  std::unique_ptr<parsers::LogAnalyzer> analyzer_;
  bool cri_;
  parsers::CriDecoder decoder_;  // cri_ only
  uint64_t content_pos_ = 0;     // cri_: the content offset of the next byte for the analyzer
  std::string content_;          // cri_: the decoded bytes of one read
  Checkpoint committed_;
  bool fed_any_;  // false while only a leading NUL hole was read in this generation
  bool fingerprinted_ = false;
  uint64_t records_counted_ = 0;
  uint64_t cut_counted_ = 0;
};

}  // namespace oomtriage::daemon
