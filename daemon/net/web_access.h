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

#include <memory>
#include <string>

#include "parsers/result.h"

namespace oomtriage::daemon {

class WebAccess {
 public:
  // Reads `path`; an error names the file and line, or the mode when group or others may read.
  static Result<std::unique_ptr<WebAccess>> load(const std::string& path);
  ~WebAccess();

  // Whether an Authorization header's value lets its sender in. A user's password is checked
  // by crypt once per distinct header (a bcrypt check costs tens of milliseconds).
  bool allows(const std::string& authorization);
  // The WWW-Authenticate value a refused client is sent.
  std::string challenge() const;

 private:
  WebAccess();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace oomtriage::daemon
