// daemon/net/web_access.h
//
// Who may read `oomtriage serve`'s pages beyond loopback: an access file of bearer tokens and
// basic-auth users, refused when others may read it. Its lines:
//
//   # comment
//   token 3f9c0a...                 a bearer token (Authorization: Bearer 3f9c0a...)
//   alice:$2y$05$...                a user with a crypt(3) hash, as `htpasswd -B` or
//                                   `openssl passwd -6` write them (bcrypt, SHA-crypt, yescrypt)
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "parsers/result.h"

namespace oomtriage::daemon {

// How failed sign-ins are made to cost the one who fails rather than the server.
struct AccessLimits {
  // Failures an address group may make before it must wait; then it waits first_backoff,
  // doubled at each further failure, up to max_backoff. Forgotten after forget_after without one.
  unsigned free_failures = 5;
  std::chrono::milliseconds first_backoff{1000};
  std::chrono::milliseconds max_backoff{60000};
  std::chrono::milliseconds forget_after{15 * 60000};
  // crypt_r calls running at once: a password check past them is answered "busy" at once, so
  // guessers cannot take every server thread.
  unsigned crypt_budget = 1;
};

struct AccessVerdict {
  enum class Kind {
    kAllowed,
    kRefused,  // 401
    kBackOff,  // 429: too many failures from this address; retry_after seconds
    kBusy,     // 503: every crypt slot taken; retry_after seconds
  };
  Kind kind = Kind::kRefused;
  int retry_after = 0;
};

class WebAccess {
 public:
  // Reads `path`; an error names the file and line, or the mode when group or others may read.
  static Result<std::unique_ptr<WebAccess>> load(const std::string& path, AccessLimits limits = {});
  ~WebAccess();

  // Whether an Authorization header's value lets its sender (of address group `group`) in.
  // Tokens are compared in constant time. A user's password is checked by crypt once per
  // distinct header (a bcrypt check costs tens of milliseconds): a header that passed is
  // remembered (by its SHA-256) and let in without crypt, even from an address that is backing
  // off, and one that failed is refused without crypt. A group past its free failures is told to
  // back off (429) without crypt, and a check that finds every crypt slot taken is told busy.
  // `now` is passed for the tests.
  AccessVerdict check(const std::string& authorization, const std::string& group,
                      std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());
  // crypt_r calls made so far (for the tests and the bench).
  size_t crypt_calls() const;
  // The WWW-Authenticate value a refused client is sent.
  std::string challenge() const;

 private:
  WebAccess();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace oomtriage::daemon
