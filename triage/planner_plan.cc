// triage/planner_plan.cc: the plan. When no single fix makes every phase fit, the cheapest
// combination of resume-safe config levers that does, priced together by the memory model: the
// fewest levers first, then the ones ranked highest. A lever the seed guide's rules put first
// (RankingRow::leads) is in every plan. Plans are made of resume-safe fixes only, so that `run
// --heal` may apply one unattended; precision and optimizer changes stay single fixes.
#include <algorithm>
#include <cctype>
#include <numeric>

#include "triage/heal_plan.h"
#include "triage/planner.h"

namespace oomtriage::triage::detail {
namespace {

constexpr size_t kMaxLevers = 6;
constexpr size_t kMaxParts = 3;

bool shares_a_key(const Fix& a, const Fix& b) {
  for (const ConfigChange& x : a.changes) {
    for (const ConfigChange& y : b.changes) {
      if (x.path == y.path && x.table == y.table) return true;
    }
  }
  return false;
}

// Two fixes a plan never pairs: they edit the same key, or one makes the other moot.
bool exclusive(const Fix& a, const Fix& b) {
  const auto pair = [&](std::string_view x, std::string_view y) {
    return (a.id == x && b.id == y) || (a.id == y && b.id == x);
  };
  return shares_a_key(a, b) || pair("disable_sampling", "cheapen_previews") ||
         pair("disable_sampling", "skip_first_sample") ||
         pair("drop_top_bucket", "lower_resolution");
}

// A fix the plan may hold: priced by the model, resume-safe, written to the job's config or
// command line (not its environment), and not one the previous run already carried.
bool is_lever(const Candidate& c, const std::vector<std::string>& tried) {
  if (!c.by_model || !resume_safe(c.fix.id) || c.fix.changes.empty()) return false;
  if (std::find(tried.begin(), tried.end(), c.fix.id) != tried.end()) return false;
  return std::all_of(c.fix.changes.begin(), c.fix.changes.end(), [](const ConfigChange& change) {
    return change.kind != parsers::TargetKind::kEnv && change.kind != parsers::TargetKind::kOps;
  });
}

std::string lower_first(std::string text) {
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

// Every set of 2..kMaxParts indices below `n`, fewest first, then by the sum of their ranks.
std::vector<std::vector<size_t>> combinations(size_t n) {
  std::vector<std::vector<size_t>> out;
  std::vector<size_t> current;
  const auto grow = [&](auto&& self, size_t from) -> void {
    if (current.size() >= 2) out.push_back(current);
    if (current.size() == kMaxParts) return;
    for (size_t i = from; i < n; ++i) {
      current.push_back(i);
      self(self, i + 1);
      current.pop_back();
    }
  };
  grow(grow, 0);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    if (a.size() != b.size()) return a.size() < b.size();
    return std::accumulate(a.begin(), a.end(), size_t{0}) <
           std::accumulate(b.begin(), b.end(), size_t{0});
  });
  return out;
}

}  // namespace

std::optional<Fix> Planner::combine(const std::vector<Candidate>& ranked) const {
  if (!model_ || !cal_ || ranked.empty() || ranked.front().fix.fits == true) return std::nullopt;
  const bool must_lead = ranked.front().leads;
  if (must_lead && !is_lever(ranked.front(), input_.tried_and_failed)) return std::nullopt;
  std::vector<const Candidate*> levers;
  for (const Candidate& c : ranked) {
    if (levers.size() < kMaxLevers && is_lever(c, input_.tried_and_failed)) levers.push_back(&c);
  }
  for (const std::vector<size_t>& parts : combinations(levers.size())) {
    if (must_lead && parts.front() != 0) continue;
    bool clash = false;
    for (size_t i = 0; i < parts.size() && !clash; ++i) {
      for (size_t j = i + 1; j < parts.size() && !clash; ++j) {
        clash = exclusive(levers[parts[i]]->fix, levers[parts[j]]->fix);
      }
    }
    if (clash) continue;
    std::vector<ConfigChange> neutral;
    for (const size_t i : parts) {
      neutral.insert(neutral.end(), levers[i]->neutral.begin(), levers[i]->neutral.end());
    }
    const Priced priced = price(neutral, Effect{});
    if (!priced.fits || !priced.usable) continue;

    Fix plan;
    plan.id = "combined_plan";
    std::vector<std::string> titles, alone, costs, checks;
    plan.confidence = 1.0;
    for (const size_t i : parts) {
      const Fix& part = levers[i]->fix;
      plan.parts.push_back(part.id);
      titles.push_back(lower_first(part.title));
      alone.push_back(fmt::format("{} alone {}", part.id,
                                  part.predicted_peak_bytes ? gib(*part.predicted_peak_bytes)
                                                            : std::string("not estimated")));
      if (!part.cost.empty()) costs.push_back(part.cost);
      if (!part.check.empty()) checks.push_back(part.check);
      plan.changes.insert(plan.changes.end(), part.changes.begin(), part.changes.end());
      plan.confidence = std::min(plan.confidence, part.confidence);
    }
    plan.title = fmt::format("Plan: {}", fmt::join(titles, " + "));
    plan.why = fmt::format(
        "No single fix makes every phase fit ({}){}; together they bring the peak to {} ({})",
        fmt::join(alone, ", "),
        must_lead ? fmt::format("; the seed guide's first lever, {}, stays in the plan",
                                levers[0]->fix.id)
                  : "",
        gib(static_cast<uint64_t>(priced.peak)), parsers::to_string(priced.peak_phase));
    plan.cost = fmt::format("{}", fmt::join(costs, "; "));
    plan.check = fmt::format("{}", fmt::join(checks, "; "));
    plan.predicted_peak_bytes = static_cast<uint64_t>(priced.peak);
    plan.fits = true;
    plan.estimate = fmt::format(
        "estimated by the memory model (docs/memory-model.md), not measured: the run's peak {} "
        "({}) -> {} ({}) with the {} fixes together; every phase fits with a 5% margin of {} "
        "usable",
        gib(model_->peak().peak_bytes), parsers::to_string(model_->peak().phase),
        gib(static_cast<uint64_t>(priced.peak)), parsers::to_string(priced.peak_phase),
        parts.size(), gib(static_cast<uint64_t>(*priced.usable)));
    return plan;
  }
  return std::nullopt;
}

}  // namespace oomtriage::triage::detail
