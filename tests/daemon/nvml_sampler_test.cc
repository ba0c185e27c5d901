// tests/daemon/nvml_sampler_test.cc
//
// daemon/common/nvml_sampler through a stand-in NVML built here with the C compiler and opened
// by path (OOMTRIAGE_NVML_LIBRARY's way): each card's memory, every compute process's memory
// (more of them than the first buffer holds, one NVML cannot measure), the _v2 query where a
// library has it and the unversioned one of old drivers (whose record is smaller), and the
// one-line errors of a missing library and of a machine without a GPU. The test sets the
// stand-in's answers through its exported variables.
#include "daemon/common/nvml_sampler.h"

#include <dlfcn.h>
#include <doctest/doctest.h>

#include <fstream>

#include "tests/support/e2e.h"
#include "tests/support/skip.h"

using namespace oomtriage;
using namespace oomtriage::daemon;
using namespace oomtriage::testing;

namespace {

// Built as a modern driver's library (_v2, and _v3 with R535's 32-byte record) or, with
// -DOLD_DRIVER, one with only the unversioned query and its 16-byte record.
constexpr const char* kFakeNvml = R"(
typedef struct { unsigned long long total, free, used; } Memory;
typedef struct { unsigned pid; unsigned long long used; } InfoV1;
typedef struct { unsigned pid; unsigned long long used; unsigned gi, ci; } InfoV2;
int fake_devices = 1;
unsigned long long fake_total[4], fake_used[4];
unsigned fake_process_count[4];
unsigned fake_pid[4][100];
unsigned long long fake_process_used[4][100];
static int initialised;
int nvmlInit_v2(void) { initialised = 1; return 0; }
int nvmlShutdown(void) { initialised = 0; return 0; }
const char* nvmlErrorString(int code) { return code == 3 ? "Not Supported" : "Unknown Error"; }
int nvmlDeviceGetCount_v2(unsigned* count) { *count = fake_devices; return initialised ? 0 : 1; }
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (!initialised || index >= (unsigned)fake_devices) return 2;
  *device = (void*)(unsigned long)(index + 1);
  return 0;
}
int nvmlDeviceGetMemoryInfo(void* device, Memory* memory) {
  unsigned i = (unsigned)(unsigned long)device - 1;
  memory->total = fake_total[i];
  memory->used = fake_used[i];
  memory->free = fake_total[i] - fake_used[i];
  return 0;
}
#define QUERY(Info)                                                                 \
  unsigned i = (unsigned)(unsigned long)device - 1;                                 \
  if (*count < fake_process_count[i]) { *count = fake_process_count[i]; return 7; } \
  *count = fake_process_count[i];                                                   \
  for (unsigned k = 0; k < fake_process_count[i]; ++k) {                            \
    infos[k].pid = fake_pid[i][k];                                                  \
    infos[k].used = fake_process_used[i][k];                                        \
  }                                                                                 \
  return 0;
#ifdef OLD_DRIVER
int nvmlDeviceGetComputeRunningProcesses(void* device, unsigned* count, InfoV1* infos) {
  QUERY(InfoV1)
}
#else
int nvmlDeviceGetComputeRunningProcesses_v2(void* device, unsigned* count, InfoV2* infos) {
  QUERY(InfoV2)
}
/* R535's _v3: 32 bytes a process, a reader of 24-byte records gets garbage after the first. */
typedef struct { unsigned pid; unsigned long long used, cc_protected; unsigned gi, ci; } InfoR535;
int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned* count, InfoR535* infos) {
  QUERY(InfoR535)
}
#endif
)";

// The stand-in built once per flavour, and its variables.
struct FakeNvml {
  TempDir dir;
  std::string path;
  void* handle = nullptr;

  explicit FakeNvml(bool old_driver) {
    std::ofstream(dir.path / "fake_nvml.c") << kFakeNvml;
    path = (dir.path / "libnvidia-ml.so.1").string();
    const std::string build = std::string("cc -shared -fPIC ") +
                              (old_driver ? "-DOLD_DRIVER " : "") + "-o " + path + " " +
                              (dir.path / "fake_nvml.c").string();
    REQUIRE(std::system(build.c_str()) == 0);
    handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    REQUIRE(handle != nullptr);
  }
  ~FakeNvml() { ::dlclose(handle); }
  template <class T>
  T* variable(const char* name) {
    void* address = ::dlsym(handle, name);
    REQUIRE(address != nullptr);
    return static_cast<T*>(address);
  }
  // Card `card`: `total` and `used` GiB, and processes pid 1000+k using `each` MiB but the
  // last, which NVML cannot measure.
  void set_card(unsigned card, unsigned long long total, unsigned long long used,
                unsigned processes, unsigned long long each) {
    variable<unsigned long long>("fake_total")[card] = total << 30;
    variable<unsigned long long>("fake_used")[card] = used << 30;
    variable<unsigned>("fake_process_count")[card] = processes;
    auto* pids = variable<unsigned[100]>("fake_pid");
    auto* bytes = variable<unsigned long long[100]>("fake_process_used");
    for (unsigned k = 0; k < processes; ++k) {
      pids[card][k] = 1000 + k;
      bytes[card][k] = k + 1 == processes ? ~0ull : each << 20;
    }
  }
};

}  // namespace

TEST_SUITE("daemon::nvml_sampler") {
  TEST_CASE("without NVML the sampler is one line saying so") {
    auto sampler = NvmlSampler::open("/nonexistent/libnvidia-ml.so.1");
    REQUIRE_FALSE(sampler);
    CHECK(sampler.error().message == "NVML is not available (/nonexistent/libnvidia-ml.so.1)");
  }

  TEST_CASE(
      "each card's memory and every compute process's, through _v2 (not _v3, whose record size "
      "varies)") {
    if (!have_program("cc")) OOMTRIAGE_SKIP("no C compiler to build the stand-in NVML");
    FakeNvml nvml(/*old_driver=*/false);
    *nvml.variable<int>("fake_devices") = 2;
    nvml.set_card(0, 24, 20, 2, 18 * 1024);
    nvml.set_card(1, 80, 70, 70, 1000);  // more processes than the first buffer (64)
    ScopedEnv library("OOMTRIAGE_NVML_LIBRARY", nvml.path);
    auto sampler = NvmlSampler::open();
    REQUIRE(sampler);
    CHECK((*sampler)->device_count() == 2);
    CHECK((*sampler)->process_query() == "nvmlDeviceGetComputeRunningProcesses_v2");
    const std::vector<GpuSample> cards = (*sampler)->sample();
    REQUIRE(cards.size() == 2);
    CHECK(cards[0].error.empty());
    CHECK(cards[0].total_bytes == 24ull << 30);
    CHECK(cards[0].used_bytes == 20ull << 30);
    REQUIRE(cards[0].processes.size() == 2);
    CHECK(cards[0].processes[0].pid == 1000);
    CHECK(cards[0].processes[0].used_bytes == (18ull * 1024) << 20);
    CHECK_FALSE(cards[0].processes[1].used_bytes);  // NVML_VALUE_NOT_AVAILABLE
    CHECK(cards[1].index == 1);
    REQUIRE(cards[1].processes.size() == 70);
    CHECK(cards[1].processes[69].pid == 1069);
    CHECK(cards[1].processes[68].used_bytes == 1000ull << 20);

    // The next sample sees what changed.
    nvml.set_card(0, 24, 23, 1, 23 * 1024);
    const std::vector<GpuSample> later = (*sampler)->sample();
    CHECK(later[0].used_bytes == 23ull << 30);
    CHECK(later[0].processes.size() == 1);
  }

  TEST_CASE("an old driver's unversioned query, with its smaller record, reads the same") {
    if (!have_program("cc")) OOMTRIAGE_SKIP("no C compiler to build the stand-in NVML");
    FakeNvml nvml(/*old_driver=*/true);
    nvml.set_card(0, 16, 12, 3, 4096);
    auto sampler = NvmlSampler::open(nvml.path);
    REQUIRE(sampler);
    CHECK((*sampler)->process_query() == "nvmlDeviceGetComputeRunningProcesses");
    const std::vector<GpuSample> cards = (*sampler)->sample();
    REQUIRE(cards.size() == 1);
    REQUIRE(cards[0].processes.size() == 3);
    CHECK(cards[0].processes[1].pid == 1001);
    CHECK(cards[0].processes[1].used_bytes == 4096ull << 20);
    CHECK_FALSE(cards[0].processes[2].used_bytes);
  }

  TEST_CASE("a machine whose NVML finds no GPU is one line, and nothing is sampled") {
    if (!have_program("cc")) OOMTRIAGE_SKIP("no C compiler to build the stand-in NVML");
    FakeNvml nvml(/*old_driver=*/false);
    *nvml.variable<int>("fake_devices") = 0;
    auto sampler = NvmlSampler::open(nvml.path);
    REQUIRE_FALSE(sampler);
    CHECK(sampler.error().message == "NVML found no GPU");
  }
}
