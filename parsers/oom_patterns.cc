// parsers/oom_patterns.cc: every OOM message shape oomtriage knows, newest and most specific
// first, each with sample lines taken from real logs (docs/formats.md gives the sources).
#include "parsers/oom_patterns.h"

#include <re2/re2.h>

#include <memory>

namespace oomtriage::parsers {
namespace {

RE2::Options quiet_options() {
  RE2::Options options;
  options.set_log_errors(false);
  return options;
}

OomKind kind_for_device(std::string_view dev, OomKind fallback) {
  if (dev == "HIP") return OomKind::kHip;
  if (dev == "XPU" || dev == "DPCPP") return OomKind::kXpu;
  return fallback;
}

}  // namespace

const std::vector<OomPattern>& oom_patterns() {
  static const std::vector<OomPattern> kPatterns = {
      {.name = "aitk-skip-batch",
       .kind = OomKind::kCuda,
       .regex = R"(# OOM during training step, skipping batch \d+/\d+ #)",
       .recovered = true,
       .phase = Phase::kTrainStep,
       .samples = {"# OOM during training step, skipping batch 1/3 #",
                   "# OOM during training step, skipping batch 3/3 #"}},
      {.name = "aitk-abort",
       .kind = OomKind::kCuda,
       .regex = R"(OOM during training step \d+ times in a row, aborting training)",
       .phase = Phase::kTrainStep,
       .samples = {"Error running job: OOM during training step 3 times in a row, aborting training",
                   "RuntimeError: OOM during training step 3 times in a row, aborting training"}},
      {.name = "mps-allocator",
       .kind = OomKind::kMps,
       .regex = R"(MPS backend out of memory)",
       .allocator_message = true,
       .samples = {"RuntimeError: MPS backend out of memory (MPS allocated: 33.48 GB, other "
                   "allocations: 2.45 GB, max allowed: 36.27 GB). Tried to allocate 600.15 MB on "
                   "private pool. Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper limit "
                   "for memory allocations (may cause system failure).",
                   "MPS backend out of memory (MPS allocated: 7.80 GiB, other allocations: 6.94 "
                   "GiB, max allowed: 18.13 GiB). Tried to allocate 3.46 GiB on private pool."}},
      {.name = "torch-allocator",
       .kind = OomKind::kCuda,
       // Every PyTorch era: "(GPU 0; ..." (1.x), "GPU 0 has a total capacty" (2.1), "capacity"
       // (2.2+). Anchor on the prefix only: logs truncate and wrap the rest.
       .regex = R"((?P<dev>CUDA|HIP|XPU|NPU|MUSA|DPCPP|DIPU) out of memory(?:\.|\s*$| \())",
       .allocator_message = true,
       .samples =
           {"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 5.06 GiB. GPU 0 has a "
            "total capacity of 31.36 GiB of which 336.62 MiB is free.",
            "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 "
            "has a total capacty of 6.00 GiB of which 0 bytes is free.",
            "RuntimeError: CUDA out of memory. Tried to allocate 1024.00 KiB (GPU 0; 11.17 GiB "
            "total capacity; 10.90 GiB already allocated; 576.00 KiB free; 30.96 MiB cached)",
            "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 124.00 MiB. GPU 0 has a "
            "total capacity of 19.94 GiB of which 554.47 MiB is free.",
            "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 8.00 GiB. GPU 0 has a "
            "total capacity of 15.11 GiB. Of the allocated memory 0 bytes is allocated by PyTorch",
            "ERROR:root:Failed to execute the training process: CUDA out of memory. Tried to "
            "allocate more than 1EB memory."}},
      {.name = "generic-allocator",
       .kind = OomKind::kCuda,
       .regex = R"((?:^|[^A-Za-z])Out of memory\. Tried to allocate)",
       .allocator_message = true,
       .samples = {"torch.OutOfMemoryError: Out of memory. Tried to allocate 2.00 GiB. GPU 0 has "
                   "a total capacity of 23.55 GiB of which 1.02 GiB is free."}},
      {.name = "cuda-malloc-async",
       .kind = OomKind::kCuda,
       .regex = R"(Allocation on device \d+ would exceed allowed memory\. \(out of memory\))",
       .allocator_message = true,
       .samples = {"torch.OutOfMemoryError: Allocation on device 0 would exceed allowed memory. "
                   "(out of memory)"}},
      {.name = "comfyui-allocation",
       .kind = OomKind::kCuda,
       // ComfyUI shows only the start of the cudaMallocAsync message. It pins its GPU with
       // CUDA_VISIBLE_DEVICES (--cuda-device), so inside the process the device is always 0.
       .regex = R"((?:!!! |Error: |^)Allocation on device\b)",
       .gpu_index = 0,
       .samples = {"!!! Exception during processing !!! Allocation on device",
                   "!!! Exception during processing !!! Allocation on device                   "
                   "execution.py:430",
                   "torch.OutOfMemoryError: Allocation on device"}},
      {.name = "cublas-alloc",
       .kind = OomKind::kCublas,
       .regex = R"(CU(?:BLAS|SOLVER|SPARSE)_STATUS_ALLOC_FAILED)",
       .samples = {"RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling "
                   "`cublasCreate(handle)`",
                   "RuntimeError: cusolver error: CUSOLVER_STATUS_ALLOC_FAILED"}},
      {.name = "cudnn-alloc",
       .kind = OomKind::kCudnn,
       .regex = R"(CUDNN_STATUS_ALLOC_FAILED)",
       .samples = {"RuntimeError: cuDNN error: CUDNN_STATUS_ALLOC_FAILED"}},
      {.name = "nccl-cuda-failure",
       .kind = OomKind::kNccl,
       .regex = R"(Cuda failure (?:\d+ )?'out of memory'|NCCL WARN Failed to CUDA (?:malloc|calloc))",
       .samples = {"node01:12345:12399 [0] init.cc:412 NCCL WARN Cuda failure 'out of memory'",
                   "node01:12345:12399 [0] enqueue.cc:98 NCCL WARN Cuda failure 2 'out of memory'",
                   "Cuda failure 'out of memory'",
                   "node1:1:2 [0] alloc.h:112 NCCL WARN Failed to CUDA malloc 1048576 bytes"}},
      {.name = "cuda-runtime",
       .kind = OomKind::kCuda,
       .regex = R"((?P<dev>CUDA|HIP) error: out of memory)",
       .samples = {"RuntimeError: CUDA error: out of memory",
                   "torch.AcceleratorError: CUDA error: out of memory",
                   "RuntimeError: HIP error: out of memory",
                   "CUDA error: out of memory CUDA kernel errors might be asynchronously reported at "
                   "some other API call"}},
      {.name = "cuda-error-name",
       .kind = OomKind::kCuda,
       .regex = R"(cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY)",
       .samples = {"Exception in main training loop: cudaErrorMemoryAllocation: out of memory",
                   "Search for `cudaErrorMemoryAllocation' in https://docs.nvidia.com/cuda/"
                   "cuda-runtime-api/group__CUDART__TYPES.html for more information.",
                   "jax: CUDA_ERROR_OUT_OF_MEMORY: out of memory"}},
      {.name = "hip-error-name",
       .kind = OomKind::kHip,
       .regex = R"(hipErrorOutOfMemory)",
       .samples = {"Search for `hipErrorOutOfMemory' in https://rocm.docs.amd.com/projects/HIP/"
                   "en/latest/index.html for more information."}},
      {.name = "thc-check",
       .kind = OomKind::kCuda,
       .regex = R"(THCudaCheck FAIL file=\S+ line=\d+ error=2 : out of memory)",
       .samples = {"THCudaCheck FAIL file=/pytorch/aten/src/THC/generic/THCStorage.cu line=58 "
                   "error=2 : out of memory"}},
      {.name = "thc-runtime-error",
       .kind = OomKind::kCuda,
       .regex = R"(cuda runtime error \(2\) : out of memory)",
       .samples = {"RuntimeError: cuda runtime error (2) : out of memory at "
                   "/opt/conda/conda-bld/pytorch/work/aten/src/THC/generic/THCStorage.cu:66"}},
      {.name = "cupy-allocator",
       .kind = OomKind::kCuda,
       .regex = R"(OutOfMemoryError: [Oo]ut of memory to allocate \d+ bytes)",
       .samples = {"cupy.cuda.memory.OutOfMemoryError: out of memory to allocate 200000000000 "
                   "bytes (total 200000004096 bytes)"}},
      {.name = "bitsandbytes",
       .kind = OomKind::kCuda,
       .regex = R"(^Error out of memory at line \d+ in file )",
       .samples = {"Error out of memory at line 559 in file /src/csrc/pythonInterface.cpp"}},
      {.name = "vae-decode-retry",
       .kind = OomKind::kCuda,
       .regex = R"(Ran out of memory when regular VAE decoding)",
       .recovered = true,
       .phase = Phase::kSampling,
       .samples = {"Warning: Ran out of memory when regular VAE decoding, retrying with tiled VAE "
                   "decoding."}},
      {.name = "oom-class-only",
       .kind = OomKind::kCuda,
       // IPython's header and a bare class line: the message itself may be cut off.
       .regex = R"(^(?:torch\.(?:cuda\.)?)?OutOfMemoryError(?:\s*$|\s+Traceback \(most recent call last\)))",
       .samples = {"OutOfMemoryError                          Traceback (most recent call last)",
                   "torch.cuda.OutOfMemoryError"}},
      {.name = "kernel-oom-killer",
       .kind = OomKind::kHostKilled,
       .regex = R"((?:Out of memory|Memory cgroup out of memory): Kill(?:ed)? process \d+|invoked oom-killer:)",
       .samples = {"[1234567.890123] Out of memory: Killed process 4321 (python) "
                   "total-vm:98765432kB, anon-rss:61234567kB, file-rss:0kB, shmem-rss:0kB",
                   "May 01 12:00:00 gpu1 kernel: Memory cgroup out of memory: Killed process 77 "
                   "(pt_main_thread) total-vm:1kB, anon-rss:1kB, file-rss:0kB",
                   "python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE), order=0"}},
      {.name = "slurm-oom-kill",
       .kind = OomKind::kHostKilled,
       .regex = R"(Detected \d+ oom[_-]kill events?|have been OOM Killed|task \d+: Out Of Memory)",
       .samples = {"slurmstepd: error: Detected 1 oom_kill event in StepId=647226.7. Some of the "
                   "step tasks have been OOM Killed.",
                   "srun: error: nid002680: task 0: Out Of Memory"}},
      {.name = "dataloader-killed",
       .kind = OomKind::kHostKilled,
       .regex = R"(DataLoader worker \(pid \d+\) is killed by signal: Killed)",
       .samples = {"RuntimeError: DataLoader worker (pid 9833) is killed by signal: Killed. "}},
      {.name = "aitk-sigkill",
       .kind = OomKind::kHostKilled,
       .regex = R"(Job process terminated with signal SIGKILL)",
       .samples = {"Job process terminated with signal SIGKILL."}},
      {.name = "shell-killed",
       .kind = OomKind::kHostKilled,
       .regex = R"(^Killed$|: line \d+: +\d+ Killed\b)",
       .samples = {"Killed", "./train.sh: line 12: 54321 Killed                  python train.py"}},
      {.name = "sigkill-exit",
       .kind = OomKind::kHostKilled,
       .regex = R"(Signal 9 \(SIGKILL\) received by PID|exitcode\s*: -9\b|exits with return code = -9\b|died with <Signals\.SIGKILL: 9>|(?:exit|exited with) (?:code|status)[ :=]+137\b|Exit Code: 137\b|OOMKilled)",
       .samples = {"  traceback : Signal 9 (SIGKILL) received by PID 1234",
                   "  exitcode  : -9 (pid: 1234)",
                   "[launch.py:315:sigkill_handler] ['/usr/bin/python3', '-u', 'train.py'] exits "
                   "with return code = -9",
                   "Process exited with code 137", "    Reason: OOMKilled"}},
      {.name = "python-memoryerror",
       .kind = OomKind::kHostMemoryError,
       .regex = R"(^MemoryError\b|DefaultCPUAllocator: can't allocate memory)",
       .samples = {"MemoryError", "MemoryError: Unable to allocate 3.00 GiB for an array",
                   "RuntimeError: [enforce fail at alloc_cpu.cpp:114] . DefaultCPUAllocator: "
                   "can't allocate memory: you tried to allocate 1125899906842624 bytes."}},
      {.name = "small-shm",
       .kind = OomKind::kShm,
       .regex = R"(insufficient shared memory \(shm\)|is killed by signal: Bus error|^Bus error\b|/dev/shm\S*: No space left on device|No space left on device.{0,80}/dev/shm)",
       .samples = {"ERROR: Unexpected bus error encountered in worker. This might be caused by "
                   "insufficient shared memory (shm).",
                   "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. ",
                   "Bus error (core dumped)",
                   "OSError: [Errno 28] No space left on device: '/dev/shm/torch_12_345'"}},
  };
  return kPatterns;
}

const std::vector<std::string_view>& oom_near_misses() {
  static const std::vector<std::string_view> kNearMisses = {
      "RuntimeError: CUDA error: device-side assert triggered",
      "RuntimeError: CUDA error: an illegal memory access was encountered",
      "RuntimeError: CUDA error: no kernel image is available for execution on the device",
      "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught "
      "collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE) ran for 600060 "
      "milliseconds before timing out.",
      "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 98304, "
      "Hardware limit: 65536. Reducing block sizes or `num_stages` may help.",
      "torch.OutOfMemoryError: out of resource: triton_poi_fused_0 Required: 147456 Hardware "
      "limit:101376 Reducing block sizes or `num_stages` may help.",
      "|            CUDA OOMs: 0            |        cudaMalloc retries: 0         |",
      "| 58%   70C    P2    67W / 200W |   8108MiB /  8111MiB |     25%      Default |",
      "2026-04-10 13:30:50 INFO device.py L1692: 'peak_ram': 68.8GB, 'peak_vram': 3.04GB",
      "Peak memory usage: 21.4 GiB",
      "Error running job: Job stopped",
      "NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:",
      "2022-05-05 12:33:52,875 INFO [train.py:983] Sanity check -- see if any of the batches in "
      "epoch 0 would cause OOM.",
      "    if \"CUDA out of memory\" in str(e):",
      "[    4.973019] [drm] amdgpu: 98304M of VRAM memory ready",
      "Killed process list refreshed",
      "W tensorflow/core/common_runtime/bfc_allocator.cc:239] Allocator (GPU_0_bfc) ran out of "
      "memory trying to allocate 3.46GiB with freed_by_count=0.",
      "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
  };
  return kNearMisses;
}

namespace {

struct CompiledPattern {
  const OomPattern* pattern;
  std::unique_ptr<RE2> regex;
  int dev_group = -1;
};

const std::vector<CompiledPattern>& compiled_patterns() {
  static const std::vector<CompiledPattern> kCompiled = [] {
    std::vector<CompiledPattern> compiled;
    for (const OomPattern& pattern : oom_patterns()) {
      CompiledPattern entry{&pattern, std::make_unique<RE2>(pattern.regex, quiet_options())};
      const auto& groups = entry.regex->NamedCapturingGroups();
      if (auto it = groups.find("dev"); it != groups.end()) {
        entry.dev_group = it->second;
      }
      compiled.push_back(std::move(entry));
    }
    return compiled;
  }();
  return kCompiled;
}

}  // namespace

bool may_mention_oom(std::string_view text) {
  // Every row above contains one of these literals; RE2 turns the alternation into one DFA pass.
  static const RE2 kLiterals(
      R"(emory|EMORY|OOM|ALLOC_FAILED|Killed|KILL|Allocation on device|Bus error|Signal 9|)"
      R"(exitcode|return code = -9|137|/dev/shm|oom-kill|Failed to CUDA)",
      quiet_options());
  return RE2::PartialMatch(text, kLiterals);
}

std::optional<OomMatch> match_oom(std::string_view line) {
  for (const CompiledPattern& entry : compiled_patterns()) {
    const int ngroups = entry.dev_group > 0 ? entry.dev_group + 1 : 1;
    std::vector<re2::StringPiece> submatch(static_cast<size_t>(ngroups));
    if (!entry.regex->Match(line, 0, line.size(), RE2::UNANCHORED, submatch.data(), ngroups)) {
      continue;
    }
    OomMatch match;
    match.pattern = entry.pattern;
    match.kind = entry.pattern->kind;
    if (entry.dev_group > 0) {
      match.kind = kind_for_device(submatch[static_cast<size_t>(entry.dev_group)], match.kind);
    }
    match.begin = static_cast<size_t>(submatch[0].data() - line.data());
    return match;
  }
  return std::nullopt;
}

std::optional<std::string_view> exception_class(std::string_view line) {
  static const RE2 kClass(R"(^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)\b))",
                          quiet_options());
  re2::StringPiece cls;
  if (RE2::PartialMatch(line, kClass, &cls)) {
    return std::string_view(cls.data(), cls.size());
  }
  return std::nullopt;
}

}  // namespace oomtriage::parsers
