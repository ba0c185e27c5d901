// tests/parsers/oom_patterns_test.cc: fail2ban's rule: every row has samples, every sample
// matches its own row (and no earlier one), and every near miss matches no row.
#include "parsers/oom_patterns.h"

#include <doctest/doctest.h>

#include <set>
#include <string>

#include "parsers/line_cleaner.h"
#include "parsers/oom_figures.h"

using namespace oomtriage::parsers;

namespace {

// What the analyzer does with one raw record: the literal prefilter, clean_line, the table, and
// the figures of an allocator message read from where the match starts.
struct Scanned {
  const OomPattern* pattern = nullptr;
  OomKind kind = OomKind::kCuda;
  std::optional<int> rank;
  std::optional<std::string> exception;
  MemoryFigures figures;
};

std::optional<Scanned> scan(std::string_view raw) {
  if (!may_mention_oom(raw)) return std::nullopt;
  std::string scratch;
  const CleanLine clean = clean_line(raw, scratch);
  const auto match = match_oom(clean.text);
  if (!match) return std::nullopt;
  Scanned out;
  out.pattern = match->pattern;
  out.kind = match->kind;
  out.rank = clean.rank;
  if (auto cls = exception_class(clean.text)) out.exception = std::string(*cls);
  if (match->pattern->allocator_message) {
    out.figures = extract_figures(clean.text.substr(match->begin), match->kind);
  }
  return out;
}

std::optional<OomKind> kind_of(std::string_view raw) {
  const auto s = scan(raw);
  return s ? std::optional<OomKind>(s->kind) : std::nullopt;
}

std::optional<Phase> recovered_phase_of(std::string_view raw) {
  const auto s = scan(raw);
  if (!s || !s->pattern->recovered) return std::nullopt;
  return s->pattern->phase;
}

}  // namespace

TEST_SUITE("parsers::oom_patterns") {
  TEST_CASE("every pattern has samples and each sample is matched by its own row") {
    std::set<std::string_view> names;
    for (const OomPattern& pattern : oom_patterns()) {
      CAPTURE(pattern.name);
      CHECK(names.insert(pattern.name).second);
      REQUIRE_FALSE(pattern.samples.empty());
      for (std::string_view sample : pattern.samples) {
        CAPTURE(sample);
        CHECK(may_mention_oom(sample));
        const auto match = match_oom(sample);
        REQUIRE(match);
        CHECK(match->pattern->name == pattern.name);
      }
    }
  }
  TEST_CASE("near misses match no row") {
    for (std::string_view line : oom_near_misses()) {
      CAPTURE(line);
      CHECK_FALSE(match_oom(line));
    }
  }
  TEST_CASE("the device word picks the kind") {
    CHECK(match_oom("HIP out of memory. Tried to allocate 2.00 MiB")->kind == OomKind::kHip);
    CHECK(match_oom("XPU out of memory. Tried to allocate 2.00 MiB")->kind == OomKind::kXpu);
    CHECK(match_oom("CUDA out of memory. Tried to allocate 2.00 MiB")->kind == OomKind::kCuda);
    CHECK(match_oom("RuntimeError: HIP error: out of memory")->kind == OomKind::kHip);
  }
  TEST_CASE("the exception class is read from the start of the line") {
    CHECK(exception_class("torch.OutOfMemoryError: CUDA out of memory.") ==
          "torch.OutOfMemoryError");
    CHECK(exception_class("RuntimeError: CUDA error: out of memory") == "RuntimeError");
    CHECK(exception_class("OutOfMemoryError                 Traceback (most recent call last)") ==
          "OutOfMemoryError");
    CHECK_FALSE(exception_class("Error running job: CUDA out of memory."));
    CHECK_FALSE(exception_class("Exception in main training loop: x"));
  }

  TEST_CASE("every RE2 of the table, the prefilter and the class pattern compiled") {
    const auto compiled = oom_patterns_ok();
    CHECK_MESSAGE(compiled, (compiled ? "" : compiled.error().message));
    CHECK(oom_table_ok(oom_patterns()));
  }
  TEST_CASE("a pattern that does not compile is reported by name") {
    const std::vector<OomPattern> table = {
        {.name = "fine", .kind = OomKind::kCuda, .regex = "out of memory", .samples = {"x"}},
        {.name = "unclosed", .kind = OomKind::kCuda, .regex = "(out of memory", .samples = {"x"}},
        {.name = "bad-veto",
         .kind = OomKind::kCuda,
         .regex = "OOM",
         .veto = "[z-a]",
         .samples = {"x"}},
        {.name = "bad-also",
         .kind = OomKind::kCuda,
         .regex = "OOM",
         .also = "a{2,1}",
         .samples = {"x"}},
    };
    const auto checked = oom_table_ok(table);
    REQUIRE_FALSE(checked);
    const std::string& error = checked.error().message;
    CHECK(error.find("unclosed") != std::string::npos);
    CHECK(error.find("bad-veto (veto)") != std::string::npos);
    CHECK(error.find("bad-also (also)") != std::string::npos);
    CHECK(error.find("fine") == std::string::npos);
  }

  TEST_CASE("an OOM beside a back-off verb is a recovered event, in any trainer's words") {
    for (const char* line : {
             "OOM Detected, reducing batch/grad size to 2",
             "OM Detected, reducing batch/grad size",  // first letter lost to a tqdm redraw
             "CUDA out of memory, retrying with batch size 4",
             "ut of memory, trying batch size 8",
             "[WARN] OOM detected, reducing batch_size to 16",
             "2026-01-02 10:00:00,123 - WARNING - trainer - GPU OOM detected, reducing batch size "
             "from 8 to 4",
             "Batch size 32 hit OutOfMemoryError, halving to 16",
             "Reducing batch size to 16 after OOM",
         }) {
      CAPTURE(line);
      const auto s = scan(line);
      REQUIRE(s);
      CHECK(s->pattern->recovered);
      CHECK(s->pattern->phase == Phase::kUnknown);
      CHECK(s->kind == OomKind::kCuda);
    }
  }
  TEST_CASE("a recovered OOM takes a phase only when the line names one") {
    CHECK(recovered_phase_of("OOM during training step 120, skipping batch") == Phase::kTrainStep);
    CHECK(recovered_phase_of("Skipping training batch 17 after OOM") == Phase::kTrainStep);
    // Only training skips a batch (fairseq: "OOM in all workers, skipping batch").
    CHECK(recovered_phase_of("Ran out of memory, skipping this batch") == Phase::kTrainStep);
    CHECK(recovered_phase_of("WARNING: OOM at step 120, skipping batch") == Phase::kTrainStep);
    CHECK(recovered_phase_of("OOM in all workers, skipping batch") == Phase::kTrainStep);
    CHECK(recovered_phase_of("Ran out of memory during VAE decoding, retrying with tiled decode") ==
          Phase::kSampling);
    CHECK(recovered_phase_of("Out of memory during validation, skipping validation images for "
                             "this epoch") == Phase::kSampling);
    CHECK(recovered_phase_of("Warning: Ran out of memory when regular VAE decoding, retrying with "
                             "tiled VAE decoding.") == Phase::kSampling);
    CHECK(recovered_phase_of("CUDA out of memory, retrying with batch size 4") == Phase::kUnknown);
  }
  TEST_CASE("a recovered OOM keeps its device and, with the allocator text, its figures") {
    CHECK(kind_of("HIP out of memory, retrying with batch size 2") == OomKind::kHip);
    const auto s = scan(
        "Caught CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of "
        "23.55 GiB of which 1.02 GiB is free. Retrying with batch size 4");
    REQUIRE(s);
    CHECK(s->pattern->recovered);
    CHECK(s->figures.tried_to_allocate_bytes == 2147483648u);
    CHECK(s->figures.gpu_index == 1);
  }
  TEST_CASE("fatal messages, loss-scale overflow, advice and source are not recovered OOMs") {
    const auto fatal = scan(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a "
        "total capacity of 23.55 GiB of which 1.02 GiB is free. Of the allocated memory 21.00 GiB "
        "is allocated by PyTorch, and 200.00 MiB is reserved by PyTorch but unallocated. If "
        "reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
        "documentation for Memory Management  (https://pytorch.org/docs/stable/notes/"
        "cuda.html#environment-variables)");
    REQUIRE(fatal);
    CHECK_FALSE(fatal->pattern->recovered);
    const auto old_fatal = scan(
        "RuntimeError: CUDA out of memory. Tried to allocate 36.00 MiB (GPU 0; 7.93 GiB total "
        "capacity; 130.35 MiB already allocated; 47.06 MiB free; 188.00 MiB reserved in total by "
        "PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to "
        "avoid fragmentation.  See documentation for Memory Management and "
        "PYTORCH_CUDA_ALLOC_CONF");
    REQUIRE(old_fatal);
    CHECK_FALSE(old_fatal->pattern->recovered);
    for (const char* line : {
             "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing "
             "to 32768",
             "if \"out of memory\" in str(e): print(\"retrying\")",
             "    if \"CUDA out of memory\" in str(e):",
             "Tip: if you run out of memory, try reducing --train_batch_size.",
             "OOM again after halving the batch size: not retrying",
         }) {
      CAPTURE(line);
      CHECK_FALSE(scan(line));
    }
  }
  TEST_CASE("accelerate's find_executable_batch_size giving up is a fatal CUDA OOM") {
    const auto s = scan("RuntimeError: No executable batch size found, reached zero.");
    REQUIRE(s);
    CHECK_FALSE(s->pattern->recovered);
    CHECK(s->kind == OomKind::kCuda);
    CHECK(s->exception == "RuntimeError");
  }

  TEST_CASE("ComfyUI's Error Details report: the message field, and the class field alone") {
    auto s = scan("- **Exception Type:** torch.OutOfMemoryError");
    REQUIRE(s);
    CHECK(s->kind == OomKind::kCuda);
    CHECK(s->exception == "torch.OutOfMemoryError");
    s = scan("- **Exception Message:** Allocation on device ");
    REQUIRE(s);
    CHECK(s->pattern->name == "comfyui-allocation");
    s = scan(
        "- **Exception Message:** CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 23.55 GiB of which 1.02 GiB is free.");
    REQUIRE(s);
    CHECK(s->figures.free_bytes == 1095216660u);
    CHECK_FALSE(scan("- **Node Type:** KSampler"));
    CHECK_FALSE(scan("- **Exception Type:** RuntimeError"));
  }
  TEST_CASE("a message quoted inside a sentence is found with its figures") {
    auto s = scan(
        "Training failed with error 'CUDA out of memory. Tried to allocate 2.00 GiB. GPU "
        "0 has a total capacity of 23.55 GiB of which 1.02 GiB is free.'");
    REQUIRE(s);
    CHECK(s->figures.tried_to_allocate_bytes == 2147483648u);
    CHECK(s->figures.free_bytes == 1095216660u);
    s = scan("ERROR: job 42 exited: \"RuntimeError: CUDA error: out of memory\"");
    REQUIRE(s);
    CHECK(s->kind == OomKind::kCuda);
  }
  TEST_CASE("a message re-logged at INFO by logging or loguru is found") {
    auto s = scan(
        "2026-01-02 10:00:00,123 - INFO - trainer - Caught exception: CUDA out of "
        "memory. Tried to allocate 2.00 MiB (GPU 1; 1.00 GiB total capacity; 1.00 MiB "
        "already allocated)");
    REQUIRE(s);
    CHECK(s->figures.tried_to_allocate_bytes == 2097152u);
    CHECK(s->figures.gpu_index == 1);
    s = scan(
        "2026-01-02 10:00:00.123 | INFO     | mod:fn:12 - torch.OutOfMemoryError: CUDA out "
        "of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 23.55 GiB of "
        "which 1.02 GiB is free.");
    REQUIRE(s);
    CHECK(s->exception == "torch.OutOfMemoryError");
    CHECK(s->figures.gpu_index == 3);
  }
  TEST_CASE("a re-cased message keeps its kind and its figures") {
    auto s = scan(
        "cuda out of memory. tried to allocate 20.00 mib (gpu 0; 7.79 gib total "
        "capacity; 6.00 gib already allocated; 12.00 mib free; 6.50 gib reserved in "
        "total by pytorch)");
    REQUIRE(s);
    CHECK(s->kind == OomKind::kCuda);
    CHECK(s->figures.tried_to_allocate_bytes == 20971520u);
    CHECK(s->figures.free_bytes == 12582912u);
    CHECK(s->figures.reserved_total_bytes == 6979321856u);
    s = scan(
        "CUDA OUT OF MEMORY. TRIED TO ALLOCATE 20.00 MIB. GPU 0 HAS A TOTAL CAPACITY OF 23.55 "
        "GIB OF WHICH 1.02 GIB IS FREE.");
    REQUIRE(s);
    CHECK(s->figures.total_capacity_bytes == 25286619955u);
    CHECK(scan("CUDA OUT OF MEMORY"));
    CHECK(kind_of("hip out of memory. tried to allocate 2.00 mib") == OomKind::kHip);
    CHECK(scan("RuntimeError: Cuda Error: Out Of Memory"));
  }
  TEST_CASE("host allocation failures of old frameworks are host_memoryerror") {
    for (const char* line : {
             "RuntimeError: $ Torch: not enough memory: you tried to allocate 0GB. Buy new RAM! "
             "at /pytorch/aten/src/TH/THGeneral.cpp:201",
             "terminate called after throwing an instance of 'std::bad_alloc'",
             "  what():  std::bad_alloc",
             "std::bad_alloc",
             "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 3.00 GiB for an array "
             "with shape (20000, 20000) and data type float64",
             "MemoryError: Unable to allocate 3.00 GiB for an array with shape (20000, 20000) and "
             "data type float64",
             "OSError: [Errno 12] Cannot allocate memory",
             "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
             "tensor with shape[1024,1024,64] and type float on "
             "/job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu",
         }) {
      CAPTURE(line);
      const auto s = scan(line);
      REQUIRE(s);
      CHECK(s->kind == OomKind::kHostMemoryError);
      CHECK_FALSE(s->pattern->recovered);
    }
  }
  TEST_CASE("GPU OOMs of TensorFlow, MXNet, Caffe and Theano are cuda") {
    for (const char* line : {
             "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
             "tensor with shape[32,64,112,112] and type float on "
             "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
             "Resource exhausted: OOM when allocating tensor",
             "[19:27:22] src/storage/./pooled_storage_manager.h:108: cudaMalloc failed: out of "
             "memory",
             "F0312 10:11:12.123456  1234 syncedmem.cpp:71] Check failed: error == cudaSuccess (2 "
             "vs. 0)  out of memory",
             "MemoryError: Error allocating 1073741824 bytes of device memory (out of memory).",
         }) {
      CAPTURE(line);
      const auto s = scan(line);
      REQUIRE(s);
      CHECK(s->kind == OomKind::kCuda);
    }
  }
  TEST_CASE("allocation words that are not memory exhaustion stay clean") {
    for (const char* line : {
             "Unable to allocate a port",
             "malloc_trim",
             "Cannot allocate memory for the watch list",
             "inotify_add_watch(/data): Cannot allocate memory",
             "W tensorflow/core/common_runtime/bfc_allocator.cc:239] Allocator (GPU_0_bfc) ran "
             "out of memory trying to allocate 3.46GiB with freed_by_count=0.",
         }) {
      CAPTURE(line);
      CHECK_FALSE(scan(line));
    }
  }
  TEST_CASE("prefixes stacked several deep are stripped, and the rank kept") {
    struct Case {
      const char* line;
      std::optional<int> rank;
    };
    for (const Case& c : std::initializer_list<Case>{
             {"2026-03-01T10:00:00.123Z [rank1]: [2026-03-01 10:00:00,123] ERROR [trainer.py:88] "
              "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
              1},
             {"[80746] [rank0]: 10:00:00 | ERROR | torch.OutOfMemoryError: CUDA out of memory. "
              "Tried to allocate 2.00 GiB.",
              0},
             {"[ERROR] [rank2]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
              "2.00 GiB.",
              2},
             {"[default0]:[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to "
              "allocate 2.00 GiB.",
              0},
             {"node-3: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
              std::nullopt},
             {"0: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", 0},
             {"2026-01-01T00:00:00.0000000Z torch.OutOfMemoryError: CUDA out of memory. Tried to "
              "allocate 2.00 GiB.",
              std::nullopt},
         }) {
      CAPTURE(c.line);
      const auto s = scan(c.line);
      REQUIRE(s);
      CHECK(s->exception == "torch.OutOfMemoryError");
      CHECK(s->rank == c.rank);
      CHECK(s->figures.tried_to_allocate_bytes == 2147483648u);
    }
    // Anchored rows need the prefix gone: a shell's "Killed" under pdsh.
    CHECK(kind_of("node-3: Killed") == OomKind::kHostKilled);
  }
  TEST_CASE("the prefilter stays cheap: ordinary lines do not pass it") {
    for (const char* line : {
             "steps:  10%|█         | 100/1000 [01:40<15:00,  1.00s/it, loss=0.123]",
             "Loading checkpoint shards: 100%|██████████| 2/2 [00:03<00:00,  1.50s/it]",
             "epoch 1: train loss 0.3312, lr 1e-4",
             "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to "
             "32768",
         }) {
      CAPTURE(line);
      CHECK_FALSE(may_mention_oom(line));
    }
  }
}
