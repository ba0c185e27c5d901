// tests/parsers/oom_figures_test.cc: allocator figures from every message era, wrapped or cut.
#include "parsers/oom_figures.h"

#include <doctest/doctest.h>

#include <string>

using namespace oomtriage::parsers;

TEST_SUITE("parsers::oom_figures") {
  TEST_CASE("2.2+ format with other processes and this process") {
    const auto f = extract_figures(
        "CUDA out of memory. Tried to allocate 30.00 MiB. GPU 0 has a total capacity of 79.32 GiB "
        "of which 6.88 MiB is free. Process 1563103 has 9.89 GiB memory in use. Process 1563102 "
        "has 35.03 GiB memory in use. Including non-PyTorch memory, this process has 10.58 GiB "
        "memory in use. Of the allocated memory 9.56 GiB is allocated by PyTorch, and 534.22 MiB "
        "is reserved by PyTorch but unallocated.",
        OomKind::kCuda);
    CHECK(f.tried_to_allocate_bytes == 31457280u);
    CHECK(f.gpu_index == 0);
    CHECK(f.total_capacity_bytes == 85169201480u);
    CHECK(f.free_bytes == 7214203u);
    CHECK(f.allocated_by_pytorch_bytes == 10264971837u);
    CHECK(f.reserved_unallocated_bytes == 560170271u);
    CHECK(f.this_process_in_use_bytes == 11360188498u);
    REQUIRE(f.other_processes.size() == 2);
    CHECK(f.other_processes[0] == OtherProcess{1563103, 10619306639u});
  }
  TEST_CASE("2.1's 'capacty' typo and 0 bytes free") {
    const auto f = extract_figures(
        "CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a total capacty of 6.00 GiB of "
        "which 0 bytes is free. Of the allocated memory 2.93 GiB is allocated by PyTorch, and 2.30 "
        "GiB is reserved by PyTorch but unallocated.",
        OomKind::kCuda);
    CHECK(f.total_capacity_bytes == 6442450944u);
    CHECK(f.free_bytes == 0u);
    CHECK(f.reserved_unallocated_bytes == 2469606195u);
  }
  TEST_CASE("private pools and 'allowed' do not shift the other figures") {
    const auto f = extract_figures(
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.10 GiB "
        "of which 364.31 MiB is free. 17.51 GiB allowed; Of the allocated memory 13.73 GiB is "
        "allocated by PyTorch, with 46.00 MiB allocated in private pools (e.g., CUDA Graphs), and "
        "736.86 MiB is reserved by PyTorch but unallocated.",
        OomKind::kCuda);
    CHECK(f.gpu_index == 1);
    CHECK(f.allocated_by_pytorch_bytes == 14742475244u);
    CHECK(f.reserved_unallocated_bytes == 772653711u);
  }
  TEST_CASE("1.x format: already allocated, free, reserved in total, and 'cached' is left out") {
    auto f = extract_figures(
        "CUDA out of memory. Tried to allocate 512.00 MiB (GPU 0; 12.00 GiB total capacity; 1.33 "
        "GiB already allocated; 8.57 GiB free; 1.36 GiB reserved in total by PyTorch)",
        OomKind::kCuda);
    CHECK(f.tried_to_allocate_bytes == 536870912u);
    CHECK(f.total_capacity_bytes == 12884901888u);
    CHECK(f.allocated_by_pytorch_bytes == 1428076626u);
    CHECK(f.free_bytes == 9201967432u);
    CHECK(f.reserved_total_bytes == 1460288881u);
    CHECK_FALSE(f.reserved_unallocated_bytes);
    f = extract_figures(
        "CUDA out of memory. Tried to allocate 1024.00 KiB (GPU 0; 11.17 GiB total capacity; 10.90 "
        "GiB already allocated; 576.00 KiB free; 30.96 MiB cached)",
        OomKind::kCuda);
    CHECK(f.free_bytes == 589824u);
    CHECK_FALSE(f.reserved_total_bytes);
  }
  TEST_CASE("a message cut mid-figure keeps only the complete figures") {
    const auto f = extract_figures(
        "CUDA out of memory. Tried to allocate 28.00 MiB. GPU 1 has a total capacity of 8.0",
        OomKind::kCuda);
    CHECK(f.tried_to_allocate_bytes == 29360128u);
    CHECK(f.gpu_index == 1);
    CHECK_FALSE(f.total_capacity_bytes);
    const auto g = extract_figures(
        "CUDA out of memory. Tried to allocate 2.03 GiB. GPU 0 has a total capacity of 31.84 GiB "
        "of which 0 bytes is free. Of the allocated memory 29.69 GiB is allocated by PyTorch, and "
        "138.42 MiB is res",
        OomKind::kCuda);
    CHECK(g.reserved_unallocated_bytes == 145143890u);
  }
  TEST_CASE("a hard-wrapped message joined from its lines") {
    const auto f = extract_figures(
        "CUDA out of memory. Tried to allocate 304.00 MiB (GPU 0; 31.75 GiB total capacity; "
        "18.20 GiB already allocated; 131.50 MiB free; 18.33 GiB reserved in total by",
        OomKind::kCuda);
    CHECK(f.free_bytes == 137887744u);
    CHECK(f.reserved_total_bytes == 19681687634u);
  }
  TEST_CASE("XPU has no free clause") {
    const auto f = extract_figures(
        "XPU out of memory. Tried to allocate 8.00 GiB. GPU 0 has a total capacity of 15.11 GiB. "
        "Of the allocated memory 0 bytes is allocated by PyTorch, and 0 bytes is reserved by "
        "PyTorch but unallocated.",
        OomKind::kXpu);
    CHECK(f.total_capacity_bytes == 16224238961u);
    CHECK_FALSE(f.free_bytes);
    CHECK(f.allocated_by_pytorch_bytes == 0u);
  }
  TEST_CASE("MPS: allocated and requested, in GB or GiB") {
    auto f = extract_figures(
        "MPS backend out of memory (MPS allocated: 33.48 GB, other allocations: 2.45 GB, max "
        "allowed: 36.27 GB). Tried to allocate 600.15 MB on private pool.",
        OomKind::kMps);
    CHECK(f.allocated_by_pytorch_bytes == 35948876268u);
    CHECK(f.tried_to_allocate_bytes == 629302886u);
    CHECK_FALSE(f.total_capacity_bytes);
    f = extract_figures(
        "MPS backend out of memory (MPS allocated: 15.72 GiB, other allocations: 2.41 MiB, max "
        "allowed: 18.13 GiB). Tried to allocate 5.81 GiB on private pool.",
        OomKind::kMps);
    CHECK(f.tried_to_allocate_bytes == 6238439997u);
  }
  TEST_CASE("cudaMallocAsync's table") {
    const auto f = extract_figures(
        "Allocation on device 0 would exceed allowed memory. (out of memory) Currently allocated  "
        "   : 21.50 GiB Requested               : 2.00 GiB Device limit            : 23.65 GiB "
        "Free (according to CUDA): 18.00 MiB",
        OomKind::kCuda);
    CHECK(f.allocated_by_pytorch_bytes == 23085449216u);
    CHECK(f.tried_to_allocate_bytes == 2147483648u);
    CHECK(f.total_capacity_bytes == 25393994138u);
    CHECK(f.free_bytes == 18874368u);
  }
  TEST_CASE("completeness of a message decides whether the next line may continue it") {
    CHECK(looks_incomplete("CUDA out of memory. Tried to allocate 1.00 GiB (GPU 0; 18.33"));
    CHECK_FALSE(looks_incomplete("... 1.36 GiB reserved in total by PyTorch)"));
    // ComfyUI's short form is all it prints; cudaMallocAsync's own message goes on.
    CHECK_FALSE(looks_incomplete("Allocation on device "));
    CHECK_FALSE(looks_incomplete("Allocation on device                   execution.py:430"));
    CHECK(looks_incomplete("Allocation on device 0 would exceed allowed memory. (out of memory)"));
    CHECK_FALSE(looks_incomplete(
        "... If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
        "documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html"));
  }
  TEST_CASE("1.x clauses are each found even when an unknown clause sits between them") {
    auto f = extract_figures(
        "CUDA out of memory. Tried to allocate 1024.00 KiB (GPU 0; 11.17 GiB total capacity; 10.90 "
        "GiB already allocated; 2.00 GiB allowed; 3.00 GiB something new; 576.00 KiB free; 30.96 "
        "MiB cached)",
        OomKind::kCuda);
    CHECK(f.gpu_index == 0);
    CHECK(f.total_capacity_bytes == 11993696174u);
    CHECK(f.allocated_by_pytorch_bytes == 11703785882u);
    CHECK(f.free_bytes == 589824u);
    CHECK_FALSE(f.reserved_total_bytes);
    // An unknown clause first, and the NPU's "current active", and "allowed" before reserved.
    f = extract_figures(
        "NPU out of memory. Tried to allocate 2.00 GiB (NPU 3; 1.00 GiB mystery; 60.00 GiB total "
        "capacity; 50.00 GiB already allocated; 51.00 GiB current active; 1.00 GiB free; 58.00 "
        "GiB allowed; 55.00 GiB reserved in total by PyTorch)",
        OomKind::kCuda);
    CHECK(f.gpu_index == 3);
    CHECK(f.total_capacity_bytes == 64424509440u);
    CHECK(f.allocated_by_pytorch_bytes == 53687091200u);
    CHECK(f.free_bytes == 1073741824u);
    CHECK(f.reserved_total_bytes == 59055800320u);
    // IPEX's XPU layout has no free clause at all.
    f = extract_figures(
        "XPU out of memory. Tried to allocate 8.00 GiB (GPU 0; 15.11 GiB total capacity; 8.00 GiB "
        "already allocated; 9.00 GiB reserved in total by PyTorch)",
        OomKind::kXpu);
    CHECK(f.total_capacity_bytes == 16224238961u);
    CHECK_FALSE(f.free_bytes);
    CHECK(f.reserved_total_bytes == 9663676416u);
  }
  TEST_CASE("2.2+ clauses are each found: ROCm without processes, unknown clauses between") {
    auto f = extract_figures(
        "HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 15.98 GiB "
        "of which 1.21 GiB is free. Of the allocated memory 13.00 GiB is allocated by PyTorch, "
        "and 1.50 GiB is reserved by PyTorch but unallocated.",
        OomKind::kHip);
    CHECK(f.total_capacity_bytes == 17158394348u);
    CHECK(f.free_bytes == 1299227607u);
    CHECK(f.reserved_unallocated_bytes == 1610612736u);
    CHECK(f.other_processes.empty());
    f = extract_figures(
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB "
        "of which 364.31 MiB is free. Process 1234 has 1.46 GiB memory in use. 3.00 GiB held by "
        "the driver. 17.51 GiB allowed; Of the allocated memory 13.73 GiB is allocated by "
        "PyTorch, with 46.00 MiB allocated in private pools (e.g., CUDA Graphs), with 1.00 GiB "
        "in some future pool, and 736.86 MiB is reserved by PyTorch but unallocated.",
        OomKind::kCuda);
    CHECK(f.free_bytes == 382006723u);
    REQUIRE(f.other_processes.size() == 1);
    CHECK(f.other_processes[0] == OtherProcess{1234, 1567663063u});
    CHECK(f.allocated_by_pytorch_bytes == 14742475244u);
    CHECK(f.reserved_unallocated_bytes == 772653711u);
  }
  TEST_CASE("figures of a re-cased message") {
    auto f = extract_figures(
        "cuda out of memory. tried to allocate 20.00 mib. gpu 2 has a total capacity of 23.55 "
        "gib of which 1.02 gib is free. process 77 has 3.00 gib memory in use. of the allocated "
        "memory 21.00 gib is allocated by pytorch, and 200.00 mib is reserved by pytorch but "
        "unallocated.",
        OomKind::kCuda);
    CHECK(f.tried_to_allocate_bytes == 20971520u);
    CHECK(f.gpu_index == 2);
    CHECK(f.free_bytes == 1095216660u);
    CHECK(f.allocated_by_pytorch_bytes == 22548578304u);
    CHECK(f.reserved_unallocated_bytes == 209715200u);
    CHECK(f.other_processes.size() == 1);
    f = extract_figures(
        "CUDA OUT OF MEMORY. TRIED TO ALLOCATE 512.00 MIB (GPU 0; 12.00 GIB TOTAL CAPACITY; 1.33 "
        "GIB ALREADY ALLOCATED; 8.57 GIB FREE; 1.36 GIB RESERVED IN TOTAL BY PYTORCH)",
        OomKind::kCuda);
    CHECK(f.tried_to_allocate_bytes == 536870912u);
    CHECK(f.free_bytes == 9201967432u);
    CHECK(f.reserved_total_bytes == 1460288881u);
    CHECK_FALSE(looks_incomplete("... 1.36 GIB RESERVED IN TOTAL BY PYTORCH)"));
  }
  TEST_CASE("every figure pattern compiled") {
    const auto compiled = oom_figures_ok();
    CHECK_MESSAGE(compiled, (compiled ? "" : compiled.error().message));
  }
}
