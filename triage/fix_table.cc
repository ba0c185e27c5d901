// triage/fix_table.cc: the rows. A row's planner reaches the Planner's plan_*() (fix_table() is
// the Planner's friend, triage/planner.h); what decides a fix's own priority or wording from the
// crash (checkpointing's place, low_vram's words per situation) stays in its row.
#include "triage/fix_table.h"

#include <algorithm>

#include "triage/planner.h"

namespace oomtriage::triage {

using detail::Planner;
using parsers::ModelFamily;
using parsers::Phase;

const std::vector<FixRow>& fix_table() {
  // clang-format off
  static const std::vector<FixRow> kRows = {
      {"enable_gradient_checkpointing",
       // Not shown: checked first for an OOM in the first steps (the GC-off signature), after
       // the situation's own first fix for a later one, and after the preview levers for a
       // sampling OOM (cheaper previews fix those, not checkpointing).
       [](Planner& p, int priority, Situation) {
         const bool early = p.e_.step && *p.e_.step <= 5 && p.e_.phase != Phase::kSampling;
         p.plan_gradient_checkpointing(priority, early                            ? 2
                                                 : p.e_.phase == Phase::kSampling ? 21
                                                                                  : 11);
       },
       true, "recompute activations in the backward pass instead of keeping them",
       "Turn gradient checkpointing on"},
      {"lower_batch_size",
       [](Planner& p, int priority, Situation) { p.plan_batch(priority); },
       true, "a smaller batch, keeping the effective batch via gradient accumulation",
       "Lower the batch size"},
      {"drop_top_bucket",
       [](Planner& p, int priority, Situation) { p.plan_top_bucket(priority); },
       true, "drop the largest resolution bucket",
       "Drop the largest bucket"},
      {"lower_resolution",
       [](Planner& p, int priority, Situation) { p.plan_lower_resolution(priority); },
       true, "train at the next lower resolution",
       "Train at a lower resolution"},
      {"cheapen_previews",
       [](Planner& p, int priority, Situation) { p.plan_previews(priority); },
       true, "smaller, fewer-step or rarer preview samples",
       "Make preview samples cheaper"},
      {"disable_sampling",
       [](Planner& p, int priority, Situation) { p.plan_disable_sampling(priority); },
       true, "no preview samples during training",
       "Turn preview sampling off"},
      {"reduce_num_frames",
       [](Planner& p, int priority, Situation) {
         if (parsers::is_video_family(p.c_.family)) p.plan_num_frames(priority);
       },
       true, "fewer frames per video clip",
       "Train on fewer frames"},
      {"enable_low_vram",
       [](Planner& p, int priority, Situation situation) {
         switch (situation) {
           case Situation::kLoad:
           case Situation::kQuantize:
             return p.plan_low_vram(priority,
                                    "Loads and quantizes the transformer on the CPU, then moves "
                                    "it to the GPU");
           case Situation::kCacheTextEmbeddings:
             return p.plan_low_vram(priority,
                                    "Keeps the model off the GPU while the text encoder runs");
           case Situation::kCacheLatents:
             return p.plan_low_vram(priority,
                                    "Encodes latents with a tiled VAE and keeps the transformer "
                                    "off the GPU");
           case Situation::kSampling:
             return p.plan_low_vram(priority,
                                    "Tiles the VAE decode of previews and unloads idle parts");
           default:
             return p.plan_low_vram(priority, p.c_.family == ModelFamily::kWan22
                                                  ? "Keeps idle parts of the model off the GPU "
                                                    "and unloads the idle Wan 2.2 stage"
                                                  : "Keeps idle parts of the model off the GPU "
                                                    "between uses");
         }
       },
       true, "keep idle parts of the model off the GPU",
       "Use the model's low-VRAM path"},
      {"quantize_model",
       [](Planner& p, int priority, Situation) { p.plan_quantize(priority); },
       true, "quantize the transformer",
       "Quantize the transformer"},
      {"quantize_text_encoder",
       [](Planner& p, int priority, Situation) { p.plan_quantize_te(priority); },
       true, "quantize the text encoder",
       "Quantize the text encoder"},
      {"cache_text_embeddings",
       [](Planner& p, int priority, Situation) { p.plan_cache_text_embeddings(priority); },
       true, "encode the captions once and unload the text encoder",
       "Cache the text embeddings"},
      {"unload_text_encoder", nullptr,
       true, "unload the text encoder after caching (reserved: no ranking row proposes it)",
       "Unload the text encoder"},
      {"layer_offloading",
       [](Planner& p, int priority, Situation) { p.plan_layer_offloading(priority); },
       true, "offload layers of the model to the CPU",
       "Offload layers to the CPU"},
      {"cache_latents_to_disk",
       [](Planner& p, int priority, Situation) { p.plan_cache_latents_to_disk(priority); },
       true, "keep cached latents on disk, not in memory",
       "Cache latents to disk"},
      {"use_bf16",
       [](Planner& p, int priority, Situation) { p.plan_bf16(priority); },
       false, "train in bf16",
       "Train in bf16"},
      {"use_8bit_optimizer",
       [](Planner& p, int priority, Situation) { p.plan_8bit_optimizer(priority); },
       false, "an 8-bit optimizer",
       "Use an 8-bit optimizer"},
      {"match_target_res",
       [](Planner& p, int priority, Situation) { p.plan_match_target_res(priority); },
       true, "previews at the training resolution",
       "Match previews to the training size"},
      {"expandable_segments",
       [](Planner& p, int priority, Situation) { p.plan_expandable_segments(priority, 45); },
       true, "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation",
       "Let PyTorch's allocator grow segments"},
      {"free_gpu",
       [](Planner& p, int priority, Situation) { p.plan_free_gpu(priority); },
       false, "stop the other processes on the GPU",
       "Free the GPU"},
      {"reduce_host_memory",
       [](Planner& p, int, Situation) { p.plan_host_memory(); },
       false, "fewer data loader workers, or more host memory",
       "Use less host memory"},
      {"increase_shm",
       [](Planner& p, int, Situation) { p.plan_shm(); },
       false, "a larger /dev/shm",
       "Enlarge /dev/shm"},
      // Added (issue 45): the cheapest combination of the resume-safe fixes that makes every
      // phase fit when no single one does (triage/planner_plan.cc); its `parts` name them.
      {"combined_plan", nullptr,
       true, "several resume-safe fixes together, when no single one is enough (`parts`)",
       "Several fixes together"},
      // Added: the baseline sample (before step 1) has its own switch in AI Toolkit.
      {"skip_first_sample",
       [](Planner& p, int priority, Situation) { p.plan_skip_first_sample(priority); },
       true, "skip AI Toolkit's baseline sample before step 1",
       "Skip the baseline sample"},
  };
  // clang-format on
  return kRows;
}

const FixRow* find_fix(std::string_view id) {
  const auto& rows = fix_table();
  const auto at =
      std::find_if(rows.begin(), rows.end(), [&](const FixRow& row) { return row.id == id; });
  return at == rows.end() ? nullptr : &*at;
}

}  // namespace oomtriage::triage
