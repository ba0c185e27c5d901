// daemon/service/file_follower.cc: pread(2) into the analyzer.
#include "daemon/service/file_follower.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "daemon/service/file_identity.h"

namespace oomtriage::daemon {

FileFollower::FileFollower(std::string path, parsers::Trainer trainer, int fd, uint64_t dev,
                           uint64_t ino, const Checkpoint& start, bool cri)
    : path_(std::move(path)),
      trainer_(trainer),
      fd_(fd),
      dev_(dev),
      ino_(ino),
      read_pos_(start.offset),
      generation_(start.generation),
      cri_(cri),
      committed_(start),
      fed_any_(start.offset > 0) {
  start_at(start);
  if (fd_ >= 0) tail_ = tail_before(fd_, read_pos_);
}

FileFollower::~FileFollower() { close_descriptor(); }

void FileFollower::start_at(const Checkpoint& at) {
  parsers::AnalyzerOptions options;
  options.trainer = trainer_;
  if (at.offset == 0 && at.analyzer_state == "{}") {
    analyzer_ = std::make_unique<parsers::LogAnalyzer>(options);
    decoder_ = parsers::CriDecoder();
    content_pos_ = 0;
    return;
  }
  if (!cri_) {
    analyzer_ =
        std::make_unique<parsers::LogAnalyzer>(options, at.analyzer_state, at.offset, at.line);
    return;
  }
  // {"cri": the decoder's state, "content_offset": where the analyzer stands, "analyzer": its
  // state}; a state without them (written before the log was read as CRI) starts the content
  // at the raw offset.
  const nlohmann::json j = nlohmann::json::parse(at.analyzer_state, nullptr, false);
  const bool wrapped = j.is_object() && j.contains("cri") && j["cri"].is_string() &&
                       j.value("content_offset", nlohmann::json()).is_number_unsigned() &&
                       j.value("analyzer", nlohmann::json()).is_string();
  content_pos_ = wrapped ? j["content_offset"].get<uint64_t>() : at.offset;
  if (!wrapped || !decoder_.restore(j["cri"].get<std::string>(), at.offset)) {
    decoder_.restore("{\"stdout\": \"\", \"stderr\": \"\"}", at.offset);
  }
  analyzer_ = std::make_unique<parsers::LogAnalyzer>(
      options, wrapped ? j["analyzer"].get<std::string>() : std::string("{}"), content_pos_,
      at.line);
}

void FileFollower::feed(std::string_view bytes) {
  if (!cri_) {
    analyzer_->feed(bytes);
    return;
  }
  content_.clear();
  decoder_.feed(bytes, content_);
  analyzer_->feed(content_);
  content_pos_ += content_.size();
}

bool FileFollower::rewritten() const {
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) return false;
  if (static_cast<uint64_t>(st.st_size) < read_pos_) return true;
  return read_pos_ > 0 && !holds_last_read(fd_);
}

bool FileFollower::holds_last_read(int candidate) const {
  return bytes_at(candidate, read_pos_ - tail_.size(), tail_.size()) == tail_;
}

void FileFollower::restart() {
  ++generation_;
  read_pos_ = 0;
  tail_.clear();
  committed_ = {0, 1, "{}", generation_};
  start_at(committed_);
  records_counted_ = 0;
  cut_counted_ = 0;
  fed_any_ = false;
  fingerprinted_ = false;  // the head is new content
}

FileFollower::Read FileFollower::read(size_t budget, std::span<char> buffer) {
  Read result;
  if (fd_ < 0) return result;
  while (budget > 0) {
    // One pread brings the last bytes read and what follows them: when those bytes are still
    // there the file was neither truncated nor rewritten, and no fstat is needed.
    const size_t keep = tail_.size();
    const size_t want = std::min(buffer.size(), keep + budget);
    const ssize_t n = ::pread(fd_, buffer.data(), want, static_cast<off_t>(read_pos_ - keep));
    if (n < 0) {
      if (errno == EINTR) continue;
      result.error = errno;
      break;
    }
    const size_t got = static_cast<size_t>(n);
    if (got < keep || std::memcmp(buffer.data(), tail_.data(), keep) != 0) {
      result.rewritten = true;
      break;
    }
    if (got == keep) break;  // nothing new
    std::string_view data(buffer.data() + keep, got - keep);
    budget -= data.size();
    const bool at_end = got < want;
    if (!fed_any_) {
      // copytruncate leaves a hole of NULs where the writer's old offset was (of any size): the
      // analyzer starts where the text does, so offsets and lines stay the file's.
      const size_t skip = data.find_first_not_of('\0');
      if (skip == std::string_view::npos) {
        read_pos_ += data.size();
        if (at_end) break;
        continue;
      }
      data.remove_prefix(skip);
      read_pos_ += skip;
      if (read_pos_ > 0) start_at({read_pos_, 1, "{}", generation_});
      fed_any_ = true;
    }
    feed(data);
    read_pos_ += data.size();
    result.bytes += data.size();
    tail_.append(data.substr(data.size() - std::min<size_t>(data.size(), kTailBytes)));
    if (tail_.size() > kTailBytes) tail_.erase(0, tail_.size() - kTailBytes);
    if (at_end) break;  // the end of the file, for now
  }
  result.more = budget == 0;
  return result;
}

Checkpoint FileFollower::checkpoint() const {
  if (!cri_) {
    return {analyzer_->resume_offset(), analyzer_->resume_line(), analyzer_->checkpoint(),
            generation_};
  }
  // The decoder hands on whole records, so the analyzer has usually taken all of it; when it
  // still waits on a record (a '\r' that may be half of "\r\n"), the last checkpoint stands.
  if (analyzer_->resume_offset() != content_pos_) return committed_;
  const nlohmann::json state{{"cri", decoder_.state()},
                             {"content_offset", content_pos_},
                             {"analyzer", analyzer_->checkpoint()}};
  return {decoder_.raw_offset(), analyzer_->resume_line(), state.dump(), generation_};
}

void FileFollower::committed(const Checkpoint& checkpoint) { committed_ = checkpoint; }

void FileFollower::rewind() {
  start_at(committed_);
  read_pos_ = committed_.offset;
  generation_ = committed_.generation;
  tail_ = fd_ >= 0 ? tail_before(fd_, read_pos_) : std::string();
  fed_any_ = read_pos_ > 0;
  records_counted_ = 0;
  cut_counted_ = 0;
}

uint64_t FileFollower::take_new_records() {
  const uint64_t records = analyzer_->records();
  const uint64_t fresh = records - std::min(records, records_counted_);
  records_counted_ = records;
  return fresh;
}

uint64_t FileFollower::take_new_cut_records() {
  const uint64_t cut = analyzer_->truncated_records();
  const uint64_t fresh = cut - std::min(cut, cut_counted_);
  cut_counted_ = cut;
  return fresh;
}

void FileFollower::close_descriptor() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

}  // namespace oomtriage::daemon
