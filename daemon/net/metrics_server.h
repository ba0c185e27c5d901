// daemon/net/metrics_server.h
//
// Serves GET /metrics (Prometheus text format) on the daemon's Asio loop. One request per
// connection, bounded request size, nothing else is served. Binds where the config says
// (127.0.0.1:9839 in the example config): exposing it beyond loopback is an explicit choice.
#pragma once

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/io_context.hpp>

#include <functional>
#include <memory>
#include <string>

#include "parsers/result.h"

namespace oomtriage::daemon {

class MetricsServer {
 public:
  // `render` produces the body at each scrape.
  MetricsServer(boost::asio::io_context& io, std::function<std::string()> render);
  ~MetricsServer();
  // "127.0.0.1:9839", "[::1]:9839", ":9839" (all interfaces).
  Result<Ok> listen(const std::string& address);
  unsigned short port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace oomtriage::daemon
