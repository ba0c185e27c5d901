// daemon/render/json_output.cc: events, logs and fixes as JSON; absent figures are null, never 0.
#include "daemon/render/json_output.h"

namespace oomtriage::daemon {
namespace {

using nlohmann::ordered_json;

template <class T>
ordered_json or_null(const std::optional<T>& value) {
  return value ? ordered_json(*value) : ordered_json(nullptr);
}

ordered_json evidence_json(const std::optional<parsers::Evidence>& evidence) {
  if (!evidence) return nullptr;
  return {{"line", evidence->line},
          {"source", parsers::to_string(evidence->source)},
          {"text", evidence->text}};
}

}  // namespace

ordered_json target_to_json(parsers::TargetKind kind, const std::string& path) {
  return {{"kind", parsers::to_string(kind)},
          {"path", path.empty() ? ordered_json(nullptr) : ordered_json(path)}};
}

ordered_json fix_to_json(const triage::Fix& fix) {
  const parsers::ConfigTarget target = fix.target();
  ordered_json changes = ordered_json::array();
  for (const auto& change : fix.changes) {
    ordered_json item = {{"path", change.path},
                         {"from", ordered_json::parse(change.from_json, nullptr, false)},
                         {"to", ordered_json::parse(change.to_json, nullptr, false)}};
    if (!change.table.empty()) item["table"] = change.table;
    // A change written somewhere else than the fix's target names its own.
    if (change.kind != target.kind || change.file != target.path) {
      item["target"] = target_to_json(change.kind, change.file);
    }
    changes.push_back(std::move(item));
  }
  return {{"id", fix.id},
          {"rank", fix.rank},
          {"title", fix.title},
          {"why", fix.why},
          {"check", fix.check.empty() ? ordered_json(nullptr) : ordered_json(fix.check)},
          {"target", target_to_json(target.kind, target.path)},
          {"changes", changes},
          {"cost", fix.cost},
          {"predicted_peak_bytes", or_null(fix.predicted_peak_bytes)},
          {"fits", or_null(fix.fits)},
          {"estimate", fix.estimate.empty() ? ordered_json(nullptr) : ordered_json(fix.estimate)},
          {"confidence", fix.confidence}};
}

ordered_json event_to_json(const parsers::OomEvent& event) {
  const auto& f = event.figures;
  ordered_json others = ordered_json::array();
  for (const auto& process : f.other_processes) {
    others.push_back({{"pid", process.pid}, {"bytes", process.bytes}});
  }
  ordered_json out = {{"kind", parsers::to_string(event.kind)},
                      {"recovered", event.recovered},
                      {"phase", parsers::to_string(event.phase)},
                      {"step", or_null(event.step)},
                      {"total_steps", or_null(event.total_steps)},
                      {"gpu_index", or_null(f.gpu_index)},
                      {"tried_to_allocate_bytes", or_null(f.tried_to_allocate_bytes)},
                      {"total_capacity_bytes", or_null(f.total_capacity_bytes)},
                      {"free_bytes", or_null(f.free_bytes)},
                      {"allocated_by_pytorch_bytes", or_null(f.allocated_by_pytorch_bytes)},
                      {"reserved_unallocated_bytes", or_null(f.reserved_unallocated_bytes)},
                      {"reserved_total_bytes", or_null(f.reserved_total_bytes)},
                      {"this_process_in_use_bytes", or_null(f.this_process_in_use_bytes)},
                      {"other_processes", others},
                      {"line", event.line},
                      {"offset", event.offset},
                      {"exception", or_null(event.exception)},
                      {"message", event.message},
                      {"phase_evidence", evidence_json(event.phase_evidence)},
                      {"step_evidence", evidence_json(event.step_evidence)}};
  // Only an amendment says so (scan --follow, the daemon): a whole-file verdict has none.
  if (event.revision > 0) out["revision"] = event.revision;
  return out;
}

ordered_json scan_to_json(const std::vector<ScannedLog>& logs) {
  ordered_json out_logs = ordered_json::array();
  for (const ScannedLog& log : logs) {
    ordered_json events = ordered_json::array();
    for (const auto& event : log.analysis.events) events.push_back(event_to_json(event));
    ordered_json fixes = ordered_json::array();
    for (const auto& fix : log.fixes) fixes.push_back(fix_to_json(fix));
    ordered_json job = nullptr;
    if (log.job) {
      job = {{"name", log.job->name},
             {"config_path", or_null(log.job->config_path)},
             {"config_sha256", or_null(log.job->config_sha256)}};
    }
    out_logs.push_back({{"path", log.path},
                        {"trainer", parsers::to_string(log.analysis.trainer)},
                        {"outcome", parsers::to_string(log.analysis.outcome)},
                        {"job", job},
                        {"events", events},
                        {"fixes", fixes}});
  }
  return {{"oomtriage", 1}, {"logs", out_logs}};
}

namespace {

parsers::TargetKind kind_from_string(const std::string& name) {
  using parsers::TargetKind;
  for (TargetKind kind : {TargetKind::kYaml, TargetKind::kJson, TargetKind::kToml,
                          TargetKind::kArgs, TargetKind::kEnv, TargetKind::kOps}) {
    if (parsers::to_string(kind) == name) return kind;
  }
  return TargetKind::kOps;
}

}  // namespace

std::vector<triage::Fix> fixes_from_json(const std::string& fixes_json) {
  std::vector<triage::Fix> fixes;
  const auto doc = nlohmann::json::parse(fixes_json, nullptr, false);
  if (!doc.is_array()) return fixes;
  const auto text = [](const nlohmann::json& v) {
    return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  for (const auto& item : doc) {
    if (!item.is_object() || !item.contains("id") || !item["id"].is_string()) continue;
    triage::Fix fix;
    fix.id = item["id"].get<std::string>();
    fix.rank = item.value("rank", 0);
    fix.title = item.value("title", "");
    nlohmann::json target = item.value("target", nlohmann::json::object());
    for (const auto& c : item.value("changes", nlohmann::json::array())) {
      if (!c.is_object() || !c.contains("path") || !c["path"].is_string()) continue;
      const nlohmann::json& where = c.contains("target") ? c["target"] : target;
      triage::ConfigChange change;
      change.path = c["path"].get<std::string>();
      change.from_json = text(c.value("from", nlohmann::json()));
      change.to_json = text(c.value("to", nlohmann::json()));
      change.table = c.value("table", "");
      change.kind = kind_from_string(where.is_object() ? where.value("kind", "yaml") : "yaml");
      if (where.is_object() && where.contains("path") && where["path"].is_string()) {
        change.file = where["path"].get<std::string>();
      }
      fix.changes.push_back(std::move(change));
    }
    fixes.push_back(std::move(fix));
  }
  return fixes;
}

}  // namespace oomtriage::daemon
