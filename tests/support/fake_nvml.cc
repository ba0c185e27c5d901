// tests/support/fake_nvml.cc
//
// A stand-in libnvidia-ml.so.1 for tests of the GPU memory timeline on machines without a GPU:
// the few NVML entry points oomtriage calls (daemon/common/nvml_sampler.h, nvml_probe.h), with
// the answers read, at the count and at every handle of card 0 (once per sample), from the file
// that FAKE_NVML_STATE names. A test rewrites that file (write aside, rename) to script the cards:
//   gpu <index> <total bytes> <used bytes>
//   process <gpu index> <pid> <used bytes>
//   hang <gpu index>           nvmlDeviceGetMemoryInfo on that card does not return while the
//                              line is in the file (a GPU off the bus, a wedged driver)
//   error <gpu index> <code>   nvmlDeviceGetMemoryInfo on that card fails with NVML's code
//                              (15: NVML_ERROR_GPU_IS_LOST)
// A missing or empty file is a machine with no GPU. Each memory reading of card 0 (one per
// sample) adds a line to <that file>.samples, so a test waits for samples, not for a time.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace {

constexpr int kCards = 8;
constexpr int kProcesses = 64;

struct Card {
  unsigned long long total = 0, used = 0;
  bool hang = false;
  int error = 0;
  unsigned processes = 0;
  unsigned pid[kProcesses] = {};
  unsigned long long process_used[kProcesses] = {};
};

Card cards[kCards];
unsigned card_count = 0;
bool initialised = false;

void read_state() {
  for (Card& card : cards) card = Card{};
  card_count = 0;
  const char* path = std::getenv("FAKE_NVML_STATE");
  FILE* file = path ? std::fopen(path, "r") : nullptr;
  if (file == nullptr) return;
  char kind[16];
  while (std::fscanf(file, "%15s", kind) == 1) {
    if (std::strcmp(kind, "gpu") == 0) {
      unsigned index = 0;
      unsigned long long total = 0, used = 0;
      if (std::fscanf(file, "%u %llu %llu", &index, &total, &used) != 3 || index >= kCards) break;
      cards[index].total = total;
      cards[index].used = used;
      if (index + 1 > card_count) card_count = index + 1;
    } else if (std::strcmp(kind, "process") == 0) {
      unsigned index = 0, pid = 0;
      unsigned long long used = 0;
      if (std::fscanf(file, "%u %u %llu", &index, &pid, &used) != 3 || index >= kCards) break;
      Card& card = cards[index];
      if (card.processes < kProcesses) {
        card.pid[card.processes] = pid;
        card.process_used[card.processes] = used;
        ++card.processes;
      }
    } else if (std::strcmp(kind, "hang") == 0) {
      unsigned index = 0;
      if (std::fscanf(file, "%u", &index) != 1 || index >= kCards) break;
      cards[index].hang = true;
    } else if (std::strcmp(kind, "error") == 0) {
      unsigned index = 0;
      int code = 0;
      if (std::fscanf(file, "%u %d", &index, &code) != 2 || index >= kCards) break;
      cards[index].error = code;
    } else {
      break;
    }
  }
  std::fclose(file);
}

struct Memory {
  unsigned long long total, free, used;
};
struct ProcessInfo {  // nvmlProcessInfo_v2_t
  unsigned pid;
  unsigned long long used;
  unsigned gpu_instance, compute_instance;
};

void count_sample() {
  const char* path = std::getenv("FAKE_NVML_STATE");
  if (path == nullptr) return;
  char name[4096];
  std::snprintf(name, sizeof name, "%s.samples", path);
  if (FILE* file = std::fopen(name, "a")) {
    std::fputc('\n', file);
    std::fclose(file);
  }
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int nvmlInit_v2() {
  initialised = true;
  read_state();
  return 0;
}
__attribute__((visibility("default"))) int nvmlShutdown() {
  initialised = false;
  return 0;
}
__attribute__((visibility("default"))) const char* nvmlErrorString(int code) {
  return code == 15 ? "GPU is lost" : "Unknown Error";
}
__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned* count) {
  if (!initialised) return 1;
  read_state();
  *count = card_count;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned index,
                                                                         void** device) {
  if (initialised && index == 0) read_state();
  if (!initialised || index >= card_count) return 2;
  *device = &cards[index];
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void* device, Memory* memory) {
  const Card* card = static_cast<const Card*>(device);
  // Held here, as a wedged driver holds the caller, until the test takes the line away.
  while (card->hang) {
    const timespec pause{0, 20 * 1000 * 1000};
    nanosleep(&pause, nullptr);
    read_state();
  }
  if (card == &cards[0]) count_sample();
  if (card->error != 0) return card->error;
  memory->total = card->total;
  memory->used = card->used;
  memory->free = card->total - card->used;
  return 0;
}
__attribute__((visibility("default"))) int nvmlDeviceGetComputeRunningProcesses_v2(
    void* device, unsigned* count, ProcessInfo* infos) {
  const Card* card = static_cast<const Card*>(device);
  if (*count < card->processes) {
    *count = card->processes;
    return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
  }
  *count = card->processes;
  for (unsigned k = 0; k < card->processes; ++k) {
    infos[k] = {card->pid[k], card->process_used[k], 0, 0};
  }
  return 0;
}

}  // extern "C"
