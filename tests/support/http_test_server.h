// tests/support/http_test_server.h
//
// A real HTTP(S) server on loopback for the alert tests (Boost.Beast, one thread, one
// connection at a time). Each request is recorded; a script decides the answer: a status, a
// Retry-After, a delay, or no answer at all (to test timeouts).
#pragma once

#include <utility>
#include <boost/asio/ssl/context.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace oomtriage::testing {

struct ReceivedRequest {
  std::string target;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::chrono::steady_clock::time_point at;
};

struct ScriptedResponse {
  int status = 200;
  std::string body = "ok";
  std::string retry_after;
  std::string location;  // a Location header (redirects)
  std::chrono::milliseconds delay{0};
  bool hang = false;  // read the request, never answer
};

class HttpTestServer {
 public:
  using Script = std::function<ScriptedResponse(const ReceivedRequest&, size_t index)>;

  // Listens on 127.0.0.1:`port` (0: any free port). With `tls`, serves HTTPS.
  HttpTestServer(Script script, unsigned short port = 0,
                 std::shared_ptr<boost::asio::ssl::context> tls = nullptr);
  ~HttpTestServer();

  unsigned short port() const { return port_; }
  std::string url(const std::string& path = "/hook") const;
  std::vector<ReceivedRequest> requests() const;
  size_t count() const;

 private:
  void run();

  struct Impl;
  std::unique_ptr<Impl> impl_;
  Script script_;
  unsigned short port_ = 0;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  mutable std::mutex mutex_;
  std::vector<ReceivedRequest> requests_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// A port that was free a moment ago (bound and closed), for "the receiver is down" tests.
unsigned short free_port();

}  // namespace oomtriage::testing
