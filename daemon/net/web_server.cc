// daemon/net/web_server.cc: accept -> (read a request -> answer)* -> close, all asynchronous on
// a pool of threads; each connection's steps run in order on its own strand.
#include "daemon/net/web_server.h"

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <thread>

namespace oomtriage::daemon {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct Shared {
  WebServer::Handler handler;
  WebServerLimits limits;
  std::vector<std::pair<std::string, std::string>> headers;
  std::atomic<size_t> connections{0};
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, Shared& shared) : stream_(std::move(socket)), shared_(shared) {
    ++shared_.connections;
    beast::error_code ec;
    const auto remote = stream_.socket().remote_endpoint(ec);
    if (!ec) peer_ = remote.address().to_string();
  }
  ~Connection() { --shared_.connections; }

  void start(bool refuse) {
    if (refuse) {
      // Too many clients: told so at once, never queued.
      res_.version(11);
      res_.result(http::status::service_unavailable);
      res_.set(http::field::content_type, "text/plain; charset=utf-8");
      res_.set(http::field::retry_after, "5");
      res_.body() = "oomtriage serve: too many connections, try again shortly\n";
      res_.keep_alive(false);
      res_.prepare_payload();
      write();
      return;
    }
    read(shared_.limits.request_timeout);
  }

 private:
  void read(std::chrono::milliseconds timeout) {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(shared_.limits.max_request_bytes));
    parser_->body_limit(0);
    // One deadline for the whole request: a client that trickles a byte a second is still cut
    // off (Beast re-arms nothing per byte).
    stream_.expires_after(timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->close();
                       self->answer();
                     });
  }

  void answer() {
    const auto& req = parser_->get();
    res_ = {};
    res_.version(req.version());
    res_.keep_alive(req.keep_alive());
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      res_.result(http::status::method_not_allowed);
      res_.set(http::field::allow, "GET, HEAD");
      res_.set(http::field::content_type, "text/plain; charset=utf-8");
      res_.body() = "oomtriage serve is read-only: GET and HEAD only\n";
    } else {
      WebRequest request;
      request.method = std::string(req.method_string());
      request.target = std::string(req.target());
      request.authorization = std::string(req[http::field::authorization]);
      request.peer = peer_;
      WebResponse response;
      try {
        response = shared_.handler(request);
      } catch (const std::exception& e) {
        // The handler reports through Result; this keeps one bug from ending the server.
        response = {500,
                    "text/plain; charset=utf-8",
                    std::string("oomtriage serve: internal error: ") + e.what() + "\n",
                    {}};
      }
      res_.result(static_cast<http::status>(response.status));
      res_.set(http::field::content_type, response.content_type);
      for (const auto& [name, value] : response.headers) res_.set(name, value);
      res_.body() = std::move(response.body);
    }
    for (const auto& [name, value] : shared_.headers) res_.set(name, value);
    res_.prepare_payload();
    if (req.method() == http::verb::head) res_.body().clear();
    write();
  }

  void write() {
    stream_.expires_after(shared_.limits.request_timeout);
    http::async_write(stream_, res_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec || !self->res_.keep_alive()) return self->close();
      self->read(self->shared_.limits.idle_timeout);
    });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  Shared& shared_;
  std::string peer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::empty_body>> parser_;
  http::response<http::string_body> res_;
};

}  // namespace

namespace {

std::string url_decode(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '+') {
      out += ' ';
    } else if (text[i] == '%' && i + 2 < text.size() &&
               std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
               std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(text.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

}  // namespace

Target parse_target(std::string_view target) {
  Target out;
  const size_t question = target.find('?');
  out.path = url_decode(target.substr(0, question));
  if (question == std::string_view::npos) return out;
  std::string_view rest = target.substr(question + 1);
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    const size_t eq = pair.find('=');
    if (!pair.empty()) {
      out.query[url_decode(pair.substr(0, eq))] =
          eq == std::string_view::npos ? "" : url_decode(pair.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    rest.remove_prefix(amp + 1);
  }
  return out;
}

Result<ListenAddress> parse_listen_address(const std::string& address) {
  std::string host = "0.0.0.0";
  std::string port = address;
  if (const size_t colon = address.rfind(':'); colon != std::string::npos) {
    host = address.substr(0, colon);
    port = address.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
    if (host.empty()) host = "0.0.0.0";
  }
  beast::error_code ec;
  const auto ip = asio::ip::make_address(host, ec);
  if (ec) return make_error(ErrorCode::kBadInput, "listen " + address + ": not an IP address");
  char* end = nullptr;
  const long number = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || number < 0 || number > 65535) {
    return make_error(ErrorCode::kBadInput, "listen " + address + ": bad port");
  }
  return ListenAddress{ip.to_string(), static_cast<unsigned short>(number), ip.is_loopback()};
}

struct WebServer::Impl {
  Impl(Handler handler, WebServerLimits limits,
       std::vector<std::pair<std::string, std::string>> headers)
      : io(static_cast<int>(std::max(1u, limits.threads))),
        acceptor(asio::make_strand(io)),
        retry(io) {
    shared.handler = std::move(handler);
    shared.limits = limits;
    shared.headers = std::move(headers);
  }
  void accept() {
    acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (ec) {
        // Out of descriptors (EMFILE) and the like: try again shortly, not in a busy loop.
        retry.expires_after(std::chrono::milliseconds(100));
        retry.async_wait([this](beast::error_code wait) {
          if (!wait) accept();
        });
        return;
      }
      const bool refuse = shared.connections.load() >= shared.limits.max_connections;
      std::make_shared<Connection>(std::move(socket), shared)->start(refuse);
      accept();
    });
  }
  // Destroyed last: the connections the io_context still holds when it goes use it.
  Shared shared;
  asio::io_context io;
  tcp::acceptor acceptor;
  asio::steady_timer retry;
};

WebServer::WebServer(Handler handler, WebServerLimits limits,
                     std::vector<std::pair<std::string, std::string>> headers)
    : impl_(std::make_unique<Impl>(std::move(handler), limits, std::move(headers))) {}

WebServer::~WebServer() = default;

Result<Ok> WebServer::listen(const std::string& address) {
  OOMTRIAGE_ASSIGN_OR_RETURN(ListenAddress where, parse_listen_address(address));
  const tcp::endpoint endpoint(asio::ip::make_address(where.host), where.port);
  beast::error_code ec;
  impl_->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(endpoint, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return make_error(ErrorCode::kIo, "listen " + address + ": " + ec.message());
  impl_->accept();
  return Ok{};
}

unsigned short WebServer::port() const {
  beast::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

void WebServer::run() {
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < std::max(1u, impl_->shared.limits.threads); ++i) {
    threads.emplace_back([this] { impl_->io.run(); });
  }
  impl_->io.run();
  for (auto& thread : threads) thread.join();
}

void WebServer::stop() { impl_->io.stop(); }

size_t WebServer::open_connections() const { return impl_->shared.connections.load(); }

}  // namespace oomtriage::daemon
