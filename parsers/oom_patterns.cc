// parsers/oom_patterns.cc: every OOM message shape oomtriage knows, newest and most specific
// first, each with sample lines taken from real logs (docs/formats.md gives the sources).
#include "parsers/oom_patterns.h"

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>
#include <memory>
#include <mutex>

namespace oomtriage::parsers {
namespace {

// The patterns are ASCII; matched as Latin-1 they read UTF-8 text the same, and the bounded
// repeats of "." (".{0,60}?" between an OOM token and a back-off verb) compile to a single byte
// range instead of UTF-8 sequences: a tenth of the compile time at every start.
RE2::Options quiet_options() {
  RE2::Options options;
  options.set_log_errors(false);
  options.set_encoding(RE2::Options::EncodingLatin1);
  return options;
}

bool equals_upper(std::string_view text, std::string_view upper) {
  if (text.size() != upper.size()) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    if (c != upper[i]) return false;
  }
  return true;
}

// The device word of a message, in any case ("HIP", "hip"), or TensorFlow's device type.
OomKind kind_for_device(std::string_view dev, OomKind fallback) {
  if (equals_upper(dev, "HIP")) return OomKind::kHip;
  if (equals_upper(dev, "XPU") || equals_upper(dev, "DPCPP")) return OomKind::kXpu;
  if (equals_upper(dev, "MPS")) return OomKind::kMps;
  if (equals_upper(dev, "CPU")) return OomKind::kHostMemoryError;
  return fallback;
}

}  // namespace

// Trainer-caught OOMs, in any trainer's words: an OOM token beside a back-off verb. The token
// tolerates a first letter lost to a tqdm redraw ("OM Detected", "ut of memory").
// strsignal(SIGKILL) in English and in every translation glibc's libc.mo carries (glibc 2.36).
#define KILLED_WORDS                                                                                                              \
  R"((?:Killed|Забіты|Безусловно прекъснат|Matat|Zabit \(SIGKILL\)|Dræbt|Getötet|Σκοτώθηκε|)" \
  R"(Buĉita|Terminado \(killed\)|Tapettu|Processus arrêté|Matado|Ubijen|Kilőve|Terbunuh|)"                                    \
  R"(Ucciso|強制終了|죽었음|Nutraukta \(killed\)|Drept|Geëlimineerd|Unicestwiony|Morto|Убито|)"                      \
  R"(Zabitý|Pobit|Убијен|Dödad|Süreç durduruldu|Вбито|Bị buộc kết thúc|已杀死|強制結束))"
#define OOM_TOKEN R"((?:\bOOM\b|\bOM [Dd]etected\b|(?i:\bo?ut of memory\b)|OutOfMemory))"
// Progressive or past forms only: the imperative ("reduce the batch size") is advice.
#define BACKOFF_VERB                                                                            \
  R"((?i:\b(?:reducing|reduced to|retrying|re-trying|retry|skipping|skipped|skip|halving|)"     \
  R"(halved to|decreasing|decreased to|lowering|lowered to|fall(?:ing)? back|fell back|)"       \
  R"(trying (?:again )?with (?:a )?smaller|trying (?:a )?smaller batch|trying batch size \d+|)" \
  R"(recover(?:ing)? from)\b))"
// The token and the verb within a clause's reach of each other, in either order.
#define BACKOFF_CORE \
  "(?:" OOM_TOKEN ".{0,60}?" BACKOFF_VERB "|" BACKOFF_VERB ".{0,60}?" OOM_TOKEN ")"
// What turns such a line into something else: advice and negation ("try reducing", "we
// recommend decreasing", "not retrying"), giving up or a failed retry ("cudaMalloc retry failed:
// out of memory" is fatal), and Python source quoting the message
// (`if "out of memory" in str(e):`, `print("OOM, skipping")`).
#define BACKOFF_VETO                                                                               \
  R"((?i:\b(?:try|consider|please|recommend\w*|suggest\w*|should|could|you (?:can|may|might)|)"    \
  R"(need to|not|no longer|cannot|can't|couldn't|unable to|failed to|without)\s+(?:\w+\s+){0,2}?)" \
  R"((?:reduc|retry|re-try|skip|halv|decreas|lower|fall)|)"                                        \
  R"(\b(?:giving up|gave up|give up|no more retries|out of retries|retries exhausted)\b|)"         \
  R"(\bretry(?: \d+(?:/\d+)?)? failed\b|)"                                                         \
  R"(["'](?:cuda |hip )?(?:oom|out of memory|ran out of memory)["']))"                             \
  R"(|\bin str\(|\b(?:print|warn|\w+\.(?:debug|info|warning|error|exception|critical))\()"         \
  R"(|^\s*(?:if|elif|except|raise|assert|return|while|for|def)\b)"                                 \
  R"(|(?i:\b(?:if|when|whenever|in case|may|might|would|to enable|can be)\b)|(?:^|\s)#\s|--\w)"
#define SAMPLING_WORDS                                                                   \
  R"((?i:VAE decod|\bduring (?:sampling|validation|evaluation|inference|generation)\b|)" \
  R"(\b(?:generating|sampling) (?:samples?|images?|previews?)\b|)"                       \
  R"(\bvalidation (?:steps?|batch(?:es)?|images?|samples?)\b))"
// Batches are skipped in training only (a skipped validation batch names validation, above).
#define TRAIN_WORDS                                                                           \
  R"((?i:\btrain(?:ing)? (?:step|batch|iteration)|\bduring training\b|\bin training loop\b|)" \
  R"(\bskip(?:ping|ped)? (?:this |the |a )?batch\b))"

const std::vector<OomPattern>& oom_patterns() {
  // A table, one entry per row as written:
  // clang-format off
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
      {.name = "yolox-label-assignment-cpu",
       .kind = OomKind::kCuda,
       // YOLOX (and the detectors built on it) catch the OOM of the loss's label assignment and
       // redo that batch's assignment on the CPU.
       .regex = R"(OOM RuntimeError is raised due to the huge memory cost during label assignment)",
       .recovered = true,
       .phase = Phase::kTrainStep,
       .samples = {"2021-07-30 17:15:41 | ERROR    | yolox.models.yolo_head:332 - OOM RuntimeError "
                   "is raised due to the huge memory cost during label assignment. CPU mode is "
                   "applied in this batch. If you want to avoid this issue, try to reduce the batch "
                   "size or image size."}},
      {.name = "vae-decode-retry",
       .kind = OomKind::kCuda,
       .regex = R"(Ran out of memory when regular VAE decoding)",
       .recovered = true,
       .phase = Phase::kSampling,
       .samples = {"Warning: Ran out of memory when regular VAE decoding, retrying with tiled VAE "
                   "decoding."}},
      {.name = "oom-backoff-sampling",
       .kind = OomKind::kCuda,
       .regex = BACKOFF_CORE,
       .also = SAMPLING_WORDS,
       .veto = BACKOFF_VETO,
       .recovered = true,
       .phase = Phase::kSampling,
       .samples = {"Ran out of memory during VAE decoding, retrying with tiled decode",
                   "WARNING: OOM while generating samples at step 500, skipping sample generation",
                   "Out of memory during validation, skipping validation images for this epoch"}},
      {.name = "oom-backoff-train-step",
       .kind = OomKind::kCuda,
       .regex = BACKOFF_CORE,
       .also = TRAIN_WORDS,
       .veto = BACKOFF_VETO,
       .recovered = true,
       .phase = Phase::kTrainStep,
       .samples = {"OOM during training step 120, skipping batch",
                   "CUDA out of memory in train step 57, retrying with batch size 2",
                   "Skipping training batch 17 after OOM",
                   "Ran out of memory, skipping this batch",
                   "OOM in all workers, skipping batch"}},
      {.name = "oom-backoff-allocator",
       .kind = OomKind::kCuda,
       // The allocator message itself, then the trainer's back-off: keep its figures.
       .regex = R"((?i)\b(?P<dev>CUDA|HIP|XPU|NPU|MUSA|DPCPP|DIPU) out of memory\. Tried to )"
                R"(allocate.*)" BACKOFF_VERB,
       .veto = BACKOFF_VETO,
       .recovered = true,
       .allocator_message = true,
       .samples = {"Caught CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                   "capacity of 23.55 GiB of which 1.02 GiB is free. Retrying with batch size 4",
                   "HIP out of memory. Tried to allocate 512.00 MiB (GPU 0; 15.98 GiB total "
                   "capacity; 14.90 GiB already allocated) -- reducing batch size to 8"}},
      {.name = "oom-backoff",
       .kind = OomKind::kCuda,
       .regex = R"((?:\b(?P<dev>CUDA|HIP|XPU|MPS)(?: backend)? )?)" OOM_TOKEN ".{0,60}?"
                BACKOFF_VERB "|" BACKOFF_VERB ".{0,60}?" OOM_TOKEN,
       .veto = BACKOFF_VETO,
       .recovered = true,
       .samples = {"OOM Detected, reducing batch/grad size to 2",
                   "OM Detected, reducing batch/grad size",
                   "CUDA out of memory, retrying with batch size 4",
                   "WARNING: OOM at step 120, retrying",
                   "ut of memory, trying batch size 8",
                   "Reducing batch size to 16 after OOM",
                   "Caught torch.OutOfMemoryError, falling back to CPU offload for the text "
                   "encoder",
                   "HIP out of memory, retrying with batch size 2"}},
      {.name = "batch-size-finder-failed",
       .kind = OomKind::kCuda,
       // A batch-size finder (Lightning's BatchSizeFinder, tuners) backs off only on OOM.
       .regex = R"((?i)\bbatch size \d+ failed\b[,;:]?\s+(?:trying|retrying|using|falling back))",
       .recovered = true,
       .phase = Phase::kTrainStep,
       .samples = {"Batch size 64 failed, trying batch size 32"}},
      {.name = "accelerate-no-batch-size",
       .kind = OomKind::kCuda,
       // find_executable_batch_size gives up: every batch size down to 1 ran out of memory.
       .regex = R"(No executable batch size found, reached zero)",
       .samples = {"RuntimeError: No executable batch size found, reached zero."}},
      {.name = "mps-allocator",
       .kind = OomKind::kMps,
       .regex = R"((?i)MPS backend out of memory)",
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
       // Any case: logs re-cased by a UI or a shouting wrapper ("CUDA OUT OF MEMORY").
       .regex = R"((?i)\b(?P<dev>CUDA|HIP|XPU|NPU|MUSA|DPCPP|DIPU) out of memory(?:\.|\s*$| \())",
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
            "allocate more than 1EB memory.",
            "cuda out of memory. tried to allocate 20.00 mib (gpu 0; 7.79 gib total capacity)",
            "RUNTIMEERROR: CUDA OUT OF MEMORY",
            "Training failed with error 'CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 "
            "has a total capacity of 23.55 GiB of which 1.02 GiB is free.'"}},
      {.name = "generic-allocator",
       .kind = OomKind::kCuda,
       .regex = R"((?:^|[^A-Za-z])(?i:Out of memory\. Tried to allocate))",
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
       .regex = R"((?i)\b(?P<dev>CUDA|HIP) error: out of memory)",
       .samples = {"RuntimeError: CUDA error: out of memory",
                   "torch.AcceleratorError: CUDA error: out of memory",
                   "RuntimeError: HIP error: out of memory",
                   "CUDA error: out of memory CUDA kernel errors might be asynchronously reported at "
                   "some other API call",
                   "ERROR: job 42 exited: \"RuntimeError: CUDA error: out of memory\""}},
      {.name = "cuda-error-name",
       .kind = OomKind::kCuda,
       // pycuda raises a MemoryError, but for a device allocation.
       .regex = R"(cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|cuMemAlloc failed: out of memory)",
       .samples = {"Exception in main training loop: cudaErrorMemoryAllocation: out of memory",
                   "Search for `cudaErrorMemoryAllocation' in https://docs.nvidia.com/cuda/"
                   "cuda-runtime-api/group__CUDART__TYPES.html for more information.",
                   "jax: CUDA_ERROR_OUT_OF_MEMORY: out of memory",
                   "pycuda._driver.MemoryError: cuMemAlloc failed: out of memory"}},
      {.name = "hip-error-name",
       .kind = OomKind::kHip,
       // TensorFlow's ROCm stream executor spells it HIP_ERROR_OutOfMemory.
       .regex = R"(hipErrorOutOfMemory|HIP_ERROR_OutOfMemory)",
       .samples = {"Search for `hipErrorOutOfMemory' in https://rocm.docs.amd.com/projects/HIP/"
                   "en/latest/index.html for more information."}},
      {.name = "tensorflow-oom",
       .kind = OomKind::kCuda,
       // TensorFlow's allocate_tensor failure; the device named in it refines the kind
       // (device:CPU is host memory).
       .regex = R"(OOM when allocating tensor(?:.{0,300}?device:(?P<dev>[A-Z]+):\d+)?)",
       .samples = {"tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when "
                   "allocating tensor with shape[32,64,112,112] and type float on "
                   "/job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
                   "(0) Resource exhausted:  OOM when allocating tensor with shape[8,512,64,64] "
                   "and type half on /job:localhost/replica:0/task:0/device:GPU:0 by allocator "
                   "GPU_0_bfc",
                   "Resource exhausted: OOM when allocating tensor with shape[1024,1024]"}},
      {.name = "mxnet-caffe-cudamalloc",
       .kind = OomKind::kCuda,
       // MXNet's pooled storage manager; Caffe's CUDA_CHECK (2 = cudaErrorMemoryAllocation).
       .regex = R"(cudaMalloc(?:Host|Managed)?(?: retry)? failed: out of memory|)"
                R"(cudaSuccess \(2 vs\. 0\))",
       .samples = {"[19:27:22] src/storage/./pooled_storage_manager.h:108: cudaMalloc failed: "
                   "out of memory",
                   "mxnet.base.MXNetError: [09:37:52] src/storage/./pooled_storage_manager.h:157: "
                   "cudaMalloc retry failed: out of memory",
                   "F0312 10:11:12.123456  1234 syncedmem.cpp:71] Check failed: error == "
                   "cudaSuccess (2 vs. 0)  out of memory"}},
      {.name = "theano-device-memory",
       .kind = OomKind::kCuda,
       .regex = R"(Error allocating \d+ bytes of device memory \(out of memory\))",
       .samples = {"MemoryError: Error allocating 1073741824 bytes of device memory (out of "
                   "memory).",
                   "MemoryError: ('Error allocating 240000000 bytes of device memory (out of "
                   "memory).', \"you might consider using 'theano.shared(..., borrow=True)'\")"}},
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
      {.name = "oom-class-only",
       .kind = OomKind::kCuda,
       // IPython's header and a bare class line: the message itself may be cut off.
       .regex = R"(^(?:torch\.(?:cuda\.)?)?OutOfMemoryError(?:\s*$|\s+Traceback \(most recent call last\)))",
       .samples = {"OutOfMemoryError                          Traceback (most recent call last)",
                   "torch.cuda.OutOfMemoryError"}},
      {.name = "ray-memory-monitor",
       .kind = OomKind::kHostKilled,
       // Ray's memory monitor kills a task or an actor when the node runs low on memory.
       .regex = R"(Task was killed due to the node running low on memory|)"
                R"((?:Ray killed this worker|Workers? \(tasks? / actors?\) killed) due to memory pressure)",
       .samples = {"ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on "
                   "memory.",
                   "(raylet) [2026-01-01 10:00:00] Workers (tasks / actors) killed due to memory "
                   "pressure (OOM): 1 Workers killed"}},
      {.name = "xla-resource-exhausted",
       .kind = OomKind::kCuda,
       // JAX/XLA on a GPU; "Out of host memory" is the host's.
       .regex = R"(RESOURCE_EXHAUSTED: Out of (?:device )?memory while trying to allocate)",
       .samples = {"jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while "
                   "trying to allocate 17179869184 bytes."}},
      {.name = "xla-host-exhausted",
       .kind = OomKind::kHostMemoryError,
       .regex = R"(RESOURCE_EXHAUSTED: Out of host memory while trying to allocate)",
       .samples = {"XlaRuntimeError: RESOURCE_EXHAUSTED: Out of host memory while trying to allocate "
                   "1073741824 bytes."}},
      {.name = "level-zero-out-of-memory",
       .kind = OomKind::kXpu,
       // Intel's Unified Runtime / Level Zero, under IPEX and torch.xpu.
       .regex = R"(UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY|ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY|)"
                R"(PI_ERROR_OUT_OF_DEVICE_MEMORY)",
       .samples = {"RuntimeError: level_zero backend failed with error: 39 "
                   "(UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)"}},
      {.name = "kernel-oom-killer",
       .kind = OomKind::kHostKilled,
       .regex = R"((?:Out of memory|Memory cgroup out of memory): Kill(?:ed)? process \d+|invoked oom-killer:|)"
                R"(\boom-kill:constraint=|killed by the OOM killer|Failed with result 'oom-kill'|)"
                R"(systemd-oomd\[\d+\]: Killed \S+ due to memory)",
       .samples = {"[1234567.890123] Out of memory: Killed process 4321 (python) "
                   "total-vm:98765432kB, anon-rss:61234567kB, file-rss:0kB, shmem-rss:0kB",
                   "May 01 12:00:00 gpu1 kernel: Memory cgroup out of memory: Killed process 77 "
                   "(pt_main_thread) total-vm:1kB, anon-rss:1kB, file-rss:0kB",
                   "python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE), order=0",
                   "Dec 03 10:00:00 gpu1 kernel: oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),"
                   "cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice,task=python3,pid=4321,"
                   "uid=1000",
                   "[Thu Dec  3 10:00:00 2026] Out of memory: Killed process 4321 (python3) "
                   "total-vm:98765432kB, anon-rss:61234567kB",
                   "Dec 03 10:00:01 gpu1 systemd[1]: session-3.scope: A process of this unit has "
                   "been killed by the OOM killer.",
                   "Dec 03 10:00:01 gpu1 systemd[1031]: train.service: Failed with result 'oom-kill'.",
                   "Dec 03 10:00:01 gpu1 systemd-oomd[612]: Killed /user.slice/user-1000.slice/"
                   "session-3.scope due to memory pressure for /user.slice being 71.23% > 50.00% "
                   "for > 20s with reclaim activity"}},
      {.name = "slurm-oom-kill",
       .kind = OomKind::kHostKilled,
       .regex = R"(Detected \d+ oom[_-]kill events?|have been OOM Killed|task \d+: Out Of Memory)",
       .samples = {"slurmstepd: error: Detected 1 oom_kill event in StepId=647226.7. Some of the "
                   "step tasks have been OOM Killed.",
                   "srun: error: nid002680: task 0: Out Of Memory"}},
      {.name = "slurm-memory-limit-kill",
       .kind = OomKind::kHostKilled,
       // jobacct_gather's enforcement (no cgroup): the step is killed for its RSS.
       .regex = R"(exceeded memory limit \(\d+ > \d+\), being killed|Exceeded job memory limit\b)",
       .samples = {"slurmstepd: error: Job 7518 exceeded memory limit (626359956 > 512000000), "
                   "being killed",
                   "slurmstepd: error: Exceeded job memory limit"}},
      {.name = "colab-ram-crash",
       .kind = OomKind::kHostKilled,
       // Colab's notice when the runtime's host RAM ran out and the kernel was killed.
       .regex = R"(Your session crashed after using all available RAM)",
       .samples = {"> Your session crashed after using all available RAM. If you are interested "
                   "in access to high-RAM runtimes, you may want to check out Colab Pro."}},
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
       // The shell prints strsignal(SIGKILL), which glibc translates: the words are libc.mo's
       // msgstr for "Killed" in each of its locales (docs/detection.md lists them). Alone on a
       // line, perhaps in pasted emphasis, or after the shell's "line N: PID" (also translated).
       .regex = R"(^[\s*_`>~"']*(?:)" KILLED_WORDS R"()[\s*_`.!"']*$|)"
                R"(: [^\d:]{0,16}\d+[^\d:]{0,12}(?::|：) *\d+ +(?:)" KILLED_WORDS R"()(?: |$))",
       .samples = {"Killed", "./train.sh: line 12: 54321 Killed                  python train.py",
                   "Getötet", "**Killed**", "> `Killed`", "Убито", "已杀死", "強制終了",
                   "Terminado (killed)", "Processus arrêté",
                   "./train.sh: Zeile 12: 54321 Getötet                 python train.py",
                   "train.sh: строка 7: 4242 Убито                   python3 train.py",
                   "run.sh: 第 3 行： 9876 已杀死                 python train.py"}},
      {.name = "other-shell-killed",
       .kind = OomKind::kHostKilled,
       .regex = R"(^zsh: killed {2,}\S|terminated by signal SIGKILL \(Forced quit\))",
       .samples = {"zsh: killed     python train.py --config flux.yaml",
                   "fish: Job 1, 'python train.py' terminated by signal SIGKILL (Forced quit)"}},
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
       .regex = R"(^MemoryError\b|DefaultCPUAllocator: (?:can't allocate|not enough) memory)",
       .samples = {"MemoryError", "MemoryError: Unable to allocate 3.00 GiB for an array",
                   "RuntimeError: [enforce fail at alloc_cpu.cpp:114] . DefaultCPUAllocator: "
                   "can't allocate memory: you tried to allocate 1125899906842624 bytes.",
                   "RuntimeError: [enforce fail at C:\\cb\\pytorch\\c10\\core\\impl\\alloc_cpu.cpp:72] "
                   "data. DefaultCPUAllocator: not enough memory: you tried to allocate 52428800 "
                   "bytes."}},
      {.name = "torch7-not-enough-memory",
       .kind = OomKind::kHostMemoryError,
       // Torch7 / PyTorch <= 0.4's TH allocator.
       .regex = R"(Torch: not enough memory: you tried to allocate)",
       .samples = {"RuntimeError: $ Torch: not enough memory: you tried to allocate 0GB. Buy new "
                   "RAM! at /pytorch/aten/src/TH/THGeneral.cpp:201"}},
      {.name = "cpp-bad-alloc",
       .kind = OomKind::kHostMemoryError,
       // An uncaught C++ std::bad_alloc (libtorch, a C++ extension), or one translated by pybind;
       // not a line of C++ source that handles one.
       .regex = R"(std::bad_alloc\b)",
       .veto = R"(\bcatch\s*\(|\bconst std::bad_alloc|std::bad_alloc\s*&)",
       .samples = {"terminate called after throwing an instance of 'std::bad_alloc'",
                   "  what():  std::bad_alloc", "std::bad_alloc",
                   "RuntimeError: std::bad_alloc"}},
      {.name = "numpy-array-memoryerror",
       .kind = OomKind::kHostMemoryError,
       // numpy's _ArrayMemoryError (and 1.16's MemoryError) text, with or without the class.
       .regex = R"(Unable to allocate (?:\d+(?:\.\d+)? ?(?:[KMGTPE]i?B|bytes) for an )?array )"
                R"(with shape)",
       .samples = {"numpy.core._exceptions._ArrayMemoryError: Unable to allocate 3.00 GiB for an "
                   "array with shape (20000, 20000) and data type float64",
                   "numpy.core._exceptions.MemoryError: Unable to allocate array with shape "
                   "(156816, 36, 53806) and data type uint8",
                   "Error: Unable to allocate 72.0 MiB for an array with shape (3, 3000, 1050) and "
                   "data type float64"}},
      {.name = "errno-enomem",
       .kind = OomKind::kHostMemoryError,
       // strerror(ENOMEM) from fork/mmap/malloc: "OSError: [Errno 12] ...", "bash: fork: ...",
       // "unable to mmap ...: Cannot allocate memory (12)". Only as the whole error text: an
       // inotify watcher's "Cannot allocate memory for the watch list" is a watch-table limit
       // of a helper (fs.inotify.max_user_watches), not the job's memory.
       .regex = R"(Cannot allocate memory(?: \(12\))?(?:\.?\s*$|: '))",
       .veto = R"((?i)inotify|\bwatch)",
       .samples = {"OSError: [Errno 12] Cannot allocate memory",
                   "OSError: [Errno 12] Cannot allocate memory: '/dev/shm/torch_1234_567'",
                   "-bash: fork: Cannot allocate memory",
                   "RuntimeError: unable to mmap 1048576 bytes from file </torch_3119_2958457488>: "
                   "Cannot allocate memory (12)"}},
      {.name = "small-shm",
       .kind = OomKind::kShm,
       .regex = R"(insufficient shared memory \(shm\)|is killed by signal: Bus error|^Bus error\b|/dev/shm\S*: No space left on device|No space left on device.{0,80}/dev/shm)",
       .samples = {"ERROR: Unexpected bus error encountered in worker. This might be caused by "
                   "insufficient shared memory (shm).",
                   "RuntimeError: DataLoader worker (pid 4242) is killed by signal: Bus error. ",
                   "Bus error (core dumped)",
                   "OSError: [Errno 28] No space left on device: '/dev/shm/torch_12_345'"}},
  };
  // clang-format on
  return kPatterns;
}

const std::vector<std::string_view>& oom_near_misses() {
  // A table, one entry per row as written:
  // clang-format off
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
      // A translation of "Killed" inside a sentence, the English word in one: no shell wrote it.
      "Morto sul colpo, disse il narratore",
      "the process was Killed by the user",
      "Getötet wurde niemand: the dataset loader skipped 3 files",
      "zsh: killed is not a command",
      "W tensorflow/core/common_runtime/bfc_allocator.cc:239] Allocator (GPU_0_bfc) ran out of "
      "memory trying to allocate 3.46GiB with freed_by_count=0.",
      "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
      // Back-off words around an OOM that are not a recovery: source quoting the message,
      // advice, negation, giving up.
      "if \"out of memory\" in str(e): print(\"retrying\")",
      "    except torch.OutOfMemoryError:  # retry with a smaller batch",
      "        print(f\"OOM at step {step}, skipping batch\")",
      "Tip: if you run out of memory, try reducing --train_batch_size or enabling "
      "--gradient_checkpointing.",
      "Your GPU ran out of memory with the current max_duration setting. We recommend decreasing "
      "max_duration and trying again.",
      "OOM again after halving the batch size: not retrying",
      "CUDA out of memory after 3 attempts, giving up on skipping batches",
      // Allocation words that are not memory exhaustion.
      "OSError: Unable to allocate a port for the rendezvous server",
      "malloc_trim(0) returned 1 after freeing the dataset cache",
      "inotify_add_watch: Cannot allocate memory for the watch list",
      "Failed to watch /data/logs: Cannot allocate memory (inotify)",
      "catch (const std::bad_alloc& e) {",
      "W tensorflow/core/common_runtime/bfc_allocator.cc:462] Allocator (GPU_0_bfc) ran out of "
      "memory trying to allocate 2.00GiB (rounded to 2147483648)requested by op Conv2D",
      "Hint: If you want to see a list of allocated tensors when OOM happens, add "
      "report_tensor_allocations_upon_oom to RunOptions for current allocation info.",
      "Check failed: status == CUDNN_STATUS_SUCCESS (4 vs. 0)  CUDNN_STATUS_INTERNAL_ERROR",
      "torch.cuda.memory_summary(): reserved 3.00 GiB, allocated 2.50 GiB",
  };
  // clang-format on
  return kNearMisses;
}

namespace {

struct CompiledPattern {
  const OomPattern* pattern;
  std::unique_ptr<RE2> regex;
  std::unique_ptr<RE2> also;  // null when the row has none
  std::unique_ptr<RE2> veto;  // null when the row has none
  int dev_group = -1;
};

constexpr int kMaxGroups = 8;  // the "dev" group must come among the first 7 groups of its row

CompiledPattern compile_row(const OomPattern& pattern) {
  CompiledPattern entry{&pattern, std::make_unique<RE2>(pattern.regex, quiet_options()), nullptr,
                        nullptr, -1};
  if (!pattern.also.empty()) entry.also = std::make_unique<RE2>(pattern.also, quiet_options());
  if (!pattern.veto.empty()) entry.veto = std::make_unique<RE2>(pattern.veto, quiet_options());
  const auto& groups = entry.regex->NamedCapturingGroups();
  if (auto it = groups.find("dev"); it != groups.end()) {
    entry.dev_group = it->second;
  }
  return entry;
}

// A row compiled the first time the set names it, on whichever thread gets there first: most
// rows never match a given log, and compiling all 44 at start cost ~10 ms of every scan's start
// (as long as the set itself). The test suite compiles every row (oom_table_ok).
class LazyRow {
 public:
  const CompiledPattern& get(const OomPattern& pattern) {
    std::call_once(once_, [&] { compiled_ = compile_row(pattern); });
    return compiled_;
  }

 private:
  std::once_flag once_;
  CompiledPattern compiled_;
};

// The rows, and all their regexes in one RE2::Set: one DFA pass over a record says which rows
// can match, so a record that passed the prefilter but matches nothing (most of them: "memory"
// is a common word) costs one pass, not one per row.
struct CompiledTable {
  explicit CompiledTable(size_t n) : rows(n) {}
  const CompiledPattern& row(size_t index) { return rows[index].get(oom_patterns()[index]); }

  std::vector<LazyRow> rows;
  std::unique_ptr<RE2::Set> set;  // null when a row failed to parse: every row is tried then
};

CompiledTable& compiled_table() {
  static CompiledTable kTable = [] {
    CompiledTable table(oom_patterns().size());
    auto set = std::make_unique<RE2::Set>(quiet_options(), RE2::UNANCHORED);
    bool set_ok = true;
    int index = 0;
    for (const OomPattern& pattern : oom_patterns()) {
      set_ok = set_ok && set->Add(pattern.regex, nullptr) == index++;
    }
    if (set_ok && set->Compile()) table.set = std::move(set);
    return table;
  }();
  return kTable;
}

// The row's full check: its regex (for where the match starts and the device), `also`, `veto`.
std::optional<OomMatch> try_row(const CompiledPattern& entry, std::string_view line) {
  re2::StringPiece submatch[kMaxGroups];  // no allocation per row
  const int ngroups = entry.dev_group > 0 && entry.dev_group < kMaxGroups ? entry.dev_group + 1 : 1;
  if (!entry.regex->Match(line, 0, line.size(), RE2::UNANCHORED, submatch, ngroups)) {
    return std::nullopt;
  }
  if (entry.also && !RE2::PartialMatch(line, *entry.also)) return std::nullopt;
  if (entry.veto && RE2::PartialMatch(line, *entry.veto)) return std::nullopt;
  OomMatch match;
  match.pattern = entry.pattern;
  match.kind = entry.pattern->kind;
  if (ngroups > 1) match.kind = kind_for_device(submatch[entry.dev_group], match.kind);
  match.begin = static_cast<size_t>(submatch[0].data() - line.data());
  return match;
}

const RE2& class_regex() {
  static const RE2 kClass(R"(^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)\b))",
                          quiet_options());
  return kClass;
}

void report(std::string* error, std::string_view what, std::string_view why) {
  if (error == nullptr) return;
  if (!error->empty()) error->append("; ");
  error->append(what);
  error->append(": ");
  error->append(why);
}

bool check_rows(const std::vector<CompiledPattern>& rows, std::string* error) {
  bool ok = true;
  for (const CompiledPattern& entry : rows) {
    const std::string name = "oom pattern " + std::string(entry.pattern->name);
    for (const auto& [what, regex] :
         {std::pair{"", entry.regex.get()}, std::pair{" (also)", entry.also.get()},
          std::pair{" (veto)", entry.veto.get()}}) {
      if (regex != nullptr && !regex->ok()) {
        ok = false;
        report(error, name + what, regex->error());
      }
    }
    if (entry.dev_group >= kMaxGroups) {
      ok = false;
      report(error, name, "the dev group must be among the first 7 groups");
    }
  }
  return ok;
}

}  // namespace

Result<Ok> oom_patterns_ok() {
  std::string problems;
  if (!compiled_table().set) {  // every row's regex is parsed by the set
    report(&problems, "oom pattern set", "RE2::Set did not compile");
  }
  if (!oom_literals().ok()) report(&problems, "may_mention_oom literals", oom_literals().error());
  if (!class_regex().ok()) report(&problems, "exception_class", class_regex().error());
  if (!problems.empty()) return make_error(ErrorCode::kBadInput, problems);
  return Ok{};
}

Result<Ok> oom_table_ok(const std::vector<OomPattern>& table) {
  std::vector<CompiledPattern> rows;
  for (const OomPattern& pattern : table) rows.push_back(compile_row(pattern));
  std::string problems;
  if (!check_rows(rows, &problems)) return make_error(ErrorCode::kBadInput, problems);
  return Ok{};
}

const RE2& oom_literals() {
  // Every row above contains one of these literals; RE2 turns the alternation into one DFA pass.
  // Add one only for a row that none of these covers.
  static const RE2 kLiterals(
      R"(emory|EMORY|OOM|ALLOC_FAILED|Killed|KILL|Allocation on device|Bus error|Signal 9|)"
      R"(exitcode|return code = -9|137|/dev/shm|oom-kill|Failed to CUDA|OM [Dd]etected|)"
      R"(bad_alloc|executable batch size|Unable to allocate|[Bb]atch size \d+ failed|)"
      R"(RESOURCE_EXHAUSTED|OUT_OF_DEVICE_MEMORY|low on memory|memory pressure|oom-kill|)"
      R"(OOM killer|zsh: killed|Forced quit|available RAM|)" KILLED_WORDS,
      quiet_options());
  return kLiterals;
}

bool may_mention_oom(std::string_view text) { return RE2::PartialMatch(text, oom_literals()); }

std::optional<int64_t> memory_summary_ooms(std::string_view text) {
  static const RE2 kOoms(R"((?:^|\|)\s*CUDA OOMs: (\d{1,9})\s*\|)", quiet_options());
  int64_t count = 0;
  if (!RE2::PartialMatch(text, kOoms, &count)) return std::nullopt;
  return count;
}

const OomPattern& memory_summary_pattern() {
  static const OomPattern kSummary{.name = "memory-summary-ooms",
                                   .kind = OomKind::kCuda,
                                   .regex = {},
                                   .also = {},
                                   .veto = {},
                                   .recovered = true,
                                   .phase = Phase::kUnknown,
                                   .allocator_message = false,
                                   .gpu_index = std::nullopt,
                                   .samples = {}};
  return kSummary;
}

bool is_bare_backoff(std::string_view text) {
  static const RE2 kBackoff(
      R"((?i)^(?:skipp(?:ing|ed) (?:this |the )?batch|retrying with (?:a )?(?:smaller )?batch)"
      R"(|reducing (?:the )?batch size to \d+)\b)",
      quiet_options());
  return RE2::PartialMatch(text, kBackoff);
}

std::optional<OomMatch> match_oom(std::string_view line) {
  CompiledTable& table = compiled_table();
  if (table.set) {
    thread_local std::vector<int> hits;
    hits.clear();
    RE2::Set::ErrorInfo info{};
    if (table.set->Match(line, &hits, &info)) {
      std::sort(hits.begin(), hits.end());  // the first row in table order wins
      for (int index : hits) {
        if (auto match = try_row(table.row(static_cast<size_t>(index)), line)) return match;
      }
      return std::nullopt;
    }
    if (info.kind == RE2::Set::kNoError) return std::nullopt;
    // The set's DFA ran out of memory on this record: fall back to trying every row.
  }
  for (size_t index = 0; index < table.rows.size(); ++index) {
    if (auto match = try_row(table.row(index), line)) return match;
  }
  return std::nullopt;
}

std::optional<std::string_view> exception_class(std::string_view line) {
  re2::StringPiece cls;
  if (RE2::PartialMatch(line, class_regex(), &cls)) {
    return std::string_view(cls.data(), cls.size());
  }
  return std::nullopt;
}

}  // namespace oomtriage::parsers
