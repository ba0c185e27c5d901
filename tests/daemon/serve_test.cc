// tests/daemon/serve_test.cc
//
// `oomtriage serve` as a user meets it: the real binary on a loopback port, asked by curl and
// looked at in headless Chromium. The jobs list with its filters and pages, a job's page as
// `report` draws it (and its .json and .md as `report` prints them), /fleet's charts, hostile
// job names and log text inert, the access file (tokens, users, its mode), loopback by default,
// the store never written, a fleet role that can write refused, and slow or silent clients cut
// off without holding the server.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <crypt.h>
#include <poll.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <thread>

#include "daemon/common/clock.h"
#include "db/fleet_store.h"
#include "db/store.h"
#include "tests/support/browser.h"
#include "tests/support/e2e.h"
#include "tests/support/postgres.h"
#include "tests/support/serve_process.h"
#include "tests/support/store_rows.h"

using namespace oomtriage;
using namespace oomtriage::testing;

namespace {

const std::string kHostileName = "<script>alert(1)</script>\"lora";
const std::string kHostileLine = "CUDA out of memory. <img src=x onerror=alert(2)>";

// A job whose one run ended `outcome`, with an OOM in `phase` when it crashed.
void add_job(db::Store& store, const std::string& name, int64_t age, const std::string& outcome,
             uint64_t ino, const std::string& phase = "sampling",
             const std::string& message = "CUDA out of memory.") {
  const int64_t now = daemon::unix_now() - age;
  db::Progress progress = progress_for_new_job(store, name, ino, now);
  progress.outcome = outcome;
  if (outcome == "crashed_oom") {
    db::EventRow e;
    e.offset = 100;
    e.kind = "cuda";
    e.phase = phase;
    e.model_family = "flux.1";
    e.step = 500;
    nlohmann::json event = {{"kind", "cuda"},     {"phase", phase}, {"step", 500},
                            {"recovered", false}, {"line", 67},     {"message", message},
                            {"total_steps", 3000}};
    e.event_json = event.dump();
    e.fixes_json = R"([{"id":"cheapen_previews","rank":1,"title":"Cheaper previews",)"
                   R"("why":"w","changes":[],"cost":"c"}])";
    progress.events.push_back(e);
  }
  REQUIRE(store.commit_progress(progress, now));
}

// A node store of 60 jobs: 55 completed, 4 crashed in sampling or train_step, 1 hostile.
fs::path fill_store(const fs::path& state) {
  fs::create_directories(state);
  const fs::path db = state / "oomtriage.db";
  auto store = db::Store::open(db.string());
  REQUIRE(store);
  for (int i = 0; i < 55; ++i) {
    add_job(**store, fmt::format("done_{:02}", i), 3600 + i * 60, "completed", 100 + i);
  }
  add_job(**store, "flux_sampling", 120, "crashed_oom", 1, "sampling");
  add_job(**store, "flux_step", 60, "crashed_oom", 2, "train_step");
  add_job(**store, "old_sdxl", 40 * 86400, "crashed_oom", 3, "train_step");
  add_job(**store, kHostileName, 30, "crashed_oom", 4, "sampling", kHostileLine);
  return db;
}

std::string job_key(const std::string& list_page, const std::string& shown_name) {
  const std::regex link(R"re(<a class="job" href="/job/([^"]+)">([^<]*)</a>)re");
  for (auto it = std::sregex_iterator(list_page.begin(), list_page.end(), link);
       it != std::sregex_iterator(); ++it) {
    if ((*it)[2] == shown_name) return (*it)[1];
  }
  return "";
}

// Raw HTTP over loopback, from a chosen address: on Linux all of 127.0.0.0/8 is loopback, so
// peers bound to 127.0.0.2.. are other addresses to serve than the 127.0.0.1 a client uses.
int connect_from(const std::string& from, unsigned short port, bool nonblocking = false) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | (nonblocking ? SOCK_NONBLOCK : 0), 0);
  if (fd < 0) return -1;
  sockaddr_in local{};
  local.sin_family = AF_INET;
  ::inet_pton(AF_INET, from.c_str(), &local.sin_addr);
  sockaddr_in remote{};
  remote.sin_family = AF_INET;
  remote.sin_port = htons(port);
  remote.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&local), sizeof local) != 0 ||
      (::connect(fd, reinterpret_cast<sockaddr*>(&remote), sizeof remote) != 0 &&
       errno != EINPROGRESS)) {
    ::close(fd);
    return -1;
  }
  return fd;
}

struct Answer {
  int status = 0;  // 0: no answer
  std::string head;
  std::string body;
  bool whole = false;  // the body as long as Content-Length said
  bool closed = false;
};

// Reads one answer on `fd` within `limit`.
Answer read_answer(int fd, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::string data;
  Answer out;
  for (;;) {
    const size_t end = data.find("\r\n\r\n");
    if (end != std::string::npos) {
      out.head = data.substr(0, end);
      out.status = std::atoi(out.head.c_str() + 9);
      std::smatch m;
      static const std::regex length(R"(\r\n[Cc]ontent-[Ll]ength: *(\d+))");
      if (std::regex_search(out.head, m, length)) {
        const size_t want = std::stoul(m[1]);
        if (data.size() - end - 4 >= want) {
          out.body = data.substr(end + 4, want);
          out.whole = true;
          return out;
        }
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
    char buffer[16384];
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) {
      out.closed = true;
      break;
    }
    data.append(buffer, static_cast<size_t>(n));
  }
  if (out.status == 0) out.head = data;
  return out;
}

// One request on a connection of its own from `from`.
Answer ask(const std::string& from, unsigned short port, const std::string& request,
           std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
  const int fd = connect_from(from, port);
  if (fd < 0) return {};
  Answer out;
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == ssize_t(request.size())) {
    out = read_answer(fd, limit);
  }
  ::close(fd);
  return out;
}

std::string get_request(const std::string& path, const std::string& authorization = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: serve\r\n" +
         (authorization.empty() ? "" : "Authorization: " + authorization + "\r\n") + "\r\n";
}

std::string basic(const std::string& user_password) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  const std::string& in = user_password;
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t n = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) n |= static_cast<unsigned char>(in[i + 1]) << 8;
    if (i + 2 < in.size()) n |= static_cast<unsigned char>(in[i + 2]);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < in.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < in.size() ? kAlphabet[n & 63] : '=';
  }
  return "Basic " + out;
}

// The descriptors a test with hundreds of sockets needs (the server inherits them).
void raise_descriptor_limit() {
  rlimit limit{};
  ::getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &limit);
}

// `count` peers from `addresses` addresses (127.0.0.<first>..) that each connect, send half a
// request line and hold; one that is closed or refused connects again after `pause`.
class HalfOpenPeers {
 public:
  HalfOpenPeers(unsigned short port, int count, int addresses, int first = 2,
                std::chrono::milliseconds pause = std::chrono::milliseconds(20))
      : port_(port), count_(count), addresses_(addresses), first_(first), pause_(pause) {
    thread_ = std::thread([this] { run(); });
  }
  ~HalfOpenPeers() { stop(); }
  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int holding() const { return holding_.load(); }
  int most_holding() const { return most_holding_.load(); }
  int dropped() const { return dropped_.load(); }
  int told_503() const { return told_503_.load(); }

 private:
  struct Peer {
    int fd = -1;
    bool sent = false;
    std::string heard;
    std::chrono::steady_clock::time_point again;
  };
  void run() {
    std::vector<Peer> peers(static_cast<size_t>(count_));
    std::vector<pollfd> polled(peers.size());
    while (!stop_) {
      const auto now = std::chrono::steady_clock::now();
      int held = 0;
      for (size_t i = 0; i < peers.size(); ++i) {
        Peer& p = peers[i];
        if (p.fd < 0 && now >= p.again) {
          p = {};
          p.fd = connect_from(fmt::format("127.0.0.{}", first_ + int(i) % addresses_), port_,
                              /*nonblocking=*/true);
          if (p.fd < 0) p.again = now + pause_;
        }
        held += p.fd >= 0 && p.sent;
        polled[i] = {p.fd, static_cast<short>(p.fd < 0 ? 0 : p.sent ? POLLIN : POLLOUT), 0};
      }
      holding_ = held;
      if (held > most_holding_) most_holding_ = held;
      ::poll(polled.data(), polled.size(), 20);
      for (size_t i = 0; i < peers.size(); ++i) {
        Peer& p = peers[i];
        if (p.fd < 0 || polled[i].revents == 0) continue;
        bool gone = (polled[i].revents & (POLLERR | POLLHUP)) != 0 && !(polled[i].revents & POLLIN);
        if (!gone && !p.sent && (polled[i].revents & POLLOUT)) {
          p.sent = ::send(p.fd, "GET /healthz HT", 15, MSG_NOSIGNAL) == 15;
          gone = !p.sent;
        } else if (!gone && (polled[i].revents & POLLIN)) {
          char buffer[4096];
          const ssize_t n = ::recv(p.fd, buffer, sizeof buffer, 0);
          if (n > 0) p.heard.append(buffer, static_cast<size_t>(n));
          gone = n == 0 || (n < 0 && errno != EAGAIN);
        }
        if (gone) {
          if (p.heard.starts_with("HTTP/1.1 503")) ++told_503_;
          ++dropped_;
          ::close(p.fd);
          p.fd = -1;
          p.again = std::chrono::steady_clock::now() + pause_;
        }
      }
    }
    for (auto& p : peers)
      if (p.fd >= 0) ::close(p.fd);
  }

  unsigned short port_;
  int count_;
  int addresses_;
  int first_;
  std::chrono::milliseconds pause_;
  std::atomic<bool> stop_{false};
  std::atomic<int> holding_{0};
  std::atomic<int> most_holding_{0};
  std::atomic<int> dropped_{0};
  std::atomic<int> told_503_{0};
  std::thread thread_;
};

// Guessers of alice's password, one thread per address (127.0.1.<first>..), each asking as fast
// as it is answered, whatever it is told.
class Guessers {
 public:
  Guessers(unsigned short port, int addresses, int first = 1) {
    for (int a = 0; a < addresses; ++a) {
      threads_.emplace_back([this, port, from = fmt::format("127.0.1.{}", first + a), a] {
        for (int n = 0; !stop_; ++n) {
          const Answer answer =
              ask(from, port, get_request("/", basic(fmt::format("alice:guess-{}-{}", a, n))),
                  std::chrono::milliseconds(5000));
          std::lock_guard lock(mutex_);
          ++statuses_[answer.status];
          if (answer.status == 429 && retry_after_.empty()) {
            std::smatch m;
            if (std::regex_search(answer.head, m, std::regex(R"(Retry-After: (\d+))")))
              retry_after_ = m[1];
          }
        }
      });
    }
  }
  ~Guessers() { stop(); }
  void stop() {
    stop_ = true;
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  std::map<int, int> statuses() {
    std::lock_guard lock(mutex_);
    return statuses_;
  }
  std::string retry_after() {
    std::lock_guard lock(mutex_);
    return retry_after_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::map<int, int> statuses_;
  std::string retry_after_;
  std::vector<std::thread> threads_;
};

// A legitimate client's `n` requests from 127.0.0.1, each on a new connection: how many were
// answered 200 within `limit`, and the 99th percentile of the time to an answer.
struct Served {
  int ok = 0;
  int asked = 0;
  double p99_ms = 0;
  std::map<int, int> statuses;
};
Served legitimate_client(unsigned short port, int n, const std::vector<std::string>& auths,
                         std::chrono::milliseconds limit = std::chrono::milliseconds(1000)) {
  Served out;
  std::vector<double> took;
  for (int i = 0; i < n; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const Answer answer = ask(
        "127.0.0.1", port, get_request(i % 2 ? "/healthz" : "/", auths[i % auths.size()]), limit);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ++out.asked;
    ++out.statuses[answer.status];
    took.push_back(answer.status == 200 && answer.whole ? ms : 1e9);
    if (answer.status == 200 && answer.whole && ms <= double(limit.count())) ++out.ok;
  }
  std::sort(took.begin(), took.end());
  out.p99_ms = took[std::min(took.size() - 1, took.size() * 99 / 100)];
  return out;
}
// An access file of serve's, mode 600: the token 0123456789abcdef0123 and the user alice
// (password right-password) as a bcrypt hash of `cost`.
fs::path write_access_file(const TempDir& dir, int cost) {
  crypt_data data{};
  const char* salt = crypt_gensalt_rn("$2b$", cost, nullptr, 0, data.setting, sizeof data.setting);
  REQUIRE(salt != nullptr);
  const std::string hash = crypt_r("right-password", salt, &data);
  REQUIRE(hash.starts_with("$2b$"));
  const fs::path access = dir.path / "access";
  std::ofstream(access) << "token 0123456789abcdef0123\nalice:" << hash << "\n";
  fs::permissions(access, fs::perms::owner_read | fs::perms::owner_write);
  return access;
}

}  // namespace

TEST_SUITE("daemon::serve") {
  TEST_CASE("serve: the jobs list filters and pages, a job's page is its report, /fleet counts") {
    TempDir dir;
    const fs::path state = dir.path / "state";
    fill_store(state);
    ServeProcess serve({"--state-dir", state.string(), "serve", "--listen", "127.0.0.1:0"},
                       dir.path / "serve.err");
    INFO("serve's stderr: " << serve.stderr_text());
    REQUIRE(serve.port() != 0);

    const Fetched first = get(serve.url());
    REQUIRE(first.status == 200);
    CHECK(first.headers.find("Content-Security-Policy: default-src 'none'") != std::string::npos);
    CHECK(first.headers.find("X-Content-Type-Options: nosniff") != std::string::npos);
    // Newest first: the hostile job, then flux_step; 50 a page, a next page.
    CHECK(count(first.body, "<a class=\"job\"") == 50);
    CHECK(first.body.find("&lt;script&gt;alert(1)&lt;/script&gt;&quot;lora") <
          first.body.find(">flux_step<"));
    CHECK(first.body.find("<script") == std::string::npos);
    CHECK(first.body.find("rel=\"next\" href=\"/?page=2\"") != std::string::npos);
    const Fetched second = get(serve.url("/?page=2"));
    CHECK(count(second.body, "<a class=\"job\"") == 9);
    CHECK(second.body.find("rel=\"prev\" href=\"/\"") != std::string::npos);
    CHECK(second.body.find("rel=\"next\"") == std::string::npos);

    // The night's OOMs are one click from the front page, and their fix one more.
    CHECK(first.body.find("href=\"/?outcome=crashed_oom&amp;since=24h\"") != std::string::npos);
    const Fetched last_night = get(serve.url("/?outcome=crashed_oom&since=24h"));
    CHECK(count(last_night.body, "<a class=\"job\"") == 3);
    CHECK(last_night.body.find(
              "href=\"/job/" + job_key(last_night.body, "flux_step") +
              "#fixes\">Make preview samples cheaper (<code>cheapen_previews</code>)") !=
          std::string::npos);

    // Each filter.
    const Fetched crashed = get(serve.url("/?outcome=crashed_oom"));
    CHECK(count(crashed.body, "<a class=\"job\"") == 4);
    const Fetched sampling = get(serve.url("/?outcome=crashed_oom&phase=sampling"));
    CHECK(count(sampling.body, "<a class=\"job\"") == 2);
    CHECK(sampling.body.find("<option selected>sampling</option>") != std::string::npos);
    const Fetched recent = get(serve.url("/?outcome=crashed_oom&since=7d"));
    CHECK(count(recent.body, "<a class=\"job\"") == 3);
    CHECK(recent.body.find(">old_sdxl<") == std::string::npos);
    const Fetched named = get(serve.url("/?q=FLUX_"));
    CHECK(count(named.body, "<a class=\"job\"") == 2);
    CHECK(count(get(serve.url("/?family=flux.1&trainer=ai-toolkit")).body, "<a class=\"job\"") ==
          4);
    CHECK(get(serve.url("/?trainer=kohya")).body.find("No jobs match") != std::string::npos);
    // One name for each family and trainer (docs/design.md): any of a family's names and any
    // trainer alias find the same jobs; a word no table knows lists none and says why.
    for (const char* query : {"/?family=flux1-dev&trainer=aitk", "/?family=FLUX&trainer=AI_Toolkit",
                              "/?family=FLUX.1-dev"}) {
      CAPTURE(query);
      CHECK(count(get(serve.url(query)).body, "<a class=\"job\"") == 4);
    }
    CHECK(count(get(serve.url("/?family=sdxl")).body, "<a class=\"job\"") == 0);
    const Fetched unknown_family = get(serve.url("/?family=fluxx"));
    CHECK(unknown_family.status == 200);
    CHECK(count(unknown_family.body, "<a class=\"job\"") == 0);
    CHECK(unknown_family.body.find("unknown model family") != std::string::npos);
    CHECK(unknown_family.body.find("did you mean flux") != std::string::npos);
    CHECK(get(serve.url("/?trainer=kohyaa")).body.find("unknown trainer") != std::string::npos);
    CHECK(first.body.find("ai-toolkit · FLUX.1") != std::string::npos);  // the family's name
    CHECK(get(serve.url("/?since=soon")).status == 400);

    // The job's page is `report --html`'s, with the way back and on; .json and .md are report's.
    const std::string key = job_key(first.body, "flux_step");
    REQUIRE(!key.empty());
    const Fetched page = get(serve.url("/job/" + key));
    CHECK(page.status == 200);
    CHECK(page.body.find("<a href=\"/\">← all jobs</a>") != std::string::npos);
    CHECK(page.body.find("<section id=\"fixes\">") != std::string::npos);
    CHECK(page.body.find("cheapen_previews") != std::string::npos);
    CHECK(page.body.find("<li id=\"run-1\">") != std::string::npos);
    const auto [rc_md, markdown] = oomtriage_says("--color never --state-dir " + state.string() +
                                                  " report flux_step --markdown");
    CHECK(rc_md == 0);
    CHECK(get(serve.url("/job/" + key + ".md")).body == markdown);
    const auto [rc_json, json] =
        oomtriage_says("--state-dir " + state.string() + " report flux_step --json");
    CHECK(rc_json == 0);
    const auto served = nlohmann::json::parse(get(serve.url("/job/" + key + ".json")).body);
    auto printed = nlohmann::json::parse(json);
    CHECK(served["job"] == printed["job"]);
    CHECK(served["events"] == printed["events"]);
    CHECK(get(serve.url("/job/999999")).status == 404);
    CHECK(get(serve.url("/job/" + key + "x")).status == 404);

    // The hostile job's page: its name and log line are text, never markup.
    const Fetched hostile = get(serve.url(
        "/job/" + job_key(first.body, "&lt;script&gt;alert(1)&lt;/script&gt;&quot;lora")));
    CHECK(hostile.status == 200);
    CHECK(hostile.body.find("<script") == std::string::npos);
    CHECK(hostile.body.find("<img") == std::string::npos);
    CHECK(hostile.body.find("&lt;img src=x onerror=alert(2)&gt;") != std::string::npos);

    // /fleet: one bar part per day and phase, counting the events of the window.
    const Fetched fleet = get(serve.url("/fleet"));
    CHECK(fleet.status == 200);
    const std::regex bar(
        R"re(class="bar" data-day="([0-9-]+)" data-key="([^"]+)" data-count="(\d+)")re");
    std::map<std::string, int> by_phase;
    for (auto it = std::sregex_iterator(fleet.body.begin(), fleet.body.end(), bar);
         it != std::sregex_iterator(); ++it) {
      by_phase[(*it)[2]] += std::stoi((*it)[3]);
    }
    // Two charts (phase, family); old_sdxl's OOM is 40 days old, outside the 30 shown.
    CHECK(by_phase["sampling"] == 2);
    CHECK(by_phase["train_step"] == 1);
    CHECK(by_phase["flux.1"] == 3);
    CHECK(fleet.body.find("this node") != std::string::npos);

    CHECK(get(serve.url("/nowhere")).status == 404);
    CHECK(get(serve.url(), "-X POST").status == 405);
    CHECK(serve.stop() == 0);
  }

  TEST_CASE("serve in Chromium: links and filters work without script, dark mode is dark") {
    if (std::system("command -v chromium >/dev/null 2>&1") != 0) {
      OOMTRIAGE_SKIP("Chromium is not installed (Debian: chromium)");
    }
    TempDir dir;
    const fs::path state = dir.path / "state";
    fill_store(state);
    ServeProcess serve({"--state-dir", state.string(), "serve", "--listen", "127.0.0.1:0"},
                       dir.path / "serve.err");
    REQUIRE(serve.port() != 0);
    // The filter form as a browser submits it (GET, every field), then the job and its fix.
    const std::string dom = dumped_dom(
        serve.url("/?outcome=crashed_oom&phase=train_step&host=&trainer=&family=&since=&q="),
        dir.path);
    REQUIRE(!dom.empty());
    CHECK(count(dom, "<a class=\"job\"") == 2);
    CHECK(dom.find(">flux_step</a>") != std::string::npos);
    const std::string key = job_key(dom, "flux_step");
    const std::string job = dumped_dom(serve.url("/job/" + key), dir.path);
    CHECK(job.find("Cheaper previews") != std::string::npos);
    // Nothing ran: the hostile name is text in the DOM too.
    const std::string all = dumped_dom(serve.url("/?outcome=crashed_oom"), dir.path);
    CHECK(all.find("&lt;script&gt;alert(1)&lt;/script&gt;") != std::string::npos);

    const auto light = screenshot(serve.url("/fleet"), dir.path, 1000, 900);
    const auto dark = screenshot(serve.url("/fleet"), dir.path, 1000, 900, true);
    REQUIRE(light);
    REQUIRE(dark);
    CHECK(light->at(5, 5).near(Rgb::hex("#ffffff")));
    CHECK(dark->at(5, 5).near(Rgb::hex("#14161b")));
    // The phase chart's bars are drawn: the sampling colour is on the screen.
    bool sampling_bar = false;
    for (int y = 0; y < light->height && !sampling_bar; ++y) {
      for (int x = 0; x < light->width && !sampling_bar; ++x) {
        sampling_bar = light->at(x, y).near(Rgb::hex("#f58518"), 3);
      }
    }
    CHECK(sampling_bar);
  }

  TEST_CASE("serve: loopback unless an access file says who may read - tokens and users") {
    TempDir dir;
    const fs::path state = dir.path / "state";
    fill_store(state);
    {
      ServeProcess open_to_all({"--state-dir", state.string(), "serve", "--listen", "0.0.0.0:0"},
                               dir.path / "open.err");
      CHECK(open_to_all.exit_code() == 1);
      CHECK(open_to_all.stderr_text().find("--access-file") != std::string::npos);
    }
    const fs::path access = dir.path / "access";
    const auto [rc, hash] = run_shell("openssl passwd -6 -salt s4ltS4lt 'hunter22'");
    REQUIRE(rc == 0);
    std::ofstream(access) << "# who may read\ntoken 0123456789abcdef0123\nalice:" << hash;
    fs::permissions(access, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    {
      ServeProcess loose({"--state-dir", state.string(), "serve", "--listen", "127.0.0.1:0",
                          "--access-file", access.string()},
                         dir.path / "loose.err");
      CHECK(loose.exit_code() == 1);
      INFO(loose.stderr_text());
      CHECK(loose.stderr_text().find("mode 0444") != std::string::npos);
    }
    fs::permissions(access, fs::perms::owner_read | fs::perms::owner_write);
    ServeProcess serve({"--state-dir", state.string(), "serve", "--listen", "127.0.0.1:0",
                        "--access-file", access.string()},
                       dir.path / "serve.err");
    INFO("serve's stderr: " << serve.stderr_text());
    REQUIRE(serve.port() != 0);
    const Fetched refused = get(serve.url());
    CHECK(refused.status == 401);
    CHECK(refused.headers.find("WWW-Authenticate: Basic realm=\"oomtriage\"") != std::string::npos);
    CHECK(refused.body.find("flux_step") == std::string::npos);
    CHECK(get(serve.url("/fleet")).status == 401);
    CHECK(get(serve.url("/job/1.json")).status == 401);
    CHECK(get(serve.url(), "-H 'Authorization: Bearer 0123456789abcdef0123'").status == 200);
    CHECK(get(serve.url(), "-H 'Authorization: Bearer 0123456789abcdef0124'").status == 401);
    CHECK(get(serve.url(), "-u alice:hunter22").status == 200);
    CHECK(get(serve.url(), "-u alice:hunter22").status == 200);  // the cached check
    CHECK(get(serve.url(), "-u alice:hunter23").status == 401);
    CHECK(get(serve.url(), "-u alice:hunter23").status == 401);  // the refusal remembered
    CHECK(get(serve.url(), "-u bob:hunter22").status == 401);
  }

  TEST_CASE("serve never writes the SQLite store, and slow or silent clients do not hold it") {
    TempDir dir;
    const fs::path state = dir.path / "state";
    const fs::path db = fill_store(state);
    const auto [rc_before, before] =
        run_shell("cd '" + state.string() + "' && sha256sum oomtriage.db");
    ServeProcess serve({"--state-dir", state.string(), "serve", "--listen", "127.0.0.1:0",
                        "--max-connections", "8", "--max-per-address", "6", "--header-timeout", "1",
                        "--client-timeout", "2", "--threads", "2"},
                       dir.path / "serve.err");
    REQUIRE(serve.port() != 0);
    // Clients that connect and send half a request line, then nothing: six from 127.0.0.1 (its
    // limit), two from 127.0.0.2. The server's eight slots are full.
    std::vector<int> silent;
    for (int i = 0; i < 8; ++i) {
      const int fd = connect_from(i < 6 ? "127.0.0.1" : "127.0.0.2", serve.port());
      REQUIRE(fd >= 0);
      REQUIRE(::send(fd, "GET / HT", 8, 0) == 8);
      silent.push_back(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const auto opened = std::chrono::steady_clock::now();
    // 127.0.0.1 is at its limit: its next connection hears 503 at once, holding nothing.
    const Fetched full = get(serve.url("/healthz"));
    CHECK(full.status == 503);
    CHECK(full.headers.find("Retry-After: 5") != std::string::npos);
    // Another address is let in: the silent client that waited longest is closed for it.
    const Answer other = ask("127.0.0.3", serve.port(), get_request("/healthz"));
    CHECK(other.status == 200);
    CHECK(other.body == "ok\n");
    timeval wait{3, 0};
    char byte;
    ::setsockopt(silent[0], SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
    CHECK(::recv(silent[0], &byte, 1, 0) == 0);
    // Within --header-timeout the silent ones are cut off, and the server answers again.
    for (const int fd : silent) {
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
      CHECK(::recv(fd, &byte, 1, 0) == 0);
      ::close(fd);
    }
    const double cut_after =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - opened).count();
    MESSAGE("silent clients cut off after " << cut_after << " s (--header-timeout 1)");
    CHECK(cut_after < 3.0);
    CHECK(wait_until([&] { return get(serve.url()).status == 200; }, std::chrono::seconds(3)));
    // An oversized request is refused (431), and the server goes on.
    const std::string huge(20000, 'a');
    CHECK(get(serve.url(), "-H 'X-Big: " + huge + "'").status == 431);
    CHECK(get(serve.url()).status == 200);
    for (const char* path : {"/", "/fleet", "/job/1", "/job/1.json", "/?outcome=completed"})
      CHECK(get(serve.url(path)).status == 200);
    CHECK(serve.stop() == 0);
    // The database is as it was; SQLite's read-only WAL reader may leave an empty -wal and its
    // -shm index beside it, nothing more.
    const auto [rc_after, after] =
        run_shell("cd '" + state.string() + "' && sha256sum oomtriage.db");
    CHECK(before == after);
    CHECK((!fs::exists(state / "oomtriage.db-wal") ||
           fs::file_size(state / "oomtriage.db-wal") == 0));
    // What serve reads through refuses to write.
    auto reader = db::Store::open_read_only(db.string());
    REQUIRE(reader);
    CHECK_FALSE((*reader)->upsert_job("new", "/out/new", "kohya", "/out", 1));
    CHECK_FALSE((*reader)->set_meta("k", "v"));
  }

  TEST_CASE("serve under hostile peers: 200 half-open connections and password guessers") {
    raise_descriptor_limit();
    TempDir dir;
    const fs::path state = dir.path / "state";
    fill_store(state);
    // A bcrypt user at the cost htpasswd -B uses (tens of milliseconds a check) and a token.
    const fs::path access = write_access_file(dir, 10);
    // serve's defaults: 128 connections, 16 an address, 5 s for a request's head.
    ServeProcess serve({"--state-dir", state.string(), "serve", "--listen", "127.0.0.1:0",
                        "--access-file", access.string()},
                       dir.path / "serve.err");
    INFO("serve's stderr: " << serve.stderr_text());
    REQUIRE(serve.port() != 0);
    const unsigned short port = serve.port();
    const std::string token = "Bearer 0123456789abcdef0123";
    const std::string alice = basic("alice:right-password");
    // Alice signs in once before the attack: her header is remembered, no crypt after.
    REQUIRE(ask("127.0.0.1", port, get_request("/healthz", alice)).status == 200);

    // 200 half-open peers: first from 4 addresses (50 each, past the 16 an address may hold),
    // then from 50 (4 each, all within it, more than the 128 slots together), with 8 guessers.
    for (const int addresses : {4, 50}) {
      CAPTURE(addresses);
      HalfOpenPeers peers(port, 200, addresses);
      Guessers guessers(port, 8);
      CHECK(wait_until([&] { return peers.most_holding() >= 150; }, std::chrono::seconds(10)));
      const Served served = legitimate_client(port, 100, {token, alice});
      // Each guesser gets 5 tries, then waits, longer at each failure (one crypt at a time, a
      // bcrypt of cost 10 each: it takes some seconds before they are all waiting).
      CHECK(wait_until([&] { return guessers.statuses().count(429) == 1; },
                       std::chrono::seconds(60)));
      const auto statuses = guessers.statuses();
      guessers.stop();
      peers.stop();
      std::string told;
      for (const auto& [status, n] : served.statuses) told += fmt::format(" {}x{}", n, status);
      std::string guessed;
      for (const auto& [status, n] : statuses) guessed += fmt::format(" {}x{}", n, status);
      MESSAGE(addresses << " addresses: " << served.ok << "/" << served.asked
                        << " answered 200 within 1 s, p99 " << served.p99_ms << " ms;" << told
                        << "; half-open peers dropped " << peers.dropped() << " (503 "
                        << peers.told_503() << "); guessers:" << guessed);
      CHECK(served.ok >= 95);
      CHECK(peers.dropped() > 0);
      if (addresses == 4) CHECK(peers.told_503() > 0);  // past their address's 16
      CHECK(statuses.count(200) == 0);
      // What their guesses cost the server: a crypt for each 401, 6 an address and then one
      // per wait (1, 2, 4, ... 32 s in the minute this may take) at most.
      CHECK(statuses.count(401) == 1);
      CHECK(statuses.at(401) <= 8 * 14);
      CHECK(guessers.retry_after() != "");
    }
  }

  TEST_CASE("serve: a guesser backs off with 429 while a valid token and a known user get in") {
    TempDir dir;
    const fs::path state = dir.path / "state";
    fill_store(state);
    const fs::path access = write_access_file(dir, 8);
    ServeProcess serve({"--state-dir", state.string(), "serve", "--listen", "127.0.0.1:0",
                        "--access-file", access.string()},
                       dir.path / "serve.err");
    INFO("serve's stderr: " << serve.stderr_text());
    REQUIRE(serve.port() != 0);
    const unsigned short port = serve.port();
    const std::string token = "Bearer 0123456789abcdef0123";
    const std::string alice = basic("alice:right-password");
    REQUIRE(ask("127.0.0.9", port, get_request("/healthz", alice)).status == 200);
    // Five wrong passwords are 401, as a typo is; the next ones wait.
    for (int i = 0; i < 5; ++i) {
      CHECK(
          ask("127.0.0.9", port, get_request("/", basic(fmt::format("alice:wrong{}", i)))).status ==
          401);
    }
    CHECK(ask("127.0.0.9", port, get_request("/", basic("alice:wrong5"))).status == 401);
    const Answer waiting = ask("127.0.0.9", port, get_request("/", basic("alice:wrong6")));
    CHECK(waiting.status == 429);
    CHECK(waiting.head.find("Retry-After: 1") != std::string::npos);
    // The right password is told to wait too (it would need crypt) unless it passed before...
    CHECK(ask("127.0.0.9", port, get_request("/", basic("bob:right-password"))).status == 429);
    CHECK(ask("127.0.0.9", port, get_request("/healthz", alice)).status == 200);
    // ...and a token is checked all the same (cheap): another user behind the same address.
    const auto start = std::chrono::steady_clock::now();
    CHECK(ask("127.0.0.9", port, get_request("/healthz", token)).status == 200);
    CHECK(ask("127.0.0.1", port, get_request("/healthz", token)).status == 200);
    CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
    // Another address is not held to this one's failures.
    CHECK(ask("127.0.0.10", port, get_request("/", basic("alice:wrong7"))).status == 401);
    // After the wait one more guess is checked; it fails, and the wait doubles.
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    CHECK(ask("127.0.0.9", port, get_request("/", basic("alice:wrong8"))).status == 401);
    const Answer longer = ask("127.0.0.9", port, get_request("/", basic("alice:wrong9")));
    CHECK(longer.status == 429);
    CHECK(longer.head.find("Retry-After: 2") != std::string::npos);
  }

  TEST_CASE(
      "serve: a POST gets its 405 written whole, its body read off or the connection closed") {
    TempDir dir;
    const fs::path state = dir.path / "state";
    fill_store(state);
    ServeProcess serve({"--state-dir", state.string(), "serve", "--listen", "127.0.0.1:0"},
                       dir.path / "serve.err");
    INFO("serve's stderr: " << serve.stderr_text());
    REQUIRE(serve.port() != 0);
    const auto connection = [&] { return connect_from("127.0.0.1", serve.port()); };
    const auto send_all = [](int fd, const std::string& text) {
      for (size_t sent = 0; sent < text.size();) {
        const ssize_t n = ::send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) return false;
        sent += static_cast<size_t>(n);
      }
      return true;
    };
    const auto healthz = get_request("/healthz");
    {
      // A small body is read off: 405, and the connection goes on.
      const int fd = connection();
      REQUIRE(
          send_all(fd, "POST / HTTP/1.1\r\nHost: serve\r\nContent-Length: 10\r\n\r\n0123456789"));
      const Answer refused = read_answer(fd, std::chrono::milliseconds(5000));
      CHECK(refused.status == 405);
      CHECK(refused.whole);
      CHECK(refused.head.find("Allow: GET, HEAD") != std::string::npos);
      CHECK(refused.body == "oomtriage serve is read-only: GET and HEAD only\n");
      REQUIRE(send_all(fd, healthz));
      CHECK(read_answer(fd, std::chrono::milliseconds(5000)).status == 200);
      ::close(fd);
    }
    {
      // A chunked one too.
      const int fd = connection();
      REQUIRE(send_all(fd,
                       "PUT /job/1 HTTP/1.1\r\nHost: serve\r\nTransfer-Encoding: chunked\r\n\r\n"
                       "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"));
      const Answer refused = read_answer(fd, std::chrono::milliseconds(5000));
      CHECK(refused.status == 405);
      CHECK(refused.whole);
      REQUIRE(send_all(fd, healthz));
      CHECK(read_answer(fd, std::chrono::milliseconds(5000)).status == 200);
      ::close(fd);
    }
    {
      // A body of 1 MiB is not read: 405 written whole, and the connection closed after it.
      const int fd = connection();
      const std::string body(1 << 20, 'x');
      REQUIRE(send_all(fd, "POST / HTTP/1.1\r\nHost: serve\r\nContent-Length: " +
                               std::to_string(body.size()) + "\r\n\r\n" + body));
      const Answer refused = read_answer(fd, std::chrono::milliseconds(5000));
      CHECK(refused.status == 405);
      CHECK(refused.whole);
      CHECK(refused.head.find("Connection: close") != std::string::npos);
      CHECK(read_answer(fd, std::chrono::milliseconds(5000)).closed);
      ::close(fd);
    }
    {
      // Nor is a chunked one past 64 KiB, nor one whose sender waits for 100-continue.
      const int fd = connection();
      std::string request = "POST / HTTP/1.1\r\nHost: serve\r\nTransfer-Encoding: chunked\r\n\r\n";
      for (int i = 0; i < 40; ++i) request += "1000\r\n" + std::string(4096, 'y') + "\r\n";
      request += "0\r\n\r\n";
      REQUIRE(send_all(fd, request));
      const Answer refused = read_answer(fd, std::chrono::milliseconds(5000));
      CHECK(refused.status == 405);
      CHECK(refused.whole);
      ::close(fd);
      const Answer expecting =
          ask("127.0.0.1", serve.port(),
              "POST / HTTP/1.1\r\nHost: serve\r\nExpect: 100-continue\r\nContent-Length: "
              "1000000\r\n\r\n");
      CHECK(expecting.status == 405);
      CHECK(expecting.whole);
    }
    // A GET that carries a small body is served; one that carries a large one is 413.
    CHECK(ask("127.0.0.1", serve.port(),
              "GET /healthz HTTP/1.1\r\nHost: serve\r\nContent-Length: 3\r\n\r\nabc")
              .status == 200);
    CHECK(ask("127.0.0.1", serve.port(),
              "GET /healthz HTTP/1.1\r\nHost: serve\r\nContent-Length: 1000000\r\n\r\n")
              .status == 413);
    CHECK(get(serve.url("/healthz")).status == 200);
  }

  TEST_CASE("serve over the fleet store: a role that can write is refused, a read-only one reads") {
    PostgresCluster pg;
    if (!pg.ok()) OOMTRIAGE_SKIP(pg.error());
    TempDir dir;
    const fs::path state = dir.path / "state";
    fill_store(state);
    {
      // The node ships its store as its daemon would.
      auto node = db::Store::open((state / "oomtriage.db").string());
      REQUIRE(node);
      REQUIRE((*node)->set_fleet_outbox(pg.url()));
      auto fleet = db::FleetStore::open(pg.url());
      REQUIRE(fleet);
      const std::string id = *(*node)->store_id();
      for (;;) {
        auto batch = (*node)->fleet_batch(500);
        REQUIRE(batch);
        if (batch->empty()) break;
        REQUIRE((*fleet)->ship(*batch, id, "gpu-node-07"));
        REQUIRE((*node)->fleet_shipped(batch->last_seq));
      }
    }
    {
      ServeProcess owner({"--store", pg.url(), "serve", "--listen", "127.0.0.1:0"},
                         dir.path / "owner.err");
      CHECK(owner.exit_code() == 1);
      CHECK(owner.stderr_text().find("can write (role oomtriage is a superuser)") !=
            std::string::npos);
    }
    {
      ServeProcess allowed(
          {"--store", pg.url(), "serve", "--listen", "127.0.0.1:0", "--allow-writer-role"},
          dir.path / "allowed.err");
      REQUIRE(allowed.port() != 0);
      CHECK(allowed.stderr_text().find("WARNING: role oomtriage is a superuser") !=
            std::string::npos);
    }
    // The read-only role docs/serve.md makes.
    pg.query(
        "CREATE ROLE oomtriage_reader LOGIN PASSWORD 'reader-secret'; GRANT USAGE ON SCHEMA "
        "oomtriage TO oomtriage_reader; GRANT SELECT ON ALL TABLES IN SCHEMA oomtriage TO "
        "oomtriage_reader;");
    const fs::path passfile = dir.path / "reader.pgpass";
    std::ofstream(passfile) << "*:*:*:oomtriage_reader:reader-secret\n";
    fs::permissions(passfile, fs::perms::owner_read | fs::perms::owner_write);
    std::string url = pg.url();
    url.replace(url.find("oomtriage@"), 10, "oomtriage_reader@");
    url.replace(url.find("passfile=") + 9, std::string::npos, passfile.string());
    ServeProcess serve({"--store", url, "serve", "--listen", "127.0.0.1:0"},
                       dir.path / "serve.err");
    INFO("serve's stderr: " << serve.stderr_text());
    REQUIRE(serve.port() != 0);
    const Fetched list = get(serve.url("/?outcome=crashed_oom&host=gpu-node-07"));
    CHECK(count(list.body, "<a class=\"job\"") == 4);
    CHECK(list.body.find("<td data-label=\"host\">gpu-node-07</td>") != std::string::npos);
    CHECK(count(get(serve.url("/?host=gpu-node-08")).body, "<a class=\"job\"") == 0);
    // The fleet store's jobs by any of their family's names, with the family shown.
    CHECK(count(get(serve.url("/?family=flux1-dev&trainer=aitk")).body, "<a class=\"job\"") == 4);
    CHECK(list.body.find("ai-toolkit · FLUX.1") != std::string::npos);
    const std::string key = job_key(list.body, "flux_step");
    REQUIRE(key.size() > 37);
    const Fetched page = get(serve.url("/job/" + key));
    CHECK(page.status == 200);
    CHECK(page.body.find("host gpu-node-07") != std::string::npos);
    const Fetched fleet = get(serve.url("/fleet"));
    CHECK(fleet.body.find("<td>gpu-node-07</td>") != std::string::npos);
    CHECK(fleet.body.find("data-key=\"train_step\" data-count=\"1\"") != std::string::npos);

    // `serve --host` shows that node only, whatever the URL asks.
    ServeProcess other(
        {"--store", url, "serve", "--listen", "127.0.0.1:0", "--host", "gpu-node-08"},
        dir.path / "other.err");
    REQUIRE(other.port() != 0);
    CHECK(count(get(other.url("/?host=gpu-node-07")).body, "<a class=\"job\"") == 0);
    CHECK(count(get(other.url("/")).body, "<a class=\"job\"") == 0);
    CHECK(get(other.url("/job/" + key)).status == 404);
    CHECK(get(other.url("/job/------------------------------------.1")).status == 404);
  }
}
