// daemon/net/web_server.h
//
// A small HTTP/1.1 server for `oomtriage serve` on its own Asio threads: GET and HEAD only,
// keep-alive, and bounds on everything a client controls. A request must arrive whole within
// `request_timeout` (a slow or half-open client is dropped, not waited for); an idle kept-alive
// connection is closed after `idle_timeout`; a request line and headers past `max_request_bytes`
// are refused; past `max_connections` a new client gets 503 and is closed at once. The handler
// runs on a server thread and may block (a store query): `threads` of them serve at once.
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
  std::string peer;  // the client's address
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
  size_t max_request_bytes = 16 * 1024;
  std::chrono::milliseconds request_timeout{10000};
  std::chrono::milliseconds idle_timeout{30000};
};

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
