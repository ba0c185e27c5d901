// triage/ranking_table.cc: the ranking table, the seed guide's rules as data (docs/domain.md),
// and the Markdown that docs/ranking.md shows of it. The fixes it names are made by the planner
// (triage/planner.h).
#include "triage/ranker.h"

#include <fmt/format.h>

namespace oomtriage::triage {

const std::vector<RankingRow>& ranking_table() {
  // A table, one entry per row as written:
  // clang-format off
  static const std::vector<RankingRow> kTable = {
      {Situation::kShm, "`/dev/shm` too small", {{"increase_shm", 0}}},
      {Situation::kHost,
       "host OOM kill, `MemoryError`: host-RAM fixes only (latents to disk only when they are "
       "cached in host RAM)",
       {{"reduce_host_memory", 0}, {"cache_latents_to_disk", 20}}},
      {Situation::kOtherProcesses,
       "other processes hold 10% of the GPU or more (a lone \"process\" matching this job's "
       "own memory is the job): no config change gives it back",
       {{"free_gpu", 0}}, true},
      {Situation::kFragmentation,
       "reserved-but-unallocated of 1 GiB or more (leads only when it covers the request minus "
       "free memory, else last)",
       {{"expandable_segments", 5}}, true},
      {Situation::kCheckpointingOff,
       "seed rule 1: any GPU OOM but load and caching with gradient checkpointing off: turn it "
       "on first, same batch and resolutions (step 2-3 and the first preview are its signature: "
       "the allocator keeps the training peak reserved into sampling); not shown: a check, early "
       "OOMs first, else after the situation's first fix",
       {{"enable_gradient_checkpointing", 1}}, true},
      {Situation::kQuantize,
       "quantizing: the low-VRAM path quantizes on the CPU, then a lower qtype",
       {{"enable_low_vram", 8}, {"quantize_model", 10}, {"layer_offloading", 20}}},
      {Situation::kLoad,
       "model load / quantize",
       {{"quantize_model", 10}, {"quantize_text_encoder", 12}, {"enable_low_vram", 14},
        {"layer_offloading", 20}}},
      {Situation::kCacheTextEmbeddings,
       "caching text embeddings",
       {{"quantize_text_encoder", 10}, {"enable_low_vram", 12}}},
      {Situation::kCacheLatents,
       "caching latents",
       {{"enable_low_vram", 10}, {"drop_top_bucket", 12}, {"lower_resolution", 13}}},
      {Situation::kSampling,
       "preview sampling, validation, evaluation (baseline included)",
       {{"cheapen_previews", 10}, {"skip_first_sample", 15}, {"match_target_res", 18},
        {"disable_sampling", 20}, {"enable_low_vram", 25}}, true},
      {Situation::kTrainLaterBuckets,
       "training step after step 5, several buckets",
       {{"reduce_num_frames", 8}, {"match_target_res", 9}, {"drop_top_bucket", 10},
        {"lower_batch_size", 12}}, true},
      {Situation::kTrainBatch,
       "training step, batch above 1 (or not shown)",
       {{"reduce_num_frames", 8}, {"match_target_res", 9}, {"lower_batch_size", 10},
        {"drop_top_bucket", 12}, {"lower_resolution", 13}}, true},
      {Situation::kTrainBatchOne,
       "training step, batch 1",
       {{"reduce_num_frames", 8}, {"match_target_res", 9}, {"drop_top_bucket", 10},
        {"lower_resolution", 11}}, true},
      {Situation::kTrainAny,
       "any training step, after the above",
       {{"use_bf16", 15}, {"enable_low_vram", 20}, {"quantize_model", 21},
        {"cache_text_embeddings", 22}, {"layer_offloading", 26}, {"cache_latents_to_disk", 28},
        {"use_8bit_optimizer", 30}}},
  };
  // clang-format on
  return kTable;
}

std::string ranking_table_markdown() {
  std::string out = "| situation | candidate fixes (priority) |\n|---|---|\n";
  for (const RankingRow& row : ranking_table()) {
    std::vector<std::string> fixes;
    for (const auto& [id, priority] : row.fixes)
      fixes.push_back(fmt::format("`{}` ({})", id, priority));
    out += fmt::format("| {}{} | {} |\n", row.when, row.leads ? " (leads)" : "",
                       fmt::join(fixes, ", "));
  }
  return out;
}

}  // namespace oomtriage::triage
