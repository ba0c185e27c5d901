// tests/daemon/nvml_probe_test.cc
//
// daemon/common/nvml_probe: which card CUDA_VISIBLE_DEVICES names, and `check --gpu auto`
// through a stand-in libnvidia-ml.so.1 (built here with the C compiler, found through
// LD_LIBRARY_PATH), so the dlopen path is run on machines without a GPU: the card's size comes
// from NVML, the index from CUDA_VISIBLE_DEVICES, and an NVML error is one line and exit 2.
#include "daemon/common/nvml_probe.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "tests/support/e2e.h"
#include "tests/support/skip.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

// Card 0 holds 24 GiB, card 1 80 GiB; no card 2 or beyond (NVML_ERROR_INVALID_ARGUMENT, 2).
constexpr const char* kFakeNvml = R"(
typedef struct { unsigned long long total, free, used; } Memory;
static int initialised;
int nvmlInit_v2(void) { initialised = 1; return 0; }
int nvmlShutdown(void) { initialised = 0; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void** device) {
  if (!initialised) return 1;
  if (index > 1) return 2;
  *device = (void*)(unsigned long)(index + 1);
  return 0;
}
int nvmlDeviceGetMemoryInfo(void* device, Memory* memory) {
  if (!initialised) return 1;
  memory->total = ((unsigned long)device == 1 ? 24ull : 80ull) << 30;
  memory->free = memory->total;
  memory->used = 0;
  return 0;
}
const char* nvmlErrorString(int code) { return code == 2 ? "Invalid Argument" : "Unknown Error"; }
)";

}  // namespace

TEST_SUITE("daemon::nvml_probe") {
  TEST_CASE("the card is CUDA_VISIBLE_DEVICES's first index, else 0") {
    CHECK(daemon::cuda_device_index(std::nullopt) == 0);
    CHECK(daemon::cuda_device_index("") == 0);
    CHECK(daemon::cuda_device_index("1") == 1);
    CHECK(daemon::cuda_device_index("3,0,1") == 3);
    CHECK(daemon::cuda_device_index("GPU-8f3a2c1e-0000-1111-2222-333344445555") == 0);
    CHECK(daemon::cuda_device_index("1x") == 0);
    CHECK(daemon::cuda_device_index("-1") == 0);
  }

  TEST_CASE("check --gpu auto sizes the card NVML reports for CUDA_VISIBLE_DEVICES's index") {
    if (!have_program("cc")) OOMTRIAGE_SKIP("no C compiler to build the stand-in NVML");
    TempDir dir;
    std::ofstream(dir.path / "fake_nvml.c") << kFakeNvml;
    const fs::path lib = dir.path / "libnvidia-ml.so.1";
    REQUIRE(std::system(
                ("cc -shared -fPIC -o " + lib.string() + " " + (dir.path / "fake_nvml.c").string())
                    .c_str()) == 0);
    std::ofstream(dir.path / "spec.json")
        << R"({"model_family": "flux1-dev", "resolution": [1024, 1024], "batch_size": 1})";
    ScopedEnv library_path("LD_LIBRARY_PATH", dir.path.string());
    const std::string check =
        std::string(OOMTRIAGE_BINARY) + " check --spec " + (dir.path / "spec.json").string();

    const auto card_bytes = [&](const std::string& visible) {
      ScopedEnv devices("CUDA_VISIBLE_DEVICES", visible);
      int code = 0;
      std::string out;
      std::tie(code, out) = run_shell(check + " --json 2>/dev/null");
      CAPTURE(out);
      CHECK((code == 0 || code == 3));
      const auto doc = nlohmann::json::parse(out, nullptr, false);
      REQUIRE(doc.is_object());
      return doc["card_bytes"].get<uint64_t>();
    };
    CHECK(card_bytes("") == (24ull << 30));
    CHECK(card_bytes("1,0") == (80ull << 30));

    ScopedEnv devices("CUDA_VISIBLE_DEVICES", "5");
    const auto [code, said] = run_shell(check + " 2>&1");
    CHECK(code == 2);
    CHECK(said ==
          "oomtriage: --gpu auto: NVML: nvmlDeviceGetHandleByIndex_v2 (GPU 5): Invalid Argument "
          "(NVML error 2): give the card's size, e.g. --gpu 24GiB\n");
  }
}
