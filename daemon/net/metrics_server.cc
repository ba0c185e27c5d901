// daemon/net/metrics_server.cc: accept -> read one request -> answer -> close, all asynchronous.
#include "daemon/net/metrics_server.h"

#include "daemon/net/web_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace oomtriage::daemon {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::function<std::string()>& render)
      : stream_(std::move(socket)), render_(render) {}

  void start() {
    stream_.expires_after(std::chrono::seconds(10));
    parser_.body_limit(4096);
    http::async_read(stream_, buffer_, parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (!ec) self->answer();
                     });
  }

 private:
  void answer() {
    const auto& req = parser_.get();
    res_.version(req.version());
    res_.keep_alive(false);
    const std::string target(req.target());
    if (req.method() == http::verb::get &&
        (target == "/metrics" || target.rfind("/metrics?", 0) == 0)) {
      res_.result(http::status::ok);
      res_.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      res_.body() = render_();
    } else {
      res_.result(http::status::not_found);
      res_.set(http::field::content_type, "text/plain");
      res_.body() = "oomtriage serves /metrics only\n";
    }
    res_.prepare_payload();
    http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code, size_t) {
      beast::error_code ignored;
      self->stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    });
  }

  beast::tcp_stream stream_;
  std::function<std::string()>& render_;
  beast::flat_buffer buffer_;
  http::request_parser<http::empty_body> parser_;
  http::response<http::string_body> res_;
};

}  // namespace

struct MetricsServer::Impl {
  Impl(asio::io_context& io, std::function<std::string()> r) : acceptor(io), render(std::move(r)) {}
  void accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) std::make_shared<Connection>(std::move(socket), render)->start();
      accept();
    });
  }
  tcp::acceptor acceptor;
  std::function<std::string()> render;
};

MetricsServer::MetricsServer(asio::io_context& io, std::function<std::string()> render)
    : impl_(std::make_unique<Impl>(io, std::move(render))) {}

MetricsServer::~MetricsServer() = default;

Result<Ok> MetricsServer::listen(const std::string& address) {
  auto where = parse_listen_address(address);
  if (!where) return make_error(where.error().code, "metrics " + where.error().message);
  const tcp::endpoint endpoint(asio::ip::make_address(where->host), where->port);
  beast::error_code ec;
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return make_error(ErrorCode::kIo, "metrics listen " + address + ": " + ec.message());
  }
  impl_->accept();
  return Ok{};
}

unsigned short MetricsServer::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

}  // namespace oomtriage::daemon
