// daemon/alerts/alert_payload.cc: one AlertContent, four shapes. Limits from docs/daemon-anchors.md
// §4.
#include "daemon/alerts/alert_payload.h"

#include <fmt/format.h>

#include "daemon/common/human_units.h"
#include "daemon/render/web_pages.h"
#include "parsers/event_codec.h"
#include "triage/fix_codec.h"

namespace oomtriage::daemon {
namespace {

using nlohmann::json;

constexpr size_t kSlackSection = 3000;
constexpr size_t kSlackHeader = 150;
constexpr size_t kDiscordContent = 2000;
constexpr size_t kDiscordTitle = 256;
constexpr size_t kDiscordDescription = 4096;
constexpr size_t kDiscordField = 1024;
constexpr int kDiscordRed = 0x992D22;
constexpr int kDiscordAmber = 0xE67E22;
constexpr int kDiscordGreen = 0x2ECC71;

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string kind_label(const std::string& kind) {
  if (kind == "host_killed") return "Host OOM kill";
  if (kind == "host_memoryerror") return "Host MemoryError";
  if (kind == "shm") return "Shared-memory (/dev/shm) failure";
  return upper(kind) + " OOM";
}

std::string fixes_text(const AlertContent& a, size_t count, bool markdown) {
  std::string out;
  size_t n = 0;
  for (const AlertFix& fix : a.fixes) {
    if (n++ == count) break;
    out += fmt::format("{}. {}{}{} ({})\n", n, markdown ? "*" : "", fix.title, markdown ? "*" : "",
                       fix.id);
    for (const auto& change : fix.changes) out += fmt::format("    {}\n", change);
  }
  return out;
}

// The log and line an alert points at; a prediction has no line (nothing happened yet).
std::string where(const AlertContent& a) {
  return a.line > 0 ? fmt::format("{}:{}", a.log_path, a.line) : a.log_path;
}

}  // namespace

std::string truncate_utf8(std::string_view text, size_t limit) {
  size_t chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) != 0x80) {
      if (chars == limit) return std::string(text.substr(0, i));
      ++chars;
    }
  }
  return std::string(text);
}

std::string escape_slack(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else
      out += c;
  }
  return out;
}

std::string escape_discord(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '*' || c == '_' || c == '~' || c == '`' || c == '|' || c == '>' || c == '#' ||
        c == '\\' || c == '[' || c == ']') {
      out += '\\';
      out += c;
    } else if (c == '@') {
      out += "@\u200b";  // a zero-width space breaks @everyone and <@id> mentions
    } else {
      out += c;
    }
  }
  return out;
}

// JSON can only carry valid UTF-8: replace invalid bytes before anything else.
std::string valid_utf8(std::string_view text) {
  const std::string dumped =
      json(std::string(text)).dump(-1, ' ', false, json::error_handler_t::replace);
  return json::parse(dumped).get<std::string>();
}

std::string job_page_url(std::string_view web_url, std::string_view job) {
  if (web_url.empty()) return "";
  return std::string(web_url) + "/job/" + url_encode(job);
}

int AlertContent::storm_size() const {
  int n = 0;
  for (const AlertContent& member : storm) n += member.grouped;
  return n;
}

std::string AlertContent::title() const {
  if (!storm.empty()) return fmt::format("{} OOMs on {}", storm_size(), host);
  if (heal == "healed") return "OOM healed: " + job;
  if (heal == "exhausted") return "OOM healing exhausted: " + job;
  if (!heal.empty()) return "OOM healing stopped: " + job;
  if (near_oom) return fmt::format("Near OOM in {}: {}", phase, job);
  if (stalled) {
    return stalled->resolved
               ? "Training going on again: " + job
               : fmt::format("Training stalled: {} (silent for {})", job, stalled->silent_for);
  }
  if (predicted) return fmt::format("OOM predicted in {}: {}", phase, job);
  if (store_recovered) return "oomtriage store damaged and recovered on " + host;
  std::string t = kind_label(kind);
  if (recovered) t = grouped > 1 ? fmt::format("{} recovered OOMs", grouped) : "Recovered OOM";
  return fmt::format("{}{}{} in {}: {}", resent ? "Again after a store recovery: " : "",
                     revision > 0 ? "Update: " : "", t, phase, job);
}

std::string AlertContent::webhook_id() const {
  if (test) return test_id;
  if (!storm.empty()) return fmt::format("storm_{}_{}", storm.front().webhook_id(), storm.size());
  // The first 8 hex digits of the store's id: enough to tell a node's stores apart.
  const std::string in = scope.empty() ? "" : scope.substr(0, 8) + "_";
  if (near_oom) return fmt::format("near_oom_{}{}_{}", in, event_id, revision);
  if (stalled) {
    return fmt::format("stalled_{}{}_{}{}", in, event_id, stalled->since,
                       stalled->resolved ? "_resolved" : "");
  }
  if (predicted) return fmt::format("preflight_{}{}", in, event_id);
  if (!heal.empty()) return fmt::format("heal_{}{}", in, event_id);
  if (store_recovered) return fmt::format("store_recovered_{}{}", in, event_id);
  const std::string key = event_uuid.empty() ? std::to_string(event_id) : event_uuid;
  return revision > 0 ? fmt::format("evt_{}_r{}", key, revision) : fmt::format("evt_{}", key);
}

namespace {
void fill_from_record(AlertContent& a, const std::string& event_json,
                      const std::string& fixes_json);
}  // namespace

AlertContent alert_content(int64_t event_id, const std::string& job, const std::string& host,
                           const std::string& trainer, const std::string& family,
                           const std::string& log_path, const std::string& event_json,
                           const std::string& fixes_json, const std::string& starts_at) {
  AlertContent a;
  a.event_id = event_id;
  a.job = valid_utf8(job);
  a.host = host;
  a.trainer = trainer;
  a.model_family = family;
  a.log_path = valid_utf8(log_path);
  a.starts_at = starts_at;
  fill_from_record(a, event_json, fixes_json);
  return a;
}

namespace {

// The stored event and its fixes, read by their decoders. A row that does not decode (a store
// edited by hand) leaves its part of the alert as it is.
void fill_from_record(AlertContent& a, const std::string& event_json,
                      const std::string& fixes_json) {
  if (const auto e = parsers::decode_event(event_json)) {
    a.kind = parsers::to_string(e->kind);
    a.phase = parsers::to_string(e->phase);
    a.recovered = e->recovered;
    a.line = e->line;
    a.message = valid_utf8(e->message);
    a.step = "unknown";
    if (e->step) {
      a.step = std::to_string(*e->step);
      if (e->total_steps) a.step += " of " + std::to_string(*e->total_steps);
    }
    const parsers::MemoryFigures& f = e->figures;
    std::vector<std::string> parts;
    if (f.tried_to_allocate_bytes)
      parts.push_back("tried " + format_bytes(*f.tried_to_allocate_bytes));
    if (f.free_bytes && f.total_capacity_bytes) {
      parts.push_back(format_bytes(*f.free_bytes) + " free of " +
                      format_bytes(*f.total_capacity_bytes));
    } else if (f.total_capacity_bytes) {
      parts.push_back("capacity " + format_bytes(*f.total_capacity_bytes));
    }
    if (f.allocated_by_pytorch_bytes)
      parts.push_back(format_bytes(*f.allocated_by_pytorch_bytes) + " allocated by PyTorch");
    if (f.gpu_index) parts.push_back("GPU " + std::to_string(*f.gpu_index));
    a.figures = fmt::format("{}", fmt::join(parts, "; "));
  }
  if (const auto fixes = triage::decode_fixes(fixes_json)) {
    for (const triage::Fix& f : *fixes) {
      AlertFix fix{f.id, f.title, {}, f.cost};
      for (const triage::ConfigChange& c : f.changes) {
        fix.changes.push_back(fmt::format("{}: {} -> {}", c.path, triage::value_text(c.from),
                                          triage::value_text(c.to)));
      }
      // A fix that depends on a value the job does not show says what to check.
      if (!f.check.empty()) fix.changes.push_back("check: " + f.check);
      a.fixes.push_back(std::move(fix));
    }
  }
}

}  // namespace

namespace {

// One member of a storm on one line: job, what, where, when, the top fix, its own key.
std::string storm_line(const AlertContent& m) {
  std::string line = fmt::format("{}: {}", m.job, m.title());
  if (!m.step.empty() && m.step != "unknown") line += " at step " + m.step;
  if (!m.fixes.empty()) line += "; top fix: " + m.fixes.front().id;
  return line + " [" + m.webhook_id() + "]";
}

// The storm's lines as they fit in `budget` characters, each escaped by `escape`, with
// "and N more" when they do not all fit.
template <class Escape>
std::vector<std::string> storm_lines(const AlertContent& a, size_t budget, Escape escape) {
  std::vector<std::string> lines;
  size_t used = 0;
  for (size_t i = 0; i < a.storm.size() && i < kStormListed; ++i) {
    std::string line = escape(storm_line(a.storm[i]));
    // Room kept for the list's bullet and newline per line, and for the "and N more" line.
    if (used + line.size() + 4 + 64 > budget) break;
    used += line.size() + 4;
    lines.push_back(std::move(line));
  }
  if (lines.size() < a.storm.size()) {
    lines.push_back(
        escape(fmt::format("and {} more: run `oomtriage jobs`", a.storm.size() - lines.size())));
  }
  return lines;
}

// Slack: every member listed, in as many sections as the lines need (a message holds 50
// blocks of 3,000 characters).
json slack_storm(const AlertContent& a) {
  json blocks = json::array();
  blocks.push_back(
      {{"type", "header"},
       {"text", {{"type", "plain_text"}, {"text", truncate_utf8(a.title(), kSlackHeader)}}}});
  std::string section;
  const auto flush = [&] {
    if (section.empty()) return;
    blocks.push_back({{"type", "section"}, {"text", {{"type", "mrkdwn"}, {"text", section}}}});
    section.clear();
  };
  for (const std::string& line :
       storm_lines(a, kSlackSection * 45, [](const std::string& t) { return escape_slack(t); })) {
    const std::string item = "• " + truncate_utf8(line, kSlackSection - 8) + "\n";
    if (section.size() + item.size() > kSlackSection) flush();
    section += item;
  }
  flush();
  return {{"text", escape_slack(a.title())}, {"blocks", blocks}};
}

// Discord: as many as the embed's description holds, then "and N more".
json discord_storm(const AlertContent& a) {
  std::string list;
  for (const std::string& line :
       storm_lines(a, kDiscordDescription, [](const std::string& t) { return escape_discord(t); }))
    list += "- " + line + "\n";
  return {
      {"content", truncate_utf8(escape_discord(a.title()), kDiscordContent)},
      {"embeds", json::array({{{"title", truncate_utf8(escape_discord(a.title()), kDiscordTitle)},
                               {"description", truncate_utf8(list, kDiscordDescription)},
                               {"color", kDiscordRed}}})},
      {"allowed_mentions", {{"parse", json::array()}}}};
}

}  // namespace

namespace {

// The job's page as a Slack link (its URL is made of url-encoded parts: no '<', '>' or '|').
std::string slack_link(const AlertContent& a) {
  return a.url.empty() ? "" : " · <" + a.url + "|the job's page>";
}

}  // namespace

json slack_payload(const AlertContent& a) {
  if (!a.storm.empty()) return slack_storm(a);
  const std::string title = a.title();
  std::string summary =
      fmt::format("*Job* {}  *Host* {}  *Trainer* {}  *Model* {}\n*Step* {}", escape_slack(a.job),
                  escape_slack(a.host), a.trainer, a.model_family, a.step);
  if (!a.figures.empty()) summary += "\n*Memory* " + a.figures;
  // The log's own text goes in a code block: inert for mrkdwn, with its backticks defused.
  std::string message = escape_slack(a.message);
  for (size_t at = message.find("```"); at != std::string::npos; at = message.find("```", at)) {
    message.replace(at, 3, "'''");
  }
  const std::string log_block = "```" + truncate_utf8(message, kSlackSection - 8) + "```";
  json blocks = json::array();
  blocks.push_back(
      {{"type", "header"},
       {"text", {{"type", "plain_text"}, {"text", truncate_utf8(title, kSlackHeader)}}}});
  blocks.push_back(
      {{"type", "section"},
       {"text", {{"type", "mrkdwn"}, {"text", truncate_utf8(summary, kSlackSection)}}}});
  blocks.push_back({{"type", "section"}, {"text", {{"type", "mrkdwn"}, {"text", log_block}}}});
  if (!a.fixes.empty()) {
    blocks.push_back(
        {{"type", "section"},
         {"text",
          {{"type", "mrkdwn"},
           {"text", truncate_utf8("*Top fixes*\n" + escape_slack(fixes_text(a, 3, false)),
                                  kSlackSection)}}}});
  }
  blocks.push_back(
      {{"type", "context"},
       {"elements",
        json::array({{{"type", "mrkdwn"},
                      {"text", truncate_utf8(escape_slack(fmt::format("{} · run `{}`", where(a),
                                                                      a.report_command())) +
                                                 slack_link(a),
                                             kSlackSection)}}})}});
  const std::string fallback =
      fmt::format("{} (step {}). {}", title, a.step,
                  a.fixes.empty() ? a.report_command() : "Top fix: " + a.fixes[0].title);
  return {{"text", escape_slack(fallback)}, {"blocks", blocks}};
}

json discord_payload(const AlertContent& a) {
  if (!a.storm.empty()) return discord_storm(a);
  std::string description =
      fmt::format("**Job** {}  **Host** {}  **Trainer** {}  **Model** {}\n**Step** {}\n",
                  escape_discord(a.job), escape_discord(a.host), a.trainer, a.model_family, a.step);
  if (!a.figures.empty()) description += "**Memory** " + a.figures + "\n";
  description += "\n" + escape_discord(truncate_utf8(a.message, 1500)) + "\n";
  json fields = json::array();
  size_t n = 0;
  for (const AlertFix& fix : a.fixes) {
    if (n++ == 3) break;
    std::string value;
    for (const auto& change : fix.changes) value += escape_discord(change) + "\n";
    value += escape_discord(fix.cost);
    fields.push_back(
        {{"name", truncate_utf8(fmt::format("{}. {}", n, escape_discord(fix.title)), 256)},
         {"value", truncate_utf8(value.empty() ? "-" : value, kDiscordField)}});
  }
  const std::string content = truncate_utf8(
      fmt::format("{} — {}", escape_discord(a.title()),
                  a.url.empty() ? "run `" + escape_discord(a.report_command()) + "`" : a.url),
      kDiscordContent);
  json embed = {{"title", truncate_utf8(escape_discord(a.title()), kDiscordTitle)},
                {"description", truncate_utf8(description, kDiscordDescription)},
                {"color", a.heal == "healed" || (a.stalled && a.stalled->resolved) ? kDiscordGreen
                          : a.recovered || a.predicted || a.stalled                ? kDiscordAmber
                                                                                   : kDiscordRed},
                {"fields", fields}};
  if (!a.url.empty()) embed["url"] = a.url;  // the title links to the job's page
  return {{"content", content},
          {"embeds", json::array({embed})},
          {"allowed_mentions", {{"parse", json::array()}}}};
}

namespace {

// `training_job`, not `job`: Prometheus gives every scraped series a `job` label of its own,
// and a rule or route that matches on it would mix the two.
json labels_of(const AlertContent& a) {
  json labels;
  if (!a.heal.empty()) {
    labels = {{"alertname", a.heal == "healed"      ? "TrainingOOMHealed"
                            : a.heal == "exhausted" ? "TrainingOOMHealExhausted"
                                                    : "TrainingOOMHealStopped"},
              {"training_job", a.job},
              {"host", a.host},
              {"severity", a.heal == "healed" ? "info" : "critical"}};
  } else if (a.store_recovered) {
    labels = {{"alertname", "OomtriageStoreRecovered"}, {"host", a.host}, {"severity", "critical"}};
  } else if (a.stalled) {
    labels = {{"alertname", "TrainingStalled"},
              {"training_job", a.job},
              {"host", a.host},
              {"severity", "warning"}};
  } else if (a.predicted) {
    labels = {{"alertname", a.near_oom ? "TrainingNearOOM" : "TrainingOOMPredicted"},
              {"training_job", a.job},
              {"phase", a.phase},
              {"family", a.model_family},
              {"host", a.host},
              {"severity", "warning"}};
  } else {
    labels = {{"alertname", a.recovered ? "TrainingOOMRecovered" : "TrainingOOM"},
              {"training_job", a.job},
              {"kind", a.kind},
              {"phase", a.phase},
              {"host", a.host},
              {"severity", a.recovered ? "warning" : "critical"}};
  }
  if (a.test) {
    // `oomtriage alert test`: routed like the real thing, paged on by nobody.
    labels["test"] = "true";
    labels["severity"] = "info";
  }
  return labels;
}

json annotations_of(const AlertContent& a) {
  json annotations = {{"summary", a.title()}, {"step", a.step},
                      {"memory", a.figures},  {"message", truncate_utf8(a.message, 4000)},
                      {"log", where(a)},      {"report", a.report_command()}};
  if (a.revision > 0 && !a.near_oom) annotations["revision"] = std::to_string(a.revision);
  if (!a.test) annotations["webhook_id"] = a.webhook_id();  // a storm's members keep their own
  if (a.resent) annotations["resent_after_store_recovery"] = "true";
  if (!a.fixes.empty()) {
    annotations["top_fix"] = a.fixes[0].id;
    annotations["fixes"] = fixes_text(a, 3, false);
  }
  if (a.stalled) {
    annotations["silent_for"] = a.stalled->silent_for;
    annotations["last_line"] = truncate_utf8(a.stalled->last_line, 1000);
  }
  if (!a.url.empty()) annotations["url"] = a.url;
  if (a.predicted) {
    annotations[a.near_oom ? "peak" : "predicted_peak"] = a.predicted->peak;
    annotations["usable_memory"] = a.predicted->usable;
    annotations["top_change"] = a.predicted->top_change;
  }
  return annotations;
}

}  // namespace

namespace {

// A stall that ended is sent once more as resolved, as Alertmanager resolves an alert.
std::string status_of(const AlertContent& a) {
  return a.stalled && a.stalled->resolved ? "resolved" : "firing";
}

namespace {

// Alertmanager's fingerprint names the alert across its updates: the key without a revision,
// hashed (FNV-1a), so it is as unique as the key and an amended OOM keeps its fingerprint.
std::string fingerprint_of(const AlertContent& a) {
  std::string key = a.webhook_id();
  if (a.revision > 0 && !a.near_oom && key.starts_with("evt_")) key.resize(key.rfind("_r"));
  uint64_t hash = 14695981039346656037ull;
  for (const unsigned char c : key) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return fmt::format("{:016x}", hash);
}

}  // namespace

json webhook_alert(const AlertContent& a) {
  return {{"status", status_of(a)},
          {"labels", labels_of(a)},
          {"annotations", annotations_of(a)},
          {"startsAt", a.starts_at},
          {"endsAt", a.ends_at.empty() ? "0001-01-01T00:00:00Z" : a.ends_at},
          {"generatorURL", a.url},
          {"fingerprint", fingerprint_of(a)}};
}

json api_alert(const AlertContent& a) {
  json alert = {
      {"labels", labels_of(a)}, {"annotations", annotations_of(a)}, {"startsAt", a.starts_at}};
  if (!a.ends_at.empty()) alert["endsAt"] = a.ends_at;  // a test resolves itself
  if (!a.url.empty()) alert["generatorURL"] = a.url;
  return alert;
}

}  // namespace

json alertmanager_webhook_payload(const AlertContent& a, const std::string& receiver) {
  if (!a.storm.empty()) {
    // A storm: Alertmanager's own shape for a group, one alert per OOM with its own key.
    json alerts = json::array();
    for (const AlertContent& member : a.storm) alerts.push_back(webhook_alert(member));
    return {{"version", "4"},
            {"groupKey", fmt::format("{{}}:{{host=\"{}\"}}", a.host)},
            {"truncatedAlerts", 0},
            {"status", "firing"},
            {"receiver", receiver},
            {"groupLabels", {{"host", a.host}}},
            {"commonLabels", {{"host", a.host}}},
            {"commonAnnotations", {{"summary", a.title()}}},
            {"externalURL", ""},
            {"alerts", alerts}};
  }
  const json labels = labels_of(a);
  return {
      {"version", "4"},         {"groupKey", fmt::format("{{}}:{{training_job=\"{}\"}}", a.job)},
      {"truncatedAlerts", 0},   {"status", status_of(a)},
      {"receiver", receiver},   {"groupLabels", {{"training_job", a.job}}},
      {"commonLabels", labels}, {"commonAnnotations", annotations_of(a)},
      {"externalURL", ""},      {"alerts", json::array({webhook_alert(a)})}};
}

json alertmanager_api_payload(const AlertContent& a) {
  json alerts = json::array();
  if (a.storm.empty()) alerts.push_back(api_alert(a));
  for (const AlertContent& member : a.storm) alerts.push_back(api_alert(member));
  return alerts;
}

}  // namespace oomtriage::daemon
