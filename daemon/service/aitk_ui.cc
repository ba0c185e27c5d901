// daemon/service/aitk_ui.cc: the UI's routes, and its database when the UI does not answer.
#include "daemon/service/aitk_ui.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "daemon/net/http_client.h"
#include "parsers/bounded_document.h"

namespace oomtriage::daemon {
namespace {

namespace asio = boost::asio;
using json = nlohmann::json;

constexpr auto kRequestTimeout = std::chrono::seconds(5);
constexpr int kStartTries = 5;
constexpr auto kStartRetryDelay = std::chrono::seconds(1);
// The job list holds every job's config: a UI with hundreds of jobs answers with megabytes.
constexpr size_t kMaxAnswer = 64 << 20;

// A path segment: AI Toolkit's ids are UUIDs, its queue ids GPU lists such as "0,1".
std::string path_segment(std::string_view text) {
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == ',') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

std::string text_field(const json& job, const char* key) {
  const auto it = job.find(key);
  return it != job.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<db::AitkJob> job_from_json(const json& job) {
  if (!job.is_object()) return std::nullopt;
  return db::AitkJob{text_field(job, "id"),      text_field(job, "name"),
                     text_field(job, "gpu_ids"), text_field(job, "job_config"),
                     text_field(job, "status"),  text_field(job, "info")};
}

}  // namespace

Result<std::optional<db::AitkJob>> job_from_ui_list(const std::string& body,
                                                    const std::string& name) {
  Result<json> parsed = parsers::parse_json(body, "the UI's answer", kMaxAnswer);
  const json list = parsed ? std::move(*parsed) : json(json::value_t::discarded);
  const auto jobs = list.is_object() ? list.find("jobs") : list.end();
  if (list.is_discarded() || !list.is_object() || jobs == list.end() || !jobs->is_array()) {
    return make_error(ErrorCode::kBadInput,
                      "the UI's GET /api/jobs did not answer with {\"jobs\": [...]}");
  }
  for (const json& job : *jobs) {
    if (job.is_object() && text_field(job, "name") == name) return job_from_json(job);
  }
  return std::optional<db::AitkJob>{};
}

AitkUi::AitkUi(asio::io_context& io, HealConfig config) : io_(io), config_(std::move(config)) {
  auto tls = make_tls_context("");
  if (tls) {
    tls_ = std::move(*tls);
  } else {
    tls_error_ = tls.error().message;  // https is refused rather than sent unverified
    tls_ = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
  }
}

void AitkUi::call(bool get, const std::string& target, std::string body,
                  std::function<void(Answer)> answered) {
  HttpRequest request;
  request.method = get ? HttpRequest::Method::kGet : HttpRequest::Method::kPost;
  request.url = config_.ui_url + target;
  request.body = std::move(body);
  request.timeout = kRequestTimeout;
  request.want_body = kMaxAnswer;
  if (!config_.ui_token.empty()) {
    request.headers.emplace_back("Authorization", "Bearer " + config_.ui_token);
  }
  const std::string what = fmt::format("{} {}", get ? "GET" : "POST", target);
  if (!tls_error_.empty() && config_.ui_url.rfind("https://", 0) == 0) {
    Answer refused;
    refused.reached = true;  // the database is no way around a broken trust store
    refused.error = make_error(ErrorCode::kIo, "the UI's https: " + tls_error_);
    asio::post(io_, [answered = std::move(answered), refused] { answered(refused); });
    return;
  }
  http_send(io_, *tls_, std::move(request),
            [what, answered = std::move(answered)](const Result<HttpResponse>& reply) {
              Answer answer;
              answer.reached = static_cast<bool>(reply);
              if (!reply) {
                answer.error = make_error(
                    ErrorCode::kIo,
                    fmt::format("the UI did not answer {}: {}", what, reply.error().message));
                return answered(std::move(answer));
              }
              const HttpResponse& response = *reply;
              if (response.status >= 200 && response.status < 300) {
                answer.body = response.body;
              } else {
                answer.error = make_error(
                    ErrorCode::kIo,
                    fmt::format("the UI answered {} with HTTP {}{}: {}", what, response.status,
                                response.status == 401 ? " (wrong or missing token_file)" : "",
                                response.body.substr(0, 200)));
              }
              answered(std::move(answer));
            });
}

void AitkUi::call_until_done(bool get, const std::string& target, int tries,
                             std::function<void(Answer)> answered) {
  auto self = shared_from_this();
  call(get, target, "", [=](Answer answer) {
    if (!answer.error || tries <= 1) return answered(std::move(answer));
    auto timer = std::make_shared<asio::steady_timer>(self->io_, kStartRetryDelay);
    timer->async_wait([=](const boost::system::error_code&) {
      (void)timer;
      self->call_until_done(get, target, tries - 1, answered);
    });
  });
}

Result<db::AitkDatabase*> AitkUi::database() {
  if (config_.ai_toolkit_db.empty()) {
    return make_error(ErrorCode::kIo, "the UI did not answer and no ai_toolkit_db is set");
  }
  if (!database_) {
    auto opened = db::AitkDatabase::open(config_.ai_toolkit_db);
    if (!opened) return opened.error();
    database_ = std::move(*opened);
  }
  last_channel_ = config_.ai_toolkit_db;
  return database_.get();
}

void AitkUi::job_named(const std::string& name, Found done) {
  auto self = shared_from_this();
  if (config_.ui_url.empty()) {
    asio::post(io_, [self, name, done] { self->job_named_in_database(name, done); });
    return;
  }
  call(true, "/api/jobs", "", [self, name, done](Answer answer) {
    if (self->use_database(answer)) return self->job_named_in_database(name, done);
    if (answer.error) return done(*answer.error);
    self->last_channel_ = "the UI at " + self->config_.ui_url;
    done(job_from_ui_list(answer.body, name));
  });
}

void AitkUi::job_named_in_database(const std::string& name, Found done) {
  auto database = this->database();
  if (!database) return done(database.error());
  auto row = (*database)->job_named(name);
  if (!row) database_.reset();  // opened again next time
  done(std::move(row));
}

void AitkUi::requeue(const db::AitkJob& job, std::string job_config, std::string info, Done done) {
  auto self = shared_from_this();
  if (config_.ui_url.empty()) {
    asio::post(io_, [self, job, job_config, info, done] {
      self->requeue_in_database(job, job_config, info, done);
    });
    return;
  }
  Result<json> parsed = parsers::parse_json(job_config, "the patched job config");
  json config = parsed ? std::move(*parsed) : json(json::value_t::discarded);
  if (config.is_discarded()) {
    asio::post(io_, [done] {
      done(make_error(ErrorCode::kBadInput, "the patched job config is not JSON"));
    });
    return;
  }
  const std::string id = path_segment(job.id);
  // The job as the UI has it now: still failed, or someone acted on it meanwhile.
  call(true, "/api/jobs?id=" + id, "", [=](Answer answer) {
    if (self->use_database(answer)) return self->requeue_in_database(job, job_config, info, done);
    if (answer.error) return done(*answer.error);
    Result<json> answered = parsers::parse_json(answer.body, "the UI's answer", kMaxAnswer);
    const json current = answered ? std::move(*answered) : json(json::value_t::discarded);
    const auto row = job_from_json(current);
    if (!row || row->status != "error") return done(false);
    // The UI's edit (config), then its "Start" (queued), then its queue's "Start" (running).
    const json edit = {
        {"id", job.id}, {"name", job.name}, {"gpu_ids", job.gpu_ids}, {"job_config", config}};
    self->call(false, "/api/jobs", edit.dump(), [=](Answer edited) {
      if (edited.error) return done(*edited.error);
      // The config is in: from here on the job must end up queued with its queue running, so
      // the two starts (each safe to repeat) are retried rather than the whole re-queue.
      const std::string queue = "/api/queue/" + path_segment(job.gpu_ids) + "/start";
      self->call_until_done(true, "/api/jobs/" + id + "/start", kStartTries, [=](Answer started) {
        if (started.error) return done(*started.error);
        self->call_until_done(true, queue, kStartTries, [=](Answer running) {
          if (running.error) return done(*running.error);
          self->last_channel_ = "the UI at " + self->config_.ui_url;
          done(true);
        });
      });
    });
  });
}

void AitkUi::requeue_in_database(const db::AitkJob& job, const std::string& job_config,
                                 const std::string& info, Done done) {
  auto database = this->database();
  if (!database) return done(database.error());
  auto queued = (*database)->requeue(job, job_config, info);
  if (!queued) database_.reset();
  done(std::move(queued));
}

void AitkUi::stop(const db::AitkJob& job, std::string info, Done done) {
  auto self = shared_from_this();
  if (config_.ui_url.empty()) {
    asio::post(io_, [self, job, info, done] { self->stop_in_database(job, info, done); });
    return;
  }
  call(true, "/api/jobs/" + path_segment(job.id) + "/stop", "", [=](Answer answer) {
    if (self->use_database(answer)) return self->stop_in_database(job, info, done);
    if (answer.error) return done(*answer.error);
    self->last_channel_ = "the UI at " + self->config_.ui_url;
    done(true);
  });
}

void AitkUi::stop_in_database(const db::AitkJob& job, const std::string& info, Done done) {
  auto database = this->database();
  if (!database) return done(database.error());
  auto stopped = (*database)->stop(job.id, info);
  if (!stopped) database_.reset();
  done(std::move(stopped));
}

}  // namespace oomtriage::daemon
