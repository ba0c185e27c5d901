// triage/planner.cc: the planner's frame: the trainer's name for a setting, which rows of the
// ranking table apply, which plan_*() each proposed fix id calls, the memory model's estimate of
// each candidate, and the final order: fits before the rest, then priority, then confidence, a
// fix already tried last.
#include "triage/planner.h"

#include <algorithm>

#include "parsers/trainer_dialect.h"
#include "triage/architectures.h"
#include "triage/config_edits.h"
#include "triage/model_phase.h"
#include "triage/native_changes.h"
#include "triage/spec_from_config.h"

namespace oomtriage::triage::detail {
namespace {

bool is_caching(Phase phase) {
  return phase == Phase::kCacheLatents || phase == Phase::kCacheTextEmbeddings;
}

}  // namespace

Planner::Planner(const TriageInput& input, const MemoryPressure& pressure, const JobConfig& config,
                 bool assumed_config)
    : input_(input),
      e_(pressure),
      c_(config),
      assumed_(assumed_config),
      cal_(calibrate(e_, assumed_config ? nullptr : &config)) {
  const bool gpu = e_.kind != OomKind::kShm && e_.kind != OomKind::kHostKilled &&
                   e_.kind != OomKind::kHostMemoryError;
  const MemorySpec spec = spec_from_config(c_);
  // A family the table does not know would be priced as a guess: the crash's figures do better.
  if (assumed_ || !gpu || find_architecture(spec.model_family) == nullptr) return;
  model_ = estimate_memory(spec);
  model_spec_ = to_json(spec).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  model_phase_ = model_phase_of(e_.phase);
  if (model_->phase(model_phase_) == nullptr) model_phase_ = Phase::kTrainStep;
  const PhaseEstimate& at_crash = *model_->phase(model_phase_);
  double working = 0;
  for (const MemoryTerm& term : at_crash.terms) {
    if (is_working_memory(term)) working += term.bytes;
  }
  if (cal_ && working > 0 && cal_->need_bytes > at_crash.peak_bytes) {
    crash_correction_ = (working + double(cal_->need_bytes - at_crash.peak_bytes)) / working;
  }
  if (!cal_) return;
  std::vector<Phase> ran;
  if (model_phase_ != Phase::kModelLoad) ran.push_back(Phase::kModelLoad);
  if (model_phase_ == Phase::kSampling && e_.step && *e_.step > 0) ran.push_back(Phase::kTrainStep);
  const double room = cal_->usable_bytes * kFitMargin;
  for (const Phase phase : ran) {
    const PhaseEstimate* p = model_->phase(phase);
    if (p == nullptr || p->peak_bytes <= room) continue;
    double held = 0;
    for (const MemoryTerm& term : p->terms) {
      if (!is_working_memory(term)) held += term.bytes;
    }
    const double working_there = p->peak_bytes - held;
    if (working_there <= 0 || held >= room) continue;  // the weights alone: the model is off
    came_through_.emplace_back(phase, (room - held) / working_there);
  }
}

std::string Planner::setting(std::string_view neutral, std::string_view ai_toolkit_name) const {
  if (ai_toolkit() || c_.trainer == parsers::Trainer::kUnknown) {
    return c_.trainer == parsers::Trainer::kUnknown
               ? std::string(neutral.substr(neutral.find('.') + 1))
               : std::string(ai_toolkit_name);
  }
  const parsers::DialectRow* row = parsers::row_for(c_.trainer, neutral);
  if (row == nullptr) return std::string(neutral.substr(neutral.find('.') + 1));
  const bool flags = !c_.targets.empty() && c_.targets.front().kind == parsers::TargetKind::kArgs;
  return (flags ? "--" : "") + std::string(row->native);
}

Planner::Priced Planner::price(const std::vector<ConfigChange>& changes,
                               const Effect& effect) const {
  const MemoryEstimate fixed = estimate_memory(spec_from_config(with_changes(c_, changes)));
  Priced out;
  if (cal_) out.usable = effect.frees_other_processes ? cal_->capacity_bytes : cal_->usable_bytes;
  for (const PhaseEstimate& p : fixed.phases) {
    if (is_caching(p.phase)) continue;  // judged apart, as `check` does
    double bytes = p.peak_bytes;
    for (const auto& [phase, scale] : came_through_) {
      if (phase != p.phase) continue;
      for (const MemoryTerm& term : p.terms) {
        if (is_working_memory(term)) bytes -= term.bytes * (1.0 - scale);
      }
    }
    if (p.phase == model_phase_) {
      for (const MemoryTerm& term : p.terms) {
        if (is_working_memory(term)) bytes += term.bytes * (crash_correction_ - 1.0);
      }
      if (effect.reclaims_fragmentation) {
        bytes -= std::min<double>(bytes * 0.5, e_.reserved_unallocated_bytes.value_or(0));
      }
    }
    if (bytes > out.peak) {
      out.peak = bytes;
      out.peak_phase = p.phase;
    }
    if (out.usable && bytes > *out.usable * kFitMargin) out.fits = false;
  }
  return out;
}

bool Planner::estimate_with_model(Candidate& candidate) const {
  if (!model_) return false;
  const Effect& effect = candidate.effect;
  const bool environment = effect.frees_other_processes || effect.reclaims_fragmentation;
  // The machine's fixes change no setting the model sees: with crash figures, what the crash
  // needed less what they give back prices them, never above the need.
  if (environment && cal_) return false;
  const MemorySpec fixed_spec = spec_from_config(with_changes(c_, candidate.fix.changes));
  if (!environment &&
      to_json(fixed_spec).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) ==
          model_spec_)
    return false;
  const Priced priced = price(candidate.fix.changes, effect);
  candidate.by_model = true;
  Fix& fix = candidate.fix;
  fix.predicted_peak_bytes = static_cast<uint64_t>(priced.peak);
  if (priced.usable) fix.fits = priced.fits;
  std::string came_through;
  for (const auto& [phase, scale] : came_through_) {
    came_through += fmt::format("; {}'s working memory scaled x{:.2f}: the job came through it",
                                parsers::to_string(phase), scale);
  }
  const uint64_t before = model_->peak().peak_bytes;
  fix.estimate = fmt::format(
      "estimated by the memory model (docs/memory-model.md), not measured: the run's peak {} "
      "({}) -> {} ({}) with this fix{}{}{}",
      gib(before), parsers::to_string(model_->peak().phase), gib(*fix.predicted_peak_bytes),
      parsers::to_string(priced.peak_phase),
      crash_correction_ > 1.0
          ? fmt::format("; {}'s working memory scaled x{:.2f} to what the crash needed ({})",
                        parsers::to_string(model_phase_), crash_correction_, gib(cal_->need_bytes))
          : "",
      came_through,
      priced.usable ? fmt::format("; {} of {} usable",
                                  priced.fits ? "every phase fits with a 5% margin" : "still over",
                                  gib(static_cast<uint64_t>(*priced.usable)))
                    : "");
  return true;
}

void Planner::estimate(Candidate& candidate) const {
  if (estimate_with_model(candidate)) return;
  if (!cal_ || !candidate.effect.modelled) return;
  const Effect& effect = candidate.effect;
  double peak = cal_->weights_bytes * effect.weights + cal_->activations_bytes * effect.activations;
  if (effect.reclaims_fragmentation) {
    peak -= std::min<double>(peak * 0.5, e_.reserved_unallocated_bytes.value_or(0));
  }
  const double usable = effect.frees_other_processes ? cal_->capacity_bytes : cal_->usable_bytes;
  Fix& fix = candidate.fix;
  fix.predicted_peak_bytes = static_cast<uint64_t>(std::max(0.0, peak));
  fix.fits = peak < usable * kFitMargin;
  fix.estimate = fmt::format(
      "estimated, not measured: the failed step needed {} ({} modelled weights{} + {} "
      "activations); with this fix {} -> about {} of {} usable{}",
      gib(cal_->need_bytes), gib(cal_->weights_bytes),
      assumed_ ? "" : fmt::format(" for {}", parsers::to_string(c_.family)),
      gib(cal_->activations_bytes), effect.what.empty() ? "unchanged" : effect.what,
      gib(*fix.predicted_peak_bytes), gib(static_cast<uint64_t>(usable)),
      *fix.fits ? " (fits with a 5% margin)" : " (still too much alone)");
}

bool Planner::applies(Situation situation) const {
  const Phase phase = e_.phase;
  const bool host = e_.kind == OomKind::kHostKilled || e_.kind == OomKind::kHostMemoryError;
  const bool gpu = e_.kind != OomKind::kShm && !host;
  const bool loading = phase == Phase::kModelLoad || phase == Phase::kQuantize;
  const bool caching = phase == Phase::kCacheLatents || phase == Phase::kCacheTextEmbeddings;
  const bool training = gpu && !loading && !caching && phase != Phase::kSampling;
  const bool later = e_.step && *e_.step > 5;
  const bool batch_above_one = !knows(Knob::kBatchSize) || c_.effective_batch_size() > 1;
  switch (situation) {
    case Situation::kShm: return e_.kind == OomKind::kShm;
    case Situation::kHost: return host;
    case Situation::kOtherProcesses: {
      const uint64_t others = e_.others_bytes;
      const uint64_t capacity = e_.card_bytes.value_or(0);
      return gpu && others >= kGiB && (capacity == 0 || others * 10 >= capacity);
    }
    case Situation::kFragmentation: {
      const uint64_t unalloc = e_.reserved_unallocated_bytes.value_or(0);
      const uint64_t tried = e_.requested_bytes.value_or(0);
      return gpu &&
             (unalloc >= kGiB || (unalloc >= 256ull << 20 && unalloc * 2 >= tried && tried > 0));
    }
    case Situation::kCheckpointingOff: return gpu && !loading && !caching;
    case Situation::kQuantize: return gpu && phase == Phase::kQuantize;
    case Situation::kLoad: return gpu && loading;
    case Situation::kCacheTextEmbeddings: return gpu && phase == Phase::kCacheTextEmbeddings;
    case Situation::kCacheLatents: return gpu && phase == Phase::kCacheLatents;
    case Situation::kSampling: return gpu && phase == Phase::kSampling;
    case Situation::kTrainLaterBuckets: return training && later && c_.all_resolutions().size() > 1;
    case Situation::kTrainBatch:
      return training && !(later && c_.all_resolutions().size() > 1) && batch_above_one;
    case Situation::kTrainBatchOne:
      return training && !(later && c_.all_resolutions().size() > 1) && !batch_above_one;
    case Situation::kTrainAny: return training;
  }
  return false;
}

void Planner::propose(std::string_view id, int priority, Situation situation) {
  const FixRow* row = find_fix(id);
  if (row != nullptr && row->plan != nullptr) row->plan(*this, priority, situation);
}

namespace {

// A fix the memory model says fits (0) before the others (1): one it cannot estimate and one
// that does not fit alone keep the table's order between them.
int fit_class(const Fix& fix) { return fix.fits && *fix.fits ? 0 : 1; }

}  // namespace

std::vector<Fix> Planner::plan() {
  for (const RankingRow& row : ranking_table()) {
    if (!applies(row.situation)) continue;
    leading_ = row.leads;
    for (const auto& [id, priority] : row.fixes) propose(id, priority, row.situation);
  }
  leading_ = false;
  std::vector<Candidate> kept;
  for (Candidate& candidate : candidates_) {
    candidate.neutral = candidate.fix.changes;
    estimate(candidate);
    // Written in the job's own syntax; a fix its trainer cannot express is not proposed, unless
    // it says what to check (an unknown trainer still gets "make sure checkpointing is on").
    if (to_native(candidate.fix, c_) || !candidate.fix.check.empty()) {
      kept.push_back(std::move(candidate));
    }
  }
  // A fix the memory model says cannot fit never outranks one that can.
  const auto& tried = input_.tried_and_failed;
  const auto was_tried = [&](const Candidate& c) {
    return std::find(tried.begin(), tried.end(), c.fix.id) != tried.end();
  };
  for (Candidate& candidate : kept) {
    if (was_tried(candidate)) {
      candidate.fix.why +=
          "; the previous run carried this fix and crashed again in the same "
          "phase, so the next lever comes first";
    }
  }
  std::stable_sort(kept.begin(), kept.end(), [&](const Candidate& a, const Candidate& b) {
    if (was_tried(a) != was_tried(b)) return was_tried(b);
    if (a.leads != b.leads) return a.leads;
    // The seed guide's order among its own levers; the model's fit decides among the rest.
    const int fa = a.leads ? 0 : fit_class(a.fix), fb = b.leads ? 0 : fit_class(b.fix);
    if (fa != fb) return fa < fb;
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.fix.confidence > b.fix.confidence;
  });
  std::vector<Fix> fixes;
  // No single fix fits: the cheapest set that does goes first, the single fixes after it.
  if (std::optional<Fix> plan = combine(kept)) {
    plan->rank = 1;
    fixes.push_back(std::move(*plan));
  }
  for (Candidate& candidate : kept) {
    Fix fix = std::move(candidate.fix);
    if (assumed_) {
      fix.confidence *= 0.6;
      fix.why += fmt::format(" ({})", input_.config_problem);
    }
    fix.rank = static_cast<int>(fixes.size()) + 1;
    fixes.push_back(std::move(fix));
  }
  return fixes;
}

}  // namespace oomtriage::triage::detail
