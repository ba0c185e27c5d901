// daemon/net/http_client.cc: resolve -> connect -> (TLS handshake) -> write -> read, each step
// under one deadline on the Beast stream, callbacks only (Boost 1.74 has no as_tuple).
#include "daemon/net/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <fmt/format.h>
#include <strings.h>

#include <algorithm>
#include <limits>
#include <memory>

namespace oomtriage::daemon {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

constexpr size_t kMaxResponseBody = 64 * 1024;

template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  Session(asio::io_context& io, Stream stream, Url url, HttpRequest request,
          std::function<void(Result<HttpResponse>)> done)
      : resolver_(io),
        stream_(std::move(stream)),
        url_(std::move(url)),
        request_(std::move(request)),
        done_(std::move(done)) {}

  void start() {
    req_.method(request_.method == HttpRequest::Method::kGet ? http::verb::get : http::verb::post);
    req_.target(url_.target);
    req_.version(11);
    req_.set(http::field::host, url_.host);
    req_.set(http::field::user_agent, "oomtriage/0.1");
    if (request_.method == HttpRequest::Method::kPost) {
      req_.set(http::field::content_type, "application/json");
    }
    for (const auto& [name, value] : request_.headers) req_.set(name, value);
    req_.body() = request_.body;
    req_.prepare_payload();
    // No limit while the header is read (Beast checks Content-Length against it there): a 2xx
    // never waits for its body; other answers read at most kMaxResponseBody of it.
    parser_.body_limit(
        std::numeric_limits<std::uint64_t>::max());  // not boost::none: Beast 1.74 compares it
    lowest().expires_after(request_.timeout);
    resolver_.async_resolve(url_.host, url_.port,
                            [self = this->shared_from_this()](beast::error_code ec,
                                                              tcp::resolver::results_type results) {
                              if (ec) return self->fail("resolve", ec);
                              self->lowest().async_connect(
                                  results, [self](beast::error_code ec2, const tcp::endpoint&) {
                                    if (ec2) return self->fail("connect", ec2);
                                    self->handshake();
                                  });
                            });
  }

 private:
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }

  void handshake() {
    if constexpr (std::is_same_v<Stream, beast::ssl_stream<beast::tcp_stream>>) {
      if (!SSL_set_tlsext_host_name(stream_.native_handle(), url_.host.c_str())) {
        return fail("tls", beast::error_code(static_cast<int>(::ERR_get_error()),
                                             asio::error::get_ssl_category()));
      }
      stream_.set_verify_callback(asio::ssl::host_name_verification(url_.host));
      stream_.async_handshake(asio::ssl::stream_base::client,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return self->fail("tls handshake", ec);
                                self->write();
                              });
    } else {
      write();
    }
  }

  // The status line and headers decide: a 2xx is delivered without waiting for its body (a
  // receiver may answer with megabytes); anything else reads at most 64 KiB of body for the
  // message, and a longer body is cut, not a failure.
  void write() {
    http::async_write(
        stream_, req_, [self = this->shared_from_this()](beast::error_code ec, size_t) {
          if (ec) return self->fail("write", ec);
          http::async_read_header(
              self->stream_, self->buffer_, self->parser_, [self](beast::error_code ec2, size_t) {
                if (ec2) return self->fail("read", ec2);
                const unsigned status = self->parser_.get().result_int();
                const bool success = status >= 200 && status < 300;
                if ((success && self->request_.want_body == 0) || self->parser_.is_done()) {
                  return self->finish();
                }
                const size_t limit = success ? self->request_.want_body : kMaxResponseBody;
                // Beast checks a Content-Length against the limit only while the header is read
                // (with no limit, above): a longer body announced is refused here, before its
                // string is allocated; an error's status is enough without it.
                if (const auto length = self->parser_.content_length(); length && *length > limit) {
                  if (!success) return self->finish();
                  return self->fail(
                      fmt::format("read (an answer of {} bytes, over {})", *length, limit).c_str(),
                      http::error::body_limit);
                }
                self->parser_.body_limit(limit);
                http::async_read(
                    self->stream_, self->buffer_, self->parser_,
                    [self, success, limit](beast::error_code ec3, size_t) {
                      if (ec3 == http::error::body_limit && success) {
                        return self->fail(
                            fmt::format("read (an answer over {} bytes)", limit).c_str(), ec3);
                      }
                      if (ec3 && ec3 != http::error::body_limit) {
                        return self->fail("read", ec3);
                      }
                      self->finish();
                    });
              });
        });
  }

  void finish() {
    const auto& res = parser_.get();
    HttpResponse response;
    response.status = static_cast<int>(res.result_int());
    response.body = request_.want_body > 0 ? res.body() : res.body().substr(0, kMaxResponseBody);
    if (auto it = res.find(http::field::location); it != res.end()) {
      response.location = std::string(it->value());
    }
    if (auto it = res.find(http::field::retry_after); it != res.end()) {
      const std::string value(it->value());
      char* end = nullptr;
      const double seconds = std::strtod(value.c_str(), &end);
      if (end != value.c_str() && seconds >= 0) response.retry_after_seconds = seconds;
    }
    lowest().close();
    done_(std::move(response));
  }

  void fail(const char* what, beast::error_code ec) {
    std::string message = ec == beast::error::timeout ? std::string(what) + ": timed out"
                                                      : std::string(what) + ": " + ec.message();
    beast::error_code ignored;
    lowest().socket().close(ignored);
    done_(make_error(ErrorCode::kIo, std::move(message)));
  }

  tcp::resolver resolver_;
  Stream stream_;
  Url url_;
  HttpRequest request_;
  std::function<void(Result<HttpResponse>)> done_;
  http::request<http::string_body> req_;
  beast::flat_buffer buffer_;
  http::response_parser<http::string_body> parser_;
};

}  // namespace

std::optional<Url> parse_url(std::string_view url) {
  Url out;
  if (url.rfind("https://", 0) == 0) {
    out.https = true;
    url.remove_prefix(8);
  } else if (url.rfind("http://", 0) == 0) {
    url.remove_prefix(7);
  } else {
    return std::nullopt;
  }
  const size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  out.target = slash == std::string_view::npos ? "/" : std::string(url.substr(slash));
  if (authority.find('@') != std::string_view::npos || authority.empty()) return std::nullopt;
  if (authority.front() == '[') {  // [::1]:9000
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    out.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    out.port = authority.size() > 1 && authority[0] == ':' ? std::string(authority.substr(1)) : "";
  } else {
    const size_t colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    out.port = colon == std::string_view::npos ? "" : std::string(authority.substr(colon + 1));
  }
  if (out.port.empty()) out.port = out.https ? "443" : "80";
  if (out.host.empty()) return std::nullopt;
  return out;
}

std::string redact_url(std::string_view url) {
  const auto parsed = parse_url(url);
  if (!parsed) return "<invalid url>";
  return std::string(parsed->https ? "https://" : "http://") + parsed->host + ":" + parsed->port +
         "/…";
}

Result<std::unique_ptr<asio::ssl::context>> make_tls_context(const std::string& ca_file) {
  auto tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
  beast::error_code ec;
  if (ca_file.empty()) {
    tls->set_default_verify_paths(ec);
  } else {
    tls->load_verify_file(ca_file, ec);
  }
  if (ec) {
    return make_error(ErrorCode::kIo, "TLS trust store" + (ca_file.empty() ? "" : " " + ca_file) +
                                          ": " + ec.message());
  }
  tls->set_verify_mode(asio::ssl::verify_peer);
  return tls;
}

namespace {

// "/hook", "hook", "http://other/hook" against the URL that answered with the redirect.
std::string resolve_location(const std::string& base, const std::string& location) {
  if (location.rfind("http://", 0) == 0 || location.rfind("https://", 0) == 0) return location;
  const auto url = parse_url(base);
  if (!url) return location;
  const std::string origin =
      std::string(url->https ? "https://" : "http://") + url->host + ":" + url->port;
  if (!location.empty() && location.front() == '/') return origin + location;
  const size_t slash = url->target.rfind('/');
  return origin + url->target.substr(0, slash + 1) + location;
}

}  // namespace

void http_send(asio::io_context& io, asio::ssl::context& tls, HttpRequest request,
               std::function<void(Result<HttpResponse>)> done) {
  // 307 and 308 keep the method and body: followed up to 3 hops. Other redirects would turn
  // a POST into a GET: they are answered as they came (unfollowed_redirect() says why).
  auto follow = [&io, &tls, request, done](Result<HttpResponse> answered) mutable {
    if (!answered) return done(std::move(answered));
    const HttpResponse& response = *answered;
    const bool keeps_post = response.status == 307 || response.status == 308;
    if (keeps_post && response.location && request.redirects_left > 0) {
      HttpRequest next = request;
      next.url = resolve_location(request.url, *response.location);
      --next.redirects_left;
      // Credentials are for the origin they were given for, as curl and browsers do.
      const auto from = parse_url(request.url);
      const auto to = parse_url(next.url);
      if (!from || !to || from->https != to->https || from->host != to->host ||
          from->port != to->port) {
        std::erase_if(next.headers, [](const auto& header) {
          return strcasecmp(header.first.c_str(), "authorization") == 0;
        });
      }
      return http_send(io, tls, std::move(next), std::move(done));
    }
    done(std::move(answered));
  };
  auto url = parse_url(request.url);
  if (!url) {
    asio::post(
        io, [done = std::move(done)] { done(make_error(ErrorCode::kIo, "not an http(s) URL")); });
    return;
  }
  if (url->https) {
    using Stream = beast::ssl_stream<beast::tcp_stream>;
    std::make_shared<Session<Stream>>(io, Stream(io, tls), *url, std::move(request),
                                      std::move(follow))
        ->start();
  } else {
    std::make_shared<Session<beast::tcp_stream>>(io, beast::tcp_stream(io), *url,
                                                 std::move(request), std::move(follow))
        ->start();
  }
}

std::string unfollowed_redirect(const HttpResponse& response) {
  const bool keeps_post = response.status == 307 || response.status == 308;
  return fmt::format("HTTP {} redirect to {} not followed{}", response.status,
                     response.location ? redact_url(*response.location) : "nowhere",
                     keeps_post ? " (more than 3 hops)" : " (it would drop the POST)");
}

std::string describe(const Result<HttpResponse>& response) {
  if (!response) return response.error().message;
  return fmt::format("HTTP {}", response->status);
}

}  // namespace oomtriage::daemon
