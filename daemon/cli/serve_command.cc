// daemon/cli/serve_command.cc: the routes of `oomtriage serve`, a pool of read-only store
// connections (one per server thread at most: a SQLite connection or a libpq one serves one
// query at a time), /fleet's figures cached for a few seconds, and the security headers.
#include "daemon/cli/serve_command.h"

#include <signal.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include <chrono>
#include <condition_variable>
#include <ctime>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

#include "daemon/cli/report_command.h"
#include "daemon/common/clock.h"
#include "daemon/common/exit_codes.h"
#include "daemon/net/web_access.h"
#include "daemon/net/web_server.h"
#include "daemon/render/html_report.h"
#include "daemon/render/job_names.h"
#include "daemon/render/json_report.h"
#include "daemon/render/live_html.h"
#include "daemon/render/live_text.h"
#include "daemon/render/markdown_report.h"
#include "daemon/render/web_pages.h"
#include "daemon/service/service_manager.h"
#include "db/fleet_store.h"

namespace oomtriage::daemon {
namespace {

// No script at all, styles only inline, nothing fetched, no framing, forms only to this server.
constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'";

// Read-only store connections, opened as threads need them (a missing store is retried at the
// next request) and handed to one request at a time. A file put in the store's place (a new
// inode: a store recovered or put back from a backup, or removed and made anew by a restarted
// daemon) is another store: a connection open on the old file would show the old one for ever,
// so every few seconds the path is looked at again and the connections on another file are
// closed (docs/serve.md).
class ReaderPool {
 public:
  ReaderPool(StoreTarget target, ReadMode mode, size_t size)
      : target_(std::move(target)), mode_(mode), size_(size) {}

  class Lease {
   public:
    Lease(ReaderPool& pool, std::unique_ptr<db::JobReader> reader, uint64_t generation)
        : pool_(&pool), reader_(std::move(reader)), generation_(generation) {}
    Lease(Lease&&) = default;
    ~Lease() {
      if (reader_) pool_->give_back(std::move(reader_), generation_);
    }
    db::JobReader& operator*() { return *reader_; }
    db::JobReader* operator->() { return reader_.get(); }
    // A connection that failed is not given back: the next request opens a new one.
    void discard() {
      reader_.reset();
      std::lock_guard lock(pool_->mutex_);
      --pool_->opened_;
      pool_->freed_.notify_one();
    }

   private:
    ReaderPool* pool_;
    std::unique_ptr<db::JobReader> reader_;
    uint64_t generation_;
  };

  Result<Lease> take() {
    std::unique_lock lock(mutex_);
    follow_file();
    freed_.wait(lock, [&] { return !idle_.empty() || opened_ < size_; });
    if (!idle_.empty()) {
      auto reader = std::move(idle_.back());
      idle_.pop_back();
      return Lease(*this, std::move(reader), generation_);
    }
    ++opened_;
    const uint64_t generation = generation_;
    lock.unlock();
    auto opened = open_reader(target_, mode_);
    if (!opened || !*opened) {
      std::lock_guard relock(mutex_);
      --opened_;
      freed_.notify_one();
      if (!opened) return opened.error();
      return make_error(ErrorCode::kIo, "no store at " + target_.location + " yet");
    }
    return Lease(*this, std::move(*opened), generation);
  }

 private:
  struct FileId {
    dev_t dev = 0;
    ino_t ino = 0;
    bool operator==(const FileId&) const = default;
  };

  // With the lock held. A fleet store's URL is no file: its identity stays "none".
  void follow_file() {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_look_) return;
    next_look_ = now + kLookEvery;
    FileId current;
    struct stat st {};
    if (::stat(target_.location.c_str(), &st) == 0) current = {st.st_dev, st.st_ino};
    if (current == file_) return;
    file_ = current;
    ++generation_;
    opened_ -= idle_.size();
    idle_.clear();
    freed_.notify_all();
  }

  void give_back(std::unique_ptr<db::JobReader> reader, uint64_t generation) {
    std::lock_guard lock(mutex_);
    if (generation != generation_) {
      --opened_;  // opened on a file no longer at the path: closed
    } else {
      idle_.push_back(std::move(reader));
    }
    freed_.notify_one();
  }

  static constexpr auto kLookEvery = std::chrono::seconds(2);

  StoreTarget target_;
  ReadMode mode_;
  size_t size_;
  std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<std::unique_ptr<db::JobReader>> idle_;
  size_t opened_ = 0;
  FileId file_;
  uint64_t generation_ = 0;
  std::chrono::steady_clock::time_point next_look_{};
};

WebResponse html_page(int status, std::string body) {
  return {status, "text/html; charset=utf-8", std::move(body), {}};
}

WebResponse error_page(int status, const std::string& title, const std::string& detail) {
  return html_page(status, render_error_page(status, title, detail));
}

// A page that reloads itself while a job on it is under way: a plain Refresh header, which
// browsers follow without script.
WebResponse refreshing(WebResponse page, bool refresh) {
  if (refresh) page.headers.emplace_back("Refresh", std::to_string(kRefreshSeconds));
  return page;
}

// "2026-12-04" as the unix seconds its UTC day begins; nullopt for anything else (the day is
// read back to reject "2026-02-31").
std::optional<int64_t> utc_day_start(const std::string& day) {
  if (day.size() != 10 || day[4] != '-' || day[7] != '-') return std::nullopt;
  for (const size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (day[i] < '0' || day[i] > '9') return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = std::stoi(day.substr(0, 4)) - 1900;
  tm.tm_mon = std::stoi(day.substr(5, 2)) - 1;
  tm.tm_mday = std::stoi(day.substr(8, 2));
  const int64_t start = static_cast<int64_t>(timegm(&tm));
  if (utc_time(start, "%Y-%m-%d") != day) return std::nullopt;
  return start;
}

class Site {
 public:
  Site(const ServeOptions& options, std::unique_ptr<WebAccess> access)
      : options_(options),
        access_(std::move(access)),
        readers_(options.store,
                 options.allow_writer_role ? ReadMode::kReadOnlyAnyRole : ReadMode::kReadOnly,
                 std::max(1u, options.threads)),
        fleet_(db::is_fleet_url(options.store.location)) {}

  // Opens one connection before listening: a store that cannot be read is said at start.
  Result<Ok> check_store() {
    auto lease = readers_.take();
    if (!lease) return lease.error();
    if (auto* store = dynamic_cast<db::FleetStore*>(&**lease);
        store && !store->writer_role().empty()) {
      fmt::print(stderr,
                 "oomtriage serve: WARNING: {}; it is served in read-only transactions, but give "
                 "serve a read-only role (docs/serve.md)\n",
                 store->writer_role());
    }
    return Ok{};
  }

  WebResponse handle(const WebRequest& request) {
    if (access_) {
      const AccessVerdict verdict = access_->check(request.authorization, request.peer_group);
      switch (verdict.kind) {
        case AccessVerdict::Kind::kAllowed: break;
        case AccessVerdict::Kind::kRefused: {
          WebResponse refused = error_page(401, "Sign in", "this server needs a token or a user");
          refused.headers.emplace_back("WWW-Authenticate", access_->challenge());
          return refused;
        }
        case AccessVerdict::Kind::kBackOff: {
          WebResponse wait =
              error_page(429, "Too many failed sign-ins",
                         fmt::format("from this address; try again in {} s", verdict.retry_after));
          wait.headers.emplace_back("Retry-After", std::to_string(verdict.retry_after));
          return wait;
        }
        case AccessVerdict::Kind::kBusy: {
          WebResponse busy = error_page(503, "Busy checking passwords", "try again in a moment");
          busy.headers.emplace_back("Retry-After", std::to_string(verdict.retry_after));
          return busy;
        }
      }
    }
    const Target target = parse_target(request.target);
    if (target.path == "/healthz") return {200, "text/plain; charset=utf-8", "ok\n", {}};
    if (target.path == "/" || target.path == "/index.html") return jobs(target);
    if (target.path == "/fleet") return fleet();
    if (target.path.starts_with("/job/")) return job(target.path.substr(5), target);
    return error_page(404, "Not found", "there is no page at this address");
  }

 private:
  WebResponse unavailable(const Error& error) {
    return error_page(503, "Store unavailable", error.message);
  }

  WebResponse jobs(const Target& target) {
    JobsPageView view;
    view.fleet = fleet_;
    view.store = options_.store.location;
    view.made_at = when(unix_now());
    const auto param = [&](const char* name) {
      const auto it = target.query.find(name);
      return it == target.query.end() ? std::string() : it->second.substr(0, 200);
    };
    JobsPageFilter& f = view.filter;
    f.host = param("host");
    f.outcome = param("outcome");
    f.phase = param("phase");
    f.trainer = param("trainer");
    f.family = param("family");
    f.since = param("since");
    f.text = param("q");
    f.from = param("from");
    f.to = param("to");
    f.refresh = param("refresh") != "0";
    const long page = std::strtol(param("page").c_str(), nullptr, 10);
    f.page = page >= 1 && page <= 100000 ? static_cast<size_t>(page) : 1;
    JobsFilter filter;
    filter.outcome = f.outcome;
    filter.phase = f.phase;
    filter.trainer = f.trainer;
    filter.family = f.family;
    filter.text = f.text;
    if (!f.since.empty()) {
      filter.since_seconds = parse_duration(f.since);
      if (!filter.since_seconds) return error_page(400, "Bad filter", "since: " + f.since);
    }
    // /fleet counts an OOM on the UTC day it was stored: a day's filter is that day whole.
    if (!f.from.empty()) {
      filter.oom_from = utc_day_start(f.from);
      if (!filter.oom_from) return error_page(400, "Bad filter", "from: " + f.from);
    }
    if (!f.to.empty()) {
      const auto to = utc_day_start(f.to);
      if (!to) return error_page(400, "Bad filter", "to: " + f.to);
      filter.oom_until = *to + 86400;
    }
    filter.limit = options_.page_size;
    filter.offset = (f.page - 1) * options_.page_size;
    auto lease = readers_.take();
    if (!lease) return unavailable(lease.error());
    auto found = find_jobs_page(**lease, f.host, filter, unix_now());
    if (!found) {
      lease->discard();
      return unavailable(found.error());
    }
    view.more = found->more;
    view.notes = found->notes;
    const int64_t now = unix_now();
    for (size_t i = 0; i < found->jobs.size(); ++i)
      view.rows.push_back(make_job_row(found->jobs[i], found->names[i], now));
    return refreshing(html_page(200, render_jobs_page(view)), list_refreshes(view));
  }

  // /job/<key>, or /job/<name>: a key first (keys keep working whatever names jobs take), then
  // a name as the list shows it ("my_lora (col/b)") or as the job calls itself. A name several
  // jobs share answers with a choice of them.
  WebResponse job(std::string key, const Target& target) {
    enum class Form { kHtml, kJson, kMarkdown } form = Form::kHtml;
    if (key.ends_with(".json")) {
      form = Form::kJson;
      key.resize(key.size() - 5);
    } else if (key.ends_with(".md")) {
      form = Form::kMarkdown;
      key.resize(key.size() - 3);
    }
    auto lease = readers_.take();
    if (!lease) return unavailable(lease.error());
    auto found = (*lease)->job_story_by_key(key);
    if (!found) {
      lease->discard();
      return unavailable(found.error());
    }
    if (!*found) {
      auto named = jobs_named(**lease, key);
      if (!named) {
        lease->discard();
        return unavailable(named.error());
      }
      if (named->first.empty()) {
        return error_page(404, "No such job", "no job has the key or the name " + key);
      }
      if (named->first.size() > 1) {
        return html_page(200, render_job_choice_page(key, named->first, named->second, fleet_,
                                                     options_.store.location, when(unix_now())));
      }
      found = (*lease)->job_story_by_key(named->first.front().key);
      if (!found) {
        lease->discard();
        return unavailable(found.error());
      }
      if (!*found) return error_page(404, "No such job", "no job has the name " + key);
      key = named->first.front().key;
    }
    const db::JobStory& story = **found;
    ReportView view = build_view(story);
    // The name as `jobs` shows it: with its folder's end when another job shares it.
    auto shown = shown_names(**lease, story.job.host, {story.job});
    view.name = shown && !shown->empty() ? shown->front() : story.job.name;
    view.report_command = "oomtriage report " + shell_quote(view.name) +
                          (story.job.host.empty() ? "" : " --host " + shell_quote(story.job.host));
    const std::string href = "/job/" + url_encode(key);
    switch (form) {
      case Form::kJson:
        return {200, "application/json; charset=utf-8", render_json_report(story, view), {}};
      case Form::kMarkdown:
        return {200, "text/markdown; charset=utf-8", render_markdown_report(view), {}};
      case Form::kHtml: break;
    }
    view.nav = {{"/", "← all jobs"},         {"#runs", "runs"},        {"#fixes", "fixes"},
                {"#config", "config diffs"}, {href + ".json", "JSON"}, {href + ".md", "Markdown"}};
    const auto asked = target.query.find("refresh");
    const bool refresh =
        runs_now(story.job) && (asked == target.query.end() || asked->second != "0");
    if (runs_now(story.job)) {
      view.nav.emplace_back(refresh ? href + "?refresh=0" : href,
                            refresh ? "stop reloading" : "reload every 10 s");
    }
    set_live(view, story.job, unix_now());
    view.loss = loss_curve_of(view);
    return refreshing(html_page(200, render_html_report(view)), refresh);
  }

  // The jobs `name` names, newest first, with their names as the list shows them: those whose
  // shown name it is, else those whose own name it is.
  static Result<std::pair<std::vector<db::JobSummary>, std::vector<std::string>>> jobs_named(
      db::JobReader& store, const std::string& name) {
    db::JobQuery query;
    query.names = {name};
    // "my_lora (col/b)": the name before its folder's end.
    if (const size_t open = name.rfind(" ("); open != std::string::npos && name.ends_with(")"))
      query.names.push_back(name.substr(0, open));
    OOMTRIAGE_ASSIGN_OR_RETURN(std::vector<db::JobSummary> jobs, store.find_jobs(query));
    keep_newest(jobs);
    OOMTRIAGE_ASSIGN_OR_RETURN(std::vector<std::string> shown, shown_names(store, "", jobs));
    std::pair<std::vector<db::JobSummary>, std::vector<std::string>> out;
    for (const bool by_shown : {true, false}) {
      for (size_t i = 0; i < jobs.size(); ++i) {
        if ((by_shown ? shown[i] : jobs[i].name) != name) continue;
        out.first.push_back(jobs[i]);
        out.second.push_back(shown[i]);
      }
      if (!out.first.empty()) break;
    }
    return out;
  }

  // /fleet's figures are per day and cost a pass over the window's events: the page is made
  // once, then made again at most every fleet_cache_seconds on a thread of its own while
  // readers get the page before it. Only the very first reader waits for it.
  WebResponse fleet() {
    std::unique_lock lock(fleet_mutex_);
    if (!fleet_page_) {
      // The first readers: one makes it, the others wait for it.
      fleet_made_cv_.wait(lock, [&] { return !fleet_refreshing_; });
      if (!fleet_page_) {
        fleet_refreshing_ = true;
        lock.unlock();
        auto made = make_fleet_page_or_error();
        lock.lock();
        fleet_refreshing_ = false;
        fleet_made_cv_.notify_all();
        if (!made) return unavailable(made.error());
        fleet_page_ = std::make_shared<const std::string>(std::move(*made));
        fleet_made_ = unix_now();
      }
    } else if (!fleet_refreshing_ && unix_now() - fleet_made_ >= options_.fleet_cache_seconds) {
      fleet_refreshing_ = true;
      if (fleet_refresher_.joinable()) fleet_refresher_.join();  // it finished: refreshing was off
      try {
        fleet_refresher_ = std::thread([this] {
          auto made = make_fleet_page_or_error();
          std::lock_guard done(fleet_mutex_);
          // A failed refresh keeps the page before it; the next reader tries again.
          if (made) {
            fleet_page_ = std::make_shared<const std::string>(std::move(*made));
            fleet_made_ = unix_now();
          }
          fleet_refreshing_ = false;
          fleet_made_cv_.notify_all();
        });
      } catch (const std::system_error&) {
        fleet_refreshing_ = false;  // no thread now: a later reader starts one
      }
    }
    return html_page(200, *fleet_page_);
  }

  // Never throws: a refresh that failed must not leave the flag set and its waiters stuck.
  Result<std::string> make_fleet_page_or_error() {
    try {
      return make_fleet_page();
    } catch (const std::exception& e) {
      return make_error(ErrorCode::kIo, std::string("fleet overview: ") + e.what());
    }
  }

  Result<std::string> make_fleet_page() {
    const int64_t now = unix_now();
    FleetPageView view;
    view.now = now;
    view.days = options_.fleet_days;
    view.fleet = fleet_;
    view.store = options_.store.location;
    view.made_at = when(now);
    const int64_t today = now - now % 86400;
    const int64_t since = today - static_cast<int64_t>(options_.fleet_days - 1) * 86400;
    for (int64_t day = since; day <= today; day += 86400)
      view.day_labels.push_back(utc_time(day, "%Y-%m-%d"));
    auto lease = readers_.take();
    if (!lease) return lease.error();
    auto overview = (*lease)->fleet_overview(since);
    if (!overview) {
      lease->discard();
      return overview.error();
    }
    view.overview = std::move(*overview);
    return render_fleet_page(view);
  }

 public:
  ~Site() {
    if (fleet_refresher_.joinable()) fleet_refresher_.join();
  }

 private:
  const ServeOptions& options_;
  std::unique_ptr<WebAccess> access_;
  ReaderPool readers_;
  bool fleet_;
  std::mutex fleet_mutex_;
  std::condition_variable fleet_made_cv_;
  std::shared_ptr<const std::string> fleet_page_;
  int64_t fleet_made_ = 0;
  bool fleet_refreshing_ = false;
  std::thread fleet_refresher_;
};

}  // namespace

int run_serve(const ServeOptions& options) {
  auto where = parse_listen_address(options.listen);
  if (!where) {
    fmt::print(stderr, "oomtriage serve: {}\n", where.error().message);
    return kExitBadInput;
  }
  std::unique_ptr<WebAccess> access;
  if (!options.access_file.empty()) {
    auto loaded = WebAccess::load(options.access_file);
    if (!loaded) {
      fmt::print(stderr, "oomtriage serve: {}\n", loaded.error().message);
      return exit_code_for(loaded.error());
    }
    access = std::move(*loaded);
  } else if (!where->loopback) {
    fmt::print(stderr,
               "oomtriage serve: {} is reachable beyond this machine, and every job's logs and "
               "configs would be open to anyone there: give --access-file, or listen on "
               "127.0.0.1 behind a proxy that authenticates (docs/serve.md)\n",
               options.listen);
    return kExitBadInput;
  }
  Site site(options, std::move(access));
  if (auto checked = site.check_store(); !checked) {
    fmt::print(stderr, "oomtriage serve: {}\n", checked.error().message);
    return exit_code_for(checked.error());
  }
  // SIGINT and SIGTERM are taken by one thread (blocked in every other) and stop the server.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // A client gone mid-write must not kill the server.
  signal(SIGPIPE, SIG_IGN);
  WebServerLimits limits;
  limits.threads = std::max(1u, options.threads);
  limits.max_connections = options.max_connections;
  limits.max_per_address = options.max_per_address;
  limits.header_timeout = std::chrono::milliseconds(options.header_timeout_ms);
  limits.request_timeout = std::chrono::milliseconds(options.client_timeout_ms);
  WebServer server([&site](const WebRequest& request) { return site.handle(request); }, limits,
                   {{"Content-Security-Policy", kContentSecurityPolicy},
                    {"X-Content-Type-Options", "nosniff"},
                    {"X-Frame-Options", "DENY"},
                    {"Referrer-Policy", "no-referrer"},
                    {"Cache-Control", "no-store"}});
  if (auto listening = server.listen(options.listen); !listening) {
    fmt::print(stderr, "oomtriage serve: {}\n", listening.error().message);
    return kExitEnvironment;
  }
  std::thread waiter([&server, stop_signals] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    notify_service_manager("STOPPING=1");
    server.stop();
  });
  fmt::print(stderr, "oomtriage serve: http://{}:{}/ serving {}{}\n",
             where->host.find(':') != std::string::npos ? "[" + where->host + "]" : where->host,
             server.port(), options.store.location,
             options.access_file.empty() ? "" : " (access file " + options.access_file + ")");
  notify_service_manager("READY=1");
  server.run();
  // The waiter is parked in sigwait when run() ended otherwise; a signal to ourselves frees it.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  return kExitOk;
}

}  // namespace oomtriage::daemon
