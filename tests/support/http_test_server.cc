// tests/support/http_test_server.cc: accept, read one request, answer as scripted, close.
#include "tests/support/http_test_server.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace oomtriage::testing {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

}  // namespace

struct HttpTestServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
};

ReservedPort::ReservedPort() {
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error(std::string("cannot reserve a loopback port: ") +
                             std::strerror(errno));
  }
  port_ = ntohs(addr.sin_port);
}

ReservedPort::~ReservedPort() {
  if (fd_ >= 0) ::close(fd_);
}

HttpTestServer::HttpTestServer(Script script, std::shared_ptr<asio::ssl::context> tls)
    : HttpTestServer(std::move(script), ReservedPort(), std::move(tls)) {}

HttpTestServer::HttpTestServer(Script script, ReservedPort reserved,
                               std::shared_ptr<asio::ssl::context> tls)
    : impl_(std::make_unique<Impl>()), script_(std::move(script)), tls_(std::move(tls)) {
  impl_->acceptor.assign(tcp::v4(), reserved.release());
  impl_->acceptor.listen();
  port_ = impl_->acceptor.local_endpoint().port();
  thread_ = std::thread([this] { run(); });
}

HttpTestServer::~HttpTestServer() {
  stopping_ = true;
  beast::error_code ec;
  // Wake the blocking accept with a connection of our own.
  tcp::socket poke(impl_->io);
  poke.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port_), ec);
  thread_.join();
}

std::string HttpTestServer::url(const std::string& path) const {
  return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(port_) + path;
}

std::vector<ReceivedRequest> HttpTestServer::requests() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_;
}

size_t HttpTestServer::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_.size();
}

void HttpTestServer::run() {
  while (!stopping_) {
    tcp::socket socket(impl_->io);
    beast::error_code ec;
    impl_->acceptor.accept(socket, ec);
    if (ec || stopping_) break;
    if (down_) {
      socket.set_option(asio::socket_base::linger(true, 0), ec);  // a reset, not a close
      socket.close(ec);
      continue;
    }
    auto serve = [&](auto& stream) {
      beast::flat_buffer buffer;
      http::request<http::string_body> req;
      http::read(stream, buffer, req, ec);
      if (ec) return;
      ReceivedRequest received;
      received.target = std::string(req.target());
      for (const auto& field : req) {
        std::string name(field.name_string());
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        received.headers[name] = std::string(field.value());
      }
      received.body = req.body();
      received.at = std::chrono::steady_clock::now();
      size_t index;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        index = requests_.size();
        requests_.push_back(received);
      }
      const ScriptedResponse answer = script_(received, index);
      if (answer.hang) {
        // Hold the connection without answering until the client gives up.
        char byte;
        stream.read_some(asio::buffer(&byte, 1), ec);
        return;
      }
      std::this_thread::sleep_for(answer.delay);
      http::response<http::string_body> res{static_cast<http::status>(answer.status), 11};
      res.set(http::field::content_type, "text/plain");
      if (!answer.retry_after.empty()) res.set(http::field::retry_after, answer.retry_after);
      if (!answer.location.empty()) res.set(http::field::location, answer.location);
      res.body() = answer.body;
      res.prepare_payload();
      http::write(stream, res, ec);
    };
    if (tls_) {
      beast::ssl_stream<tcp::socket&> stream(socket, *tls_);
      stream.handshake(asio::ssl::stream_base::server, ec);
      if (!ec) serve(stream);
    } else {
      serve(socket);
    }
    socket.shutdown(tcp::socket::shutdown_both, ec);
  }
}

}  // namespace oomtriage::testing
