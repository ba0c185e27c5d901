// triage/planner.h
//
// The planner behind rank_fixes() (triage/ranker.h): for one memory pressure (a crash, a
// prediction or a near-OOM warning: triage/memory_pressure.h) and one config it proposes
// the fixes of every row of ranking_table() that applies, each with its effect on the memory
// model, then estimates, keeps the ones the job's trainer can express and orders them. Its
// plan_*() methods are grouped by what they change: the machine, not the config
// (triage/planner_environment.cc); previews (triage/planner_previews.cc); a training step's
// activations (triage/planner_activations.cc); the model's weights and precision
// (triage/planner_weights.cc). Internal to triage/: callers use triage/ranker.h.
#pragma once

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "parsers/event.h"
#include "parsers/job_config.h"
#include "triage/fix.h"
#include "triage/crash_figures.h"
#include "triage/fix_table.h"
#include "triage/memory_model.h"
#include "triage/memory_pressure.h"
#include "triage/ranker.h"

namespace oomtriage::triage::detail {

using parsers::JobConfig;
using parsers::Knob;
using parsers::ModelFamily;
using parsers::OomKind;
using parsers::Phase;

inline constexpr uint64_t kGiB = 1ull << 30;

inline std::string gib(uint64_t bytes) { return fmt::format("{:.2f} GiB", bytes / double(kGiB)); }

// A change's value (triage/fix.h ConfigChange).
template <class T>
nlohmann::json js(const T& value) {
  return nlohmann::json(value);
}

// How a fix changes the memory model's two parts.
struct Effect {
  double activations = 1.0;
  double weights = 1.0;
  bool reclaims_fragmentation = false;
  bool frees_other_processes = false;
  bool modelled = true;
  std::string what;  // "activations x0.56 (1024 -> 768 px)"
};

inline Effect unmodelled() {
  Effect effect;
  effect.modelled = false;
  return effect;
}

struct Candidate {
  int priority = 0;
  bool leads = false;  // proposed by a row that leads (RankingRow::leads)
  Fix fix;
  Effect effect;
  bool by_model = false;              // its peak is the memory model's (estimate_with_model)
  std::vector<ConfigChange> neutral;  // its changes in the ranker's vocabulary, for pricing
};

inline int next_lower_resolution(int r) {
  for (int step : {2048, 1536, 1024, 768, 512}) {
    if (step < r) return step;
  }
  return r;
}

// Wan and LTX want 4k+1 frames: 81 -> 41 -> 21 -> 9.
inline int fewer_frames(int n) {
  const int half = (n - 1) / 2 + 1;
  return std::max(1, ((half - 1) / 4) * 4 + 1);
}

class Planner {
 public:
  Planner(const TriageInput& input, const MemoryPressure& pressure, const JobConfig& config,
          bool assumed_config);

  std::vector<Fix> plan();

 private:
  // Each fix's row calls its plan_*() (triage/fix_table.cc).
  friend const std::vector<FixRow>& oomtriage::triage::fix_table();

  // `may_lead` false: the fix does not lead even in a row that does (it would not cover the
  // shortfall, say).
  void add(int priority, Fix fix, Effect effect = {}, bool may_lead = true) {
    if (!ids_.insert(fix.id).second) return;  // one fix per id, the first (best) placement wins
    candidates_.push_back(
        {priority, leading_ && may_lead, std::move(fix), std::move(effect), false, {}});
  }
  Fix make(const char* id, std::string title, std::string why, std::string cost,
           double confidence) {
    Fix fix;
    fix.id = id;
    fix.title = std::move(title);
    fix.why = std::move(why);
    fix.cost = std::move(cost);
    fix.confidence = confidence;
    return fix;
  }
  // A change in the ranker's vocabulary; triage/native_changes.h writes it in the job's syntax.
  void change(Fix& fix, const std::string& path, nlohmann::json from, nlohmann::json to) {
    ConfigChange c;
    c.path = path;
    c.from = std::move(from);
    c.to = std::move(to);
    c.neutral = true;
    fix.changes.push_back(std::move(c));
  }
  bool knows(Knob knob) const { return c_.knows(knob); }
  bool ai_toolkit() const { return c_.trainer == parsers::Trainer::kAiToolkit; }

  // triage/planner.cc
  // The trainer's own name for a setting, for the words of a fix ("train_batch_size").
  std::string setting(std::string_view neutral, std::string_view ai_toolkit_name) const;
  bool applies(Situation situation) const;
  void propose(std::string_view id, int priority, Situation situation);
  void estimate(Candidate& candidate) const;
  // The memory model's estimate of the fixed job (triage/memory_model.h); false when the model
  // cannot see the fix's change, so that the crash figures' estimate stands in.
  bool estimate_with_model(Candidate& candidate) const;
  // The model's peak of the job with `changes` (neutral) applied, each phase corrected by what
  // the crash needed and by the phases the job came through; `usable` is set with crash figures.
  struct Priced {
    double peak = 0;
    Phase peak_phase = Phase::kTrainStep;
    bool fits = true;
    std::optional<double> usable;
  };
  Priced price(const std::vector<ConfigChange>& changes, const Effect& effect) const;
  // triage/planner_plan.cc: the plan for fixes ranked as `ranked`, when no single one fits.
  std::optional<Fix> combine(const std::vector<Candidate>& ranked) const;

  // triage/planner_environment.cc
  void plan_host_memory();
  void plan_shm();
  void plan_free_gpu(int priority);
  void plan_expandable_segments(int priority, int priority_if_short);

  // triage/planner_previews.cc
  std::string preview_check() const;
  void plan_previews(int priority);
  void plan_skip_first_sample(int priority);
  void plan_disable_sampling(int priority);

  // triage/planner_activations.cc
  void plan_gradient_checkpointing(int priority, int priority_if_unknown);
  void plan_batch(int priority);
  void plan_top_bucket(int priority);
  void plan_lower_resolution(int priority);
  void plan_num_frames(int priority);
  void plan_match_target_res(int priority);

  // triage/planner_weights.cc
  void plan_low_vram(int priority, const char* why);
  void plan_quantize(int priority);
  void plan_quantize_te(int priority);
  void plan_cache_text_embeddings(int priority);
  void plan_layer_offloading(int priority);
  void plan_cache_latents_to_disk(int priority);
  void plan_bf16(int priority);
  void plan_8bit_optimizer(int priority);
  // What `fix` does to the weights, priced by the memory model (weights_bytes() of the config
  // before and after its changes, against the crash's modelled weights); unmodelled without
  // crash figures or when the model does not know the family.
  Effect weights_effect(const Fix& fix, std::string what) const;

  // " at step 500 of 3000": a crash's step; a prediction names none.
  std::string step_words() const {
    if (!e_.step || e_.predicted) return "";
    return e_.total_steps ? fmt::format(" at step {} of {}", *e_.step, *e_.total_steps)
                          : fmt::format(" at step {}", *e_.step);
  }

  // "the job ran out of memory during sampling at step 500", or for a prediction "the memory
  // model predicts the job runs out of memory during sampling": `check` never tells of a crash
  // that did not happen.
  std::string ran_out(std::string_view where) const {
    return e_.predicted
               ? fmt::format("the memory model predicts the job runs out of memory {}", where)
               : fmt::format("the job ran out of memory {}{}", where, step_words());
  }
  std::string ran_out() const {
    return ran_out(fmt::format("during {}", parsers::to_string(e_.phase)));
  }

  const TriageInput& input_;
  const MemoryPressure& e_;  // the crash, prediction or near-OOM warning the fixes answer
  const JobConfig& c_;
  bool assumed_;
  std::optional<Calibration> cal_;
  // The memory model's view of the unfixed job, when it knows the family (docs/memory-model.md):
  // the crash's phase among the model's phases, and the factor on that phase's working memory
  // that makes it what the crash needed (1 when the model already says as much or more).
  std::optional<MemoryEstimate> model_;
  std::string model_spec_;  // the unfixed job's spec as JSON text, to tell a fix changes it
  Phase model_phase_ = Phase::kTrainStep;
  double crash_correction_ = 1.0;
  // Phases the job came through before the crash (loading; training steps before a later
  // preview) did fit: where the model says otherwise, the factor on their working memory that
  // brings them under the usable memory.
  std::vector<std::pair<Phase, double>> came_through_;
  std::vector<Candidate> candidates_;
  bool leading_ = false;  // the row being proposed leads
  std::set<std::string> ids_;
};

}  // namespace oomtriage::triage::detail
