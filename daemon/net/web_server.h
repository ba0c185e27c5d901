// daemon/net/web_server.h
//
// A small HTTP/1.1 server for `oomtriage serve` on its own Asio threads: GET and HEAD only,
// keep-alive, and bounds on everything a client controls, so that no peer can hold it:
//
// - A request's line and headers must arrive within `header_timeout` (from the accept, or from
//   the first byte of a kept-alive connection's next request), the whole request within
//   `request_timeout`; an idle kept-alive connection is closed after `idle_timeout`. A head past
//   `max_request_bytes` is answered 431 and closed.
// - One address (an IPv6 one by its /64) holds at most `max_per_address` connections; past that
//   a new one is answered 503 and closed at the accept, before it holds a slot.
// - Past `max_connections` the connection that has waited longest without a request being
//   answered (a peer that sent no head yet, or an idle kept-alive one) is closed to make room,
//   as nginx reuses its idle connections; only when every slot is answering a request is the
//   new client answered 503 at once.
// - A request with a body (a POST) gets its 405: a body of up to `max_discarded_body` is read
//   off and the connection kept; a longer one (or one that waits for 100-continue) is answered
//   and the connection closed, read off for up to `linger_timeout` first so that the client
//   reads the answer rather than a reset.
//
// The handler runs on a server thread and may block (a store query): `threads` of them serve at
// once.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "parsers/result.h"

namespace oomtriage::daemon {

struct WebRequest {
  std::string method;  // GET or HEAD
  std::string target;  // "/job/12?x=1", as sent
  std::string authorization;
  std::string peer;        // the client's address
  std::string peer_group;  // what the per-address limits count by: the IPv4 address, IPv6 /64
};

struct WebResponse {
  int status = 200;
  std::string content_type = "text/html; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

struct WebServerLimits {
  unsigned threads = 4;
  size_t max_connections = 128;
  size_t max_per_address = 16;  // 0: no limit
  size_t max_request_bytes = 16 * 1024;
  size_t max_discarded_body = 64 * 1024;
  std::chrono::milliseconds header_timeout{5000};
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds idle_timeout{30000};
  std::chrono::milliseconds linger_timeout{2000};
};

// The group an address's connections and failed logins are counted in: an IPv4 address as
// itself (an IPv4-mapped IPv6 one too), an IPv6 address by its /64 ("2001:db8:1:2::/64").
std::string address_group(const std::string& address);

// "127.0.0.1:9840", "[::1]:9840", ":9840" (every interface) as an address and port; the
// address is "0.0.0.0" for ":9840".
struct ListenAddress {
  std::string host;
  unsigned short port = 0;
  bool loopback = false;
};
Result<ListenAddress> parse_listen_address(const std::string& address);

// A target's path and parameters decoded ('+' is a space; a parameter given twice keeps its last
// value; a broken escape is kept as written).
struct Target {
  std::string path;
  std::map<std::string, std::string> query;
};
Target parse_target(std::string_view target);

class WebServer {
 public:
  using Handler = std::function<WebResponse(const WebRequest&)>;
  // `headers` go on every response (the security headers).
  WebServer(Handler handler, WebServerLimits limits,
            std::vector<std::pair<std::string, std::string>> headers = {});
  ~WebServer();
  WebServer(const WebServer&) = delete;
  WebServer& operator=(const WebServer&) = delete;

  Result<Ok> listen(const std::string& address);
  unsigned short port() const;
  // Serves until stop() (from a signal or another thread).
  void run();
  void stop();
  size_t open_connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace oomtriage::daemon
