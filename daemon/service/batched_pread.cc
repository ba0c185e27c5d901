// daemon/service/batched_pread.cc: burst checks' reads through one io_submit per batch.
#include "daemon/service/batched_pread.h"

#include <linux/aio_abi.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <array>

namespace oomtriage::daemon {

namespace {

// glibc has no wrappers for the native AIO calls (libaio is a thin layer over these three).
long io_setup(unsigned events, aio_context_t* context) {
  return ::syscall(SYS_io_setup, events, context);
}
long io_destroy(aio_context_t context) { return ::syscall(SYS_io_destroy, context); }
long io_submit(aio_context_t context, long count, iocb** blocks) {
  return ::syscall(SYS_io_submit, context, count, blocks);
}
long io_getevents(aio_context_t context, long min, long max, io_event* events) {
  return ::syscall(SYS_io_getevents, context, min, max, events, nullptr);
}

void pread_one(BatchedPread::Request& request) {
  request.result =
      ::pread(request.fd, request.buffer, request.size, static_cast<off_t>(request.offset));
}

}  // namespace

BatchedPread::BatchedPread(bool batch) {
  aio_context_t context = 0;
  if (batch && io_setup(kMaxBatch, &context) == 0) context_ = context;
}

BatchedPread::~BatchedPread() {
  if (context_ != 0) io_destroy(context_);
}

void BatchedPread::read(std::span<Request> requests) {
  for (size_t at = 0; at < requests.size(); at += kMaxBatch)
    read_batch(requests.subspan(at, std::min(kMaxBatch, requests.size() - at)));
}

void BatchedPread::read_batch(std::span<Request> requests) {
  if (context_ == 0) {
    for (Request& request : requests) pread_one(request);
    return;
  }
  std::array<iocb, kMaxBatch> blocks{};
  std::array<iocb*, kMaxBatch> pointers{};
  for (size_t i = 0; i < requests.size(); ++i) {
    iocb& block = blocks[i];
    block.aio_data = i;
    block.aio_lio_opcode = IOCB_CMD_PREAD;
    block.aio_fildes = static_cast<uint32_t>(requests[i].fd);
    block.aio_buf = reinterpret_cast<uintptr_t>(requests[i].buffer);
    block.aio_nbytes = requests[i].size;
    block.aio_offset = static_cast<int64_t>(requests[i].offset);
    pointers[i] = &block;
  }
  // io_submit stops at the first block it cannot take (a closed descriptor, say): that one is
  // read the plain way and the rest submitted again.
  size_t submitted = 0;
  while (submitted < requests.size()) {
    const long taken = io_submit(context_, static_cast<long>(requests.size() - submitted),
                                 pointers.data() + submitted);
    if (taken <= 0) {
      pread_one(requests[submitted]);
      ++submitted;
      continue;
    }
    // Buffered reads of regular files are done inside io_submit; collecting them does not wait.
    std::array<io_event, kMaxBatch> events{};
    long collected = 0;
    while (collected < taken) {
      const long got =
          io_getevents(context_, taken - collected, taken - collected, events.data() + collected);
      if (got >= 0) {
        collected += got;
      } else if (errno != EINTR) {
        break;
      }
    }
    std::array<bool, kMaxBatch> done{};
    for (long e = 0; e < collected; ++e) {
      const size_t index = events[static_cast<size_t>(e)].data;
      const int64_t result = events[static_cast<size_t>(e)].res;
      requests[index].result = result < 0 ? -1 : static_cast<ssize_t>(result);
      done[index] = true;
    }
    if (collected < taken) {
      // io_getevents refused (it should not): io_destroy waits for what is in flight, and from
      // here on every read is a pread.
      io_destroy(context_);
      context_ = 0;
      for (size_t i = submitted; i < submitted + static_cast<size_t>(taken); ++i)
        if (!done[i]) pread_one(requests[i]);
      for (size_t i = submitted + static_cast<size_t>(taken); i < requests.size(); ++i)
        pread_one(requests[i]);
      return;
    }
    submitted += static_cast<size_t>(taken);
  }
}

}  // namespace oomtriage::daemon
