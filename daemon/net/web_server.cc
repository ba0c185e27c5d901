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

#include <array>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <limits>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

namespace oomtriage::daemon {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

class Connection;

// The slots: every open connection holds one, counted per address group too; those waiting for
// a request (no head yet, idle between requests, lingering) are listed oldest first, so that a
// full server makes room by closing the one that has waited longest.
struct Shared {
  WebServer::Handler handler;
  WebServerLimits limits;
  std::vector<std::pair<std::string, std::string>> headers;
  std::atomic<size_t> connections{0};

  std::mutex mutex;
  size_t open = 0;
  std::unordered_map<std::string, size_t> per_group;
  std::list<Connection*> waiting;
};

// What a client is told when it is not let in: written at once without blocking, never queued,
// and no slot held for it.
void refuse(tcp::socket& socket) {
  static const std::string kBody = "oomtriage serve: too many connections, try again shortly\n";
  static const std::string kText =
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
      "Retry-After: 5\r\nConnection: close\r\nContent-Length: " +
      std::to_string(kBody.size()) + "\r\n\r\n" + kBody;
  beast::error_code ec;
  socket.non_blocking(true, ec);
  socket.write_some(asio::buffer(kText), ec);
  socket.shutdown(tcp::socket::shutdown_send, ec);
  // What the client already sent is read off, so that the close is a FIN it reads the answer
  // before, not a reset.
  char scratch[4096];
  for (size_t drained = 0; !ec && drained < 64 * 1024;)
    drained += socket.read_some(asio::buffer(scratch), ec);
  socket.close(ec);
}

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  // Holds the slot admit() counted for it.
  Connection(tcp::socket socket, Shared& shared, std::string peer, std::string group)
      : stream_(std::move(socket)),
        shared_(shared),
        peer_(std::move(peer)),
        group_(std::move(group)) {
    ++shared_.connections;
  }
  ~Connection() {
    {
      std::lock_guard lock(shared_.mutex);
      stop_waiting_locked();
      release_locked();
    }
    --shared_.connections;
  }

  // Counts a new client in, or says why not: an address past its limit, or a server whose every
  // slot is answering a request. A full server closes its longest-waiting connection instead.
  static bool admit(Shared& shared, const std::string& group) {
    std::shared_ptr<Connection> evicted;
    {
      std::lock_guard lock(shared.mutex);
      const auto it = shared.per_group.find(group);
      if (shared.limits.max_per_address != 0 && it != shared.per_group.end() &&
          it->second >= shared.limits.max_per_address) {
        return false;
      }
      if (shared.open >= shared.limits.max_connections) {
        if (shared.waiting.empty()) return false;
        Connection* oldest = shared.waiting.front();
        oldest->stop_waiting_locked();
        oldest->release_locked();
        oldest->evicted_ = true;
        // Empty when its last reference is gone and its destructor waits for this lock.
        evicted = oldest->weak_from_this().lock();
      }
      ++shared.open;
      ++shared.per_group[group];
    }
    if (evicted) {
      asio::post(evicted->stream_.get_executor(), [evicted] { evicted->close(); });
    }
    return true;
  }

  void start() {
    // A fresh connection has header_timeout from its accept to send its request's head.
    read_head(std::min(shared_.limits.header_timeout, shared_.limits.request_timeout));
  }

 private:
  using Clock = std::chrono::steady_clock;

  void release_locked() {
    if (released_) return;
    released_ = true;
    --shared_.open;
    const auto it = shared_.per_group.find(group_);
    if (it != shared_.per_group.end() && --it->second == 0) shared_.per_group.erase(it);
  }
  void stop_waiting_locked() {
    if (!waiting_) return;
    shared_.waiting.erase(waiting_at_);
    waiting_ = false;
  }
  // Waiting: for a request, or lingering; the first to go when the server is full.
  bool wait_for_client() {
    std::lock_guard lock(shared_.mutex);
    if (evicted_) return false;
    stop_waiting_locked();
    waiting_at_ = shared_.waiting.insert(shared_.waiting.end(), this);
    waiting_ = true;
    return true;
  }
  // Answering: no longer to be closed for room. False when it was, a moment ago.
  bool start_answering() {
    std::lock_guard lock(shared_.mutex);
    if (evicted_) return false;
    stop_waiting_locked();
    return true;
  }

  void read_head(std::chrono::milliseconds timeout) {
    if (!wait_for_client()) return close();
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(shared_.limits.max_request_bytes));
    // No body limit while the head is read (Beast would stop at a long Content-Length before
    // the rest of the head): read_body() sets it. Not boost::none: Boost 1.74 compares a
    // Content-Length with an empty limit as greater.
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    request_started_ = Clock::now();
    // One deadline for the whole head: a client that trickles a byte a second is still cut off
    // (Beast re-arms nothing per byte).
    stream_.expires_after(timeout);
    http::async_read_header(
        stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
          if (ec == http::error::header_limit) {
            return self->refuse_request(http::status::request_header_fields_too_large,
                                        "the request's line and headers are too long\n");
          }
          if (ec) return self->close();
          self->read_body();
        });
  }

  // A kept-alive connection: idle_timeout for its next request to begin, then header_timeout
  // for the head.
  void read_next() {
    if (buffer_.size() > 0) return read_head(shared_.limits.header_timeout);
    if (!wait_for_client()) return close();
    stream_.expires_after(shared_.limits.idle_timeout);
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec || n == 0) return self->close();
                              self->buffer_.commit(n);
                              self->read_head(self->shared_.limits.header_timeout);
                            });
  }

  // GET and HEAD carry no body, but a body sent is read off (to max_discarded_body) so that the
  // connection can go on; a longer one, or one whose sender waits for 100-continue, is answered
  // with the connection closed after it.
  void read_body() {
    auto& req = parser_->get();
    if (parser_->is_done()) return answer();
    const auto length = parser_->content_length();
    if ((length && *length > shared_.limits.max_discarded_body) ||
        beast::iequals(req[http::field::expect], "100-continue")) {
      return refuse_body();
    }
    parser_->body_limit(shared_.limits.max_discarded_body);
    stream_.expires_at(request_started_ + shared_.limits.request_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec == http::error::body_limit) return self->refuse_body();
                       if (ec) return self->close();
                       self->parser_->get().body().clear();
                       self->answer();
                     });
  }

  void refuse_body() {
    const http::verb method = parser_->get().method();
    if (method != http::verb::get && method != http::verb::head)
      return answer(/*close_after=*/true);
    refuse_request(http::status::payload_too_large, "a GET or HEAD request carries no body\n");
  }

  void refuse_request(http::status status, const char* why) {
    if (!start_answering()) return close();
    res_ = {};
    res_.version(11);
    res_.result(status);
    res_.set(http::field::content_type, "text/plain; charset=utf-8");
    res_.body() = std::string("oomtriage serve: ") + why;
    for (const auto& [name, value] : shared_.headers) res_.set(name, value);
    res_.keep_alive(false);
    res_.prepare_payload();
    linger_after_ = true;
    write();
  }

  void answer(bool close_after = false) {
    if (!start_answering()) return close();
    const auto& req = parser_->get();
    res_ = {};
    res_.version(req.version());
    res_.keep_alive(req.keep_alive() && !close_after);
    linger_after_ = close_after;
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
      request.peer_group = group_;
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
      if (ec) return self->close();
      if (self->linger_after_) return self->linger();
      if (!self->res_.keep_alive()) return self->close();
      self->read_next();
    });
  }

  // The answer is written and the connection is to close while the client may still be
  // sending: our side is shut, and what it sends is read off for up to linger_timeout, so that
  // its kernel does not get a reset that throws the answer away.
  void linger() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    if (!wait_for_client()) return close();
    stream_.expires_after(shared_.limits.linger_timeout);
    drain();
  }
  void drain() {
    stream_.async_read_some(asio::buffer(scratch_),
                            [self = shared_from_this()](beast::error_code ec, size_t) {
                              if (ec) return self->close();
                              self->drain();
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
  std::string group_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  Clock::time_point request_started_;
  bool linger_after_ = false;
  std::array<char, 4096> scratch_{};
  // Guarded by shared_.mutex.
  bool waiting_ = false;
  bool released_ = false;
  bool evicted_ = false;
  std::list<Connection*>::iterator waiting_at_;
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

std::string address_group(const std::string& address) {
  beast::error_code ec;
  const auto ip = asio::ip::make_address(address, ec);
  if (ec || ip.is_v4()) return address;
  const auto v6 = ip.to_v6();
  if (v6.is_v4_mapped()) return asio::ip::make_address_v4(asio::ip::v4_mapped, v6).to_string();
  auto bytes = v6.to_bytes();
  for (size_t i = 8; i < bytes.size(); ++i) bytes[i] = 0;
  return asio::ip::address_v6(bytes).to_string() + "/64";
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
      beast::error_code peer_ec;
      const auto remote = socket.remote_endpoint(peer_ec);
      std::string peer = peer_ec ? std::string() : remote.address().to_string();
      std::string group = address_group(peer);
      if (!Connection::admit(shared, group)) {
        refuse(socket);
      } else {
        std::make_shared<Connection>(std::move(socket), shared, std::move(peer), std::move(group))
            ->start();
      }
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
