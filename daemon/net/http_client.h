// daemon/net/http_client.h
//
// One HTTP(S) request on the daemon's Asio loop (Boost.Beast), with a total timeout per hop: a
// webhook's POST, whose 2xx is delivered on its status line (its body is not waited for), or a
// request whose answer is wanted (`want_body`: AI Toolkit UI's routes). 307/308 are followed up
// to 3 hops with the method and body kept, other redirects fail with their Location. HTTPS verifies
// the peer against the system CA store (or a receiver's own CA file) and the host name, and sends
// SNI. Never throws; the outcome is an HttpResponse whose status is 0 on a network error.
#pragma once

#include <utility>  // before Asio (Boost 1.74)
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "parsers/result.h"

namespace oomtriage::daemon {

struct Url {
  bool https = false;
  std::string host;
  std::string port;
  std::string target;  // path and query
};

std::optional<Url> parse_url(std::string_view url);
// "https://hooks.slack.com/…": enough to say where, never the token in the path.
std::string redact_url(std::string_view url);

struct HttpRequest {
  enum class Method { kPost, kGet };
  Method method = Method::kPost;
  std::string url;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds timeout{10000};
  int redirects_left = 3;  // 307/308 hops still allowed
  // A 2xx's body is read too, up to this many bytes (a longer one fails); 0: not waited for.
  size_t want_body = 0;
};

// What the server answered. A redirect that was not followed is an answer too (3xx, Location).
struct HttpResponse {
  int status = 0;
  std::string body;
  std::optional<double> retry_after_seconds;  // from Retry-After (seconds form)
  std::optional<std::string> location;        // from Location
};

// `done` gets the answer, or why there was none (not an http(s) URL, resolve, connect, TLS,
// write or read failed or timed out): an kIo error naming the step.
void http_send(boost::asio::io_context& io, boost::asio::ssl::context& tls, HttpRequest request,
               std::function<void(Result<HttpResponse>)> done);

// Why a 3xx was not followed, with where it pointed (redacted): 307 and 308 past 3 hops, any
// other because it would turn the POST into a GET.
std::string unfollowed_redirect(const HttpResponse& response);
// "HTTP 503", or the error when there was no answer.
std::string describe(const Result<HttpResponse>& response);

// A TLS client context that verifies peers: the system store, or `ca_file` when given.
Result<std::unique_ptr<boost::asio::ssl::context>> make_tls_context(const std::string& ca_file);

}  // namespace oomtriage::daemon
