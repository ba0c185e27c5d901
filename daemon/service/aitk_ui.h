// daemon/service/aitk_ui.h
//
// AI Toolkit UI's jobs as the healer needs them: a job by name, a crashed job re-queued with a
// patched config, a running job stopped. Through the UI's own HTTP routes when `ui_url:` is set
// and the UI answers (they keep Prisma's bookkeeping and any later schema right):
//   GET /api/jobs, POST /api/jobs {id, name, gpu_ids, job_config}, GET /api/jobs/<id>/start,
//   GET /api/queue/<gpu_ids>/start, GET /api/jobs/<id>/stop,
// with `Authorization: Bearer <token>` when the UI runs with AI_TOOLKIT_AUTH. Through one SQL
// transaction on `aitk_db.db` when the UI does not answer (or no URL is set). Facts:
// docs/self-healing-and-fleet.md §A.2.
//
// Every answer comes back through a callback on the daemon's loop, never from within the call.
#pragma once

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "daemon/common/daemon_config.h"
#include "db/aitk_database.h"
#include "parsers/result.h"

namespace oomtriage::daemon {

class AitkUi : public std::enable_shared_from_this<AitkUi> {
 public:
  using Found = std::function<void(Result<std::optional<db::AitkJob>>)>;
  using Done = std::function<void(Result<bool>)>;

  AitkUi(boost::asio::io_context& io, HealConfig config);

  void job_named(const std::string& name, Found done);
  // Writes `job_config`, queues the job and sets its GPUs' queue running, only while the job is
  // still `error`: false (and nothing changed) when someone acted on it meanwhile.
  void requeue(const db::AitkJob& job, std::string job_config, std::string info, Done done);
  // Asks a running job to stop; false when it was not running.
  void stop(const db::AitkJob& job, std::string info, Done done);

  // "the UI at http://…" or "aitk_db.db": where the last answer came from, for the log.
  const std::string& last_channel() const { return last_channel_; }

 private:
  struct Answer {
    bool reached = false;  // the UI answered at all; if not, the database is the way
    std::string body;      // of a 2xx
    std::optional<Error> error;
  };
  void call(bool get, const std::string& target, std::string body,
            std::function<void(Answer)> answered);
  // A request safe to repeat, tried up to `tries` times a second apart until it succeeds.
  void call_until_done(bool get, const std::string& target, int tries,
                       std::function<void(Answer)> answered);
  // The UI did not answer: the database when there is one, else `error`.
  bool use_database(const Answer& answer) const {
    return !answer.reached && !config_.ai_toolkit_db.empty();
  }
  Result<db::AitkDatabase*> database();

  void job_named_in_database(const std::string& name, Found done);
  void requeue_in_database(const db::AitkJob& job, const std::string& job_config,
                           const std::string& info, Done done);
  void stop_in_database(const db::AitkJob& job, const std::string& info, Done done);

  boost::asio::io_context& io_;
  HealConfig config_;
  std::unique_ptr<boost::asio::ssl::context> tls_;
  std::string tls_error_;  // the system trust store could not be loaded
  std::unique_ptr<db::AitkDatabase> database_;
  std::string last_channel_;
};

// The UI's job list (GET /api/jobs) -> the job named `name`, if any. Pure, for tests.
Result<std::optional<db::AitkJob>> job_from_ui_list(const std::string& body,
                                                    const std::string& name);

}  // namespace oomtriage::daemon
