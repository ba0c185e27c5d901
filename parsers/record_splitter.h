// parsers/record_splitter.h
//
// Splits a byte stream, fed in chunks of any size, into records. A record ends at '\n', at '\r'
// (tqdm redraws its bar with '\r', so one physical line can hold thousands of frames) or at
// "\r\n". Records longer than the limit are cut and counted, so a 100 MiB line without a newline
// costs at most the limit in memory. Next: log_analyzer.h consumes the records.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace oomtriage::parsers {

inline constexpr size_t kMaxRecordBytes = 64 * 1024;

struct Record {
  std::string_view text;  // without its terminator; valid only during the callback
  uint64_t offset = 0;    // byte offset of text[0] in the stream
  int64_t line = 1;       // 1-based line number ('\n' count before the record, plus one)
  bool truncated = false;
};

// Returns a pointer to the first '\r' or '\n' in [p, end), or end.
const char* find_record_end(const char* p, const char* end);
// Returns a pointer to the last `c` in [begin, end), or null (a tqdm frame's time field is
// found from its end).
const char* find_last(const char* begin, const char* end, char c);

class RecordSplitter {
 public:
  explicit RecordSplitter(size_t max_record_bytes = kMaxRecordBytes)
      : max_record_bytes_(max_record_bytes) {}

  // Calls on_record(const Record&) for every record that `chunk` completes.
  template <class OnRecord>
  void feed(std::string_view chunk, OnRecord&& on_record) {
    feed(chunk, on_record, [](const char* p, const char*, uint64_t, int64_t) {
      return Skipped{p, 0};
    });
  }

  // What a skipper consumed: whole records with their terminators, all inside the chunk.
  struct Skipped {
    const char* next;  // where the first record it did not take starts
    int64_t newlines;  // '\n' terminators among those it took
  };
  // As above, but at the start of each record inside the chunk `skip(p, end, offset, line)` may
  // take records that need no callback (the analyzer's run of progress frames) in one go.
  template <class OnRecord, class Skip>
  void feed(std::string_view chunk, OnRecord&& on_record, Skip&& skip);

  // Emits the last record when the stream does not end with a terminator.
  template <class OnRecord>
  void finish(OnRecord&& on_record);

  uint64_t bytes() const { return consumed_; }
  // Where the first record not yet emitted starts, and its line: a safe place to resume.
  uint64_t pending_record_offset() const { return record_offset_; }
  int64_t pending_record_line() const { return record_line_; }
  // Starts counting at `offset` and `line`, as if the bytes before had been fed.
  void start_at(uint64_t offset, int64_t line) {
    consumed_ = record_offset_ = offset;
    line_ = record_line_ = line;
  }
  int64_t lines() const { return line_; }
  uint64_t truncated_records() const { return truncated_records_; }

 private:
  void append_bounded(const char* p, size_t n) {
    const size_t room = carry_.size() < max_record_bytes_ ? max_record_bytes_ - carry_.size() : 0;
    if (n > room) {
      carry_truncated_ = true;
    }
    carry_.append(p, n < room ? n : room);
  }

  size_t max_record_bytes_;
  std::string carry_;  // the unfinished record at the end of the last chunk
  bool carry_truncated_ = false;
  bool carry_open_ = false;  // carry_ holds the start of a record (possibly empty so far)
  bool pending_cr_ = false;  // the last chunk ended with '\r'; a leading '\n' belongs to it
  uint64_t consumed_ = 0;
  uint64_t record_offset_ = 0;
  int64_t line_ = 1;
  int64_t record_line_ = 1;
  uint64_t truncated_records_ = 0;
};

template <class OnRecord, class Skip>
void RecordSplitter::feed(std::string_view chunk, OnRecord&& on_record, Skip&& skip) {
  const char* p = chunk.data();
  const char* const end = p + chunk.size();
  if (pending_cr_ && p != end) {
    pending_cr_ = false;
    if (*p == '\n') {
      ++p;
      ++line_;
      record_line_ = line_;
      record_offset_ = consumed_ + 1;
    }
  }
  while (p != end) {
    if (!carry_open_) {
      const Skipped skipped =
          skip(p, end, consumed_ + static_cast<uint64_t>(p - chunk.data()), line_);
      if (skipped.next != p) {
        p = skipped.next;
        line_ += skipped.newlines;
        record_line_ = line_;
        record_offset_ = consumed_ + static_cast<uint64_t>(p - chunk.data());
        if (p == end) break;
      }
    }
    const char* eol = find_record_end(p, end);
    if (eol == end) {
      append_bounded(p, static_cast<size_t>(end - p));
      carry_open_ = true;
      break;
    }
    Record record;
    record.offset = record_offset_;
    record.line = record_line_;
    const size_t n = static_cast<size_t>(eol - p);
    if (carry_open_) {
      append_bounded(p, n);
      record.text = carry_;
      record.truncated = carry_truncated_;
    } else if (n > max_record_bytes_) {
      record.text = std::string_view(p, max_record_bytes_);
      record.truncated = true;
    } else {
      record.text = std::string_view(p, n);
    }
    if (record.truncated) {
      ++truncated_records_;
    }
    on_record(record);
    carry_.clear();
    carry_open_ = false;
    carry_truncated_ = false;

    const char terminator = *eol;
    p = eol + 1;
    bool newline = terminator == '\n';
    if (terminator == '\r') {
      if (p != end && *p == '\n') {
        ++p;
        newline = true;
      } else if (p == end) {
        pending_cr_ = true;
      }
    }
    if (newline) {
      ++line_;
    }
    record_line_ = line_;
    record_offset_ = consumed_ + static_cast<uint64_t>(p - chunk.data());
  }
  consumed_ += chunk.size();
}

template <class OnRecord>
void RecordSplitter::finish(OnRecord&& on_record) {
  if (carry_open_ && !carry_.empty()) {
    Record record;
    record.offset = record_offset_;
    record.line = record_line_;
    record.text = carry_;
    record.truncated = carry_truncated_;
    if (record.truncated) {
      ++truncated_records_;
    }
    on_record(record);
  }
  carry_.clear();
  carry_open_ = false;
  carry_truncated_ = false;
  // Everything fed is emitted: the next record, if more comes, starts where the bytes end.
  record_offset_ = consumed_;
  record_line_ = line_;
}

}  // namespace oomtriage::parsers
