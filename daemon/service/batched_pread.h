// daemon/service/batched_pread.h
//
// Many small reads of many files in two system calls. The busy logs' burst checks
// (read_scheduler.h) read a few hundred bytes of a thousand files five times a second; one pread
// each costs a system call, and in a virtual machine the call, not the copy, is most of the cost
// (docs/reliability.md "Busy logs"). Linux's native AIO takes a batch of reads in one io_submit
// and hands the results back in one io_getevents; on a regular file a buffered read is done at
// once inside io_submit, so nothing is left in flight. Where AIO is refused (a seccomp filter, an
// exhausted fs.aio-max-nr) each read is a plain pread: slower, never different.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace oomtriage::daemon {

class BatchedPread {
 public:
  struct Request {
    int fd = -1;
    uint64_t offset = 0;
    char* buffer = nullptr;
    size_t size = 0;
    ssize_t result = 0;  // as pread's: bytes read, or -1 (the error is not kept)
  };
  static constexpr size_t kMaxBatch = 64;

  // `batch` false makes every read a pread from the start (what happens where AIO is refused).
  explicit BatchedPread(bool batch = true);
  ~BatchedPread();
  BatchedPread(const BatchedPread&) = delete;
  BatchedPread& operator=(const BatchedPread&) = delete;

  // Reads each request into its buffer and sets its result. Any number of requests; they are
  // submitted kMaxBatch at a time.
  void read(std::span<Request> requests);
  // Whether reads are batched (false: AIO was refused and each read is a pread).
  bool batched() const { return context_ != 0; }

 private:
  void read_batch(std::span<Request> requests);

  unsigned long context_ = 0;  // aio_context_t
};

}  // namespace oomtriage::daemon
