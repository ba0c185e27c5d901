// daemon/net/web_access.cc: the access file read and checked; tokens compared in constant time,
// passwords through libcrypt's crypt_r.
#include "daemon/net/web_access.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <vector>

namespace oomtriage::daemon {
namespace {

bool same(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string trim(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

std::optional<std::string> base64_decode(const std::string& text) {
  if (text.empty() || text.size() % 4 != 0 || text.size() > 4096) return std::nullopt;
  std::vector<unsigned char> out(text.size() / 4 * 3 + 1);
  const int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return std::nullopt;
  size_t size = static_cast<size_t>(n);
  // EVP_DecodeBlock counts the padding's zero bytes.
  for (size_t i = text.size(); i > 0 && text[i - 1] == '=' && size > 0; --i) --size;
  return std::string(reinterpret_cast<const char*>(out.data()), size);
}

}  // namespace

struct WebAccess::Impl {
  std::vector<std::string> tokens;
  std::vector<std::pair<std::string, std::string>> users;  // name, crypt hash
  std::mutex mutex;
  std::set<std::string> verified;  // Basic headers whose password checked out
  std::set<std::string> refused;   // and those whose did not
};

WebAccess::WebAccess() : impl_(std::make_unique<Impl>()) {}
WebAccess::~WebAccess() = default;

Result<std::unique_ptr<WebAccess>> WebAccess::load(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return make_error(ErrorCode::kIo, fmt::format("access file {}: cannot read it", path));
  }
  // Others, not the group: systemd's LoadCredential= grants the service's dynamic user read
  // access through the group bits of an ACL.
  if ((st.st_mode & 007) != 0) {
    return make_error(ErrorCode::kBadInput,
                      fmt::format("access file {}: others may read it (mode {:04o}); chmod 600 it",
                                  path, st.st_mode & 07777));
  }
  std::ifstream in(path);
  if (!in) return make_error(ErrorCode::kIo, fmt::format("access file {}: cannot read it", path));
  std::unique_ptr<WebAccess> access(new WebAccess());
  std::string raw;
  for (int number = 1; std::getline(in, raw); ++number) {
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#') continue;
    if (line.starts_with("token ") || line.starts_with("token\t")) {
      const std::string token = trim(line.substr(6));
      if (token.size() < 16) {
        return make_error(ErrorCode::kBadInput,
                          fmt::format("access file {}:{}: a token needs 16 characters or more "
                                      "(openssl rand -hex 32 makes one)",
                                      path, number));
      }
      access->impl_->tokens.push_back(token);
      continue;
    }
    const size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0 || line.size() < colon + 2 ||
        line[colon + 1] != '$') {
      return make_error(
          ErrorCode::kBadInput,
          fmt::format("access file {}:{}: neither `token SECRET` nor `user:$hash`", path, number));
    }
    access->impl_->users.emplace_back(line.substr(0, colon), line.substr(colon + 1));
  }
  if (access->impl_->tokens.empty() && access->impl_->users.empty()) {
    return make_error(ErrorCode::kBadInput,
                      fmt::format("access file {}: no token and no user in it", path));
  }
  return access;
}

bool WebAccess::allows(const std::string& authorization) {
  if (authorization.starts_with("Bearer ")) {
    const std::string token = trim(authorization.substr(7));
    bool found = false;
    for (const auto& known : impl_->tokens) found |= same(token, known);
    return found;
  }
  if (!authorization.starts_with("Basic ")) return false;
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->verified.count(authorization)) return true;
    // A header refused before is refused again without paying for crypt: guessing costs the
    // guesser, not the server's threads.
    if (impl_->refused.count(authorization)) return false;
  }
  const auto refuse = [&] {
    std::lock_guard lock(impl_->mutex);
    if (impl_->refused.size() >= 4096) impl_->refused.clear();
    impl_->refused.insert(authorization);
    return false;
  };
  const auto decoded = base64_decode(trim(authorization.substr(6)));
  if (!decoded || impl_->users.empty()) return refuse();
  const size_t colon = decoded->find(':');
  if (colon == std::string::npos) return refuse();
  const std::string name = decoded->substr(0, colon);
  const std::string password = decoded->substr(colon + 1);
  // A password with a NUL in it is not the one crypt would see.
  if (password.find('\0') != std::string::npos) return refuse();
  // An unknown user costs the same crypt as a known one: timing does not tell names.
  const std::string* hash = &impl_->users.front().second;
  bool known = false;
  for (const auto& [user, user_hash] : impl_->users) {
    if (same(name, user)) {
      hash = &user_hash;
      known = true;
    }
  }
  crypt_data data{};
  const char* computed = crypt_r(password.c_str(), hash->c_str(), &data);
  if (!known || computed == nullptr || computed[0] == '*' || !same(computed, *hash)) {
    return refuse();
  }
  std::lock_guard lock(impl_->mutex);
  if (impl_->verified.size() >= 256) impl_->verified.clear();
  impl_->verified.insert(authorization);
  return true;
}

std::string WebAccess::challenge() const {
  return impl_->users.empty() ? "Bearer realm=\"oomtriage\""
                              : "Basic realm=\"oomtriage\", charset=\"UTF-8\"";
}

}  // namespace oomtriage::daemon
