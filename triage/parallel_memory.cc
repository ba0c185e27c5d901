// triage/parallel_memory.cc: the shares per sharding. ZeRO-1 shards the optimizer states, ZeRO-2
// the gradients too, ZeRO-3 the parameters too (DeepSpeed's ZeRO paper's stages); FSDP's
// SHARD_GRAD_OP is ZeRO-2's, FULL_SHARD ZeRO-3's, HYBRID_SHARD shards within one machine.
#include "triage/parallel_memory.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace oomtriage::triage {
namespace {

std::string lower(std::string word) {
  for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return word;
}

bool offloaded(const std::optional<std::string>& where) {
  if (!where) return false;
  const std::string w = lower(*where);
  return w == "cpu" || w == "nvme" || w == "true";
}

}  // namespace

ParallelPlan parallel_plan(const MemorySpec& spec) {
  ParallelPlan plan;
  std::string sharding = lower(spec.sharding.value_or(""));
  if (sharding == "no" || sharding == "false") sharding = "none";
  if (sharding == "zero0" || sharding == "multi_gpu") sharding = "ddp";
  if (sharding == "fsdp" || sharding == "full_shard") sharding = "fsdp_full";
  if (sharding == "shard_grad_op") sharding = "fsdp_grad_op";
  if (sharding == "hybrid_shard") sharding = "fsdp_hybrid";
  plan.processes = std::max(1, spec.processes.value_or(1));
  if (!spec.processes && !sharding.empty() && sharding != "none") {
    plan.assumptions.push_back(
        fmt::format("{} without a process count: 1 GPU assumed (pass --num_processes)", sharding));
  }
  if (sharding.empty()) sharding = plan.processes > 1 ? "ddp" : "none";
  plan.sharding = sharding;
  const int n = plan.processes;
  // Hybrid sharding shards within a machine and replicates across machines.
  const int machines = std::max(1, spec.machines.value_or(1));
  const int local = std::max(1, n / machines);
  const double by_n = 1.0 / n;
  std::string what;
  if (sharding == "zero1") {
    plan.optimizer = by_n;
    what = fmt::format("ZeRO-1 shards the optimizer states {} ways", n);
  } else if (sharding == "zero2") {
    plan.optimizer = plan.gradients = by_n;
    what = fmt::format("ZeRO-2 shards the gradients and optimizer states {} ways", n);
  } else if (sharding == "zero3") {
    plan.optimizer = plan.gradients = plan.weights = by_n;
    plan.gathers_layers = n > 1;
    what = fmt::format("ZeRO-3 shards the parameters, gradients and optimizer states {} ways", n);
  } else if (sharding == "fsdp_full") {
    plan.optimizer = plan.gradients = plan.weights = by_n;
    plan.gathers_layers = n > 1;
    what = fmt::format(
        "FSDP full shard splits the parameters, gradients and optimizer states {} ways", n);
  } else if (sharding == "fsdp_grad_op" || sharding == "fsdp_hybrid_zero2") {
    const int ways = sharding == "fsdp_grad_op" ? n : local;
    plan.optimizer = plan.gradients = 1.0 / ways;
    what =
        fmt::format("FSDP shard-grad-op splits the gradients and optimizer states {} ways", ways);
  } else if (sharding == "fsdp_hybrid") {
    plan.optimizer = plan.gradients = plan.weights = 1.0 / local;
    plan.gathers_layers = local > 1;
    what = fmt::format(
        "FSDP hybrid shard splits the parameters, gradients and optimizer states {} ways within "
        "each machine",
        local);
  } else if (sharding == "ddp" || sharding == "fsdp_no_shard") {
    plan.gradient_buckets = n > 1;
    what = n > 1 ? "DDP: every GPU holds the whole job, plus the reducer's gradient buckets" : "";
  } else if (sharding != "none") {
    plan.assumptions.push_back(
        fmt::format("sharding '{}' not known: every GPU holding the whole job assumed", sharding));
  }
  plan.deepspeed = sharding.rfind("zero", 0) == 0;
  std::vector<std::string> offloads;
  if (offloaded(spec.offload_optimizer) && sharding != "none" && sharding != "ddp") {
    plan.optimizer = 0;
    // ZeRO-Offload moves the gradient partitions to the optimizer on the CPU.
    if (sharding != "zero1") plan.gradients = 0;
    offloads.push_back(fmt::format("the optimizer states to {}", lower(*spec.offload_optimizer)));
  }
  if (offloaded(spec.offload_params) && plan.gathers_layers) {
    plan.weights = 0;
    if (sharding.rfind("fsdp", 0) == 0) plan.gradients = plan.optimizer = 0;  // FSDP CPU offload
    offloads.push_back(fmt::format("the parameters to {}", lower(*spec.offload_params)));
  } else if (offloaded(spec.offload_params)) {
    plan.assumptions.push_back(
        "parameter offload needs ZeRO-3 or FSDP full shard: the parameters stay on the GPU");
  }
  if (!offloads.empty()) what += fmt::format("; offloads {}", fmt::join(offloads, " and "));
  const int cp = std::max(1, spec.context_parallel.value_or(1));
  if (cp > 1) {
    plan.activations = 1.0 / cp;
    what += fmt::format("{}context parallel splits each sequence {} ways", what.empty() ? "" : "; ",
                        cp);
  }
  if (n > 1 || !what.empty()) {
    plan.summary = fmt::format("per GPU, {} process{}{}{}", n, n == 1 ? "" : "es",
                               what.empty() ? "" : ": ", what);
  }
  return plan;
}

}  // namespace oomtriage::triage
