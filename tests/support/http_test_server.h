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

// A loopback port held for a server that is not there yet: bound but not listening, so a client
// is refused (the receiver is down) and no other process can take the port meanwhile. The server
// that comes up takes the socket over: no second bind, no race with tests running beside it.
class ReservedPort {
 public:
  ReservedPort();
  ReservedPort(ReservedPort&& other) noexcept
      : fd_(std::exchange(other.fd_, -1)), port_(other.port_) {}
  ReservedPort& operator=(ReservedPort&&) = delete;
  ~ReservedPort();

  unsigned short port() const { return port_; }
  // The bound descriptor, for the server that listens on it.
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_ = -1;
  unsigned short port_ = 0;
};

class HttpTestServer {
 public:
  using Script = std::function<ScriptedResponse(const ReceivedRequest&, size_t index)>;

  // Listens on any free loopback port, or on the one `reserved` holds. With `tls`, serves HTTPS.
  explicit HttpTestServer(Script script, std::shared_ptr<boost::asio::ssl::context> tls = nullptr);
  HttpTestServer(Script script, ReservedPort reserved,
                 std::shared_ptr<boost::asio::ssl::context> tls = nullptr);
  ~HttpTestServer();

  // While down, each connection is reset before a byte is read: the receiver is unreachable
  // and its port stays this server's.
  void set_down(bool down) { down_ = down; }

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
  std::atomic<bool> down_{false};
  std::thread thread_;
};

}  // namespace oomtriage::testing
