// daemon/net/web_access.cc: the access file read and checked; tokens compared in constant time,
// passwords through libcrypt's crypt_r.
#include "daemon/net/web_access.h"

#include <crypt.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <sstream>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "daemon/common/user_file.h"

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

// Headers are remembered by their SHA-256, never as the password they carry.
using HeaderDigest = std::array<unsigned char, 32>;

HeaderDigest digest_of(const std::string& header) {
  HeaderDigest out{};
  unsigned size = 0;
  EVP_Digest(header.data(), header.size(), out.data(), &size, EVP_sha256(), nullptr);
  return out;
}

using Clock = std::chrono::steady_clock;

struct Failures {
  unsigned count = 0;
  Clock::time_point last;
  Clock::time_point blocked_until;
};

// The groups remembered at most; past it the quiet ones are forgotten first.
constexpr size_t kMaxGroups = 16384;

}  // namespace

struct WebAccess::Impl {
  AccessLimits limits;
  std::vector<std::string> tokens;
  std::vector<std::pair<std::string, std::string>> users;  // name, crypt hash
  std::mutex mutex;
  std::set<HeaderDigest> verified;                     // Basic headers whose password checked out
  std::set<HeaderDigest> refused;                      // and those whose did not
  std::unordered_map<std::string, Failures> failures;  // by address group
  std::atomic<unsigned> crypts_running{0};
  std::atomic<size_t> crypt_calls{0};

  // Under `mutex`: how long `group` must still wait, or 0.
  int backing_off_locked(const std::string& group, Clock::time_point now) {
    const auto it = failures.find(group);
    if (it == failures.end() || it->second.blocked_until <= now) return 0;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(it->second.blocked_until - now);
    return static_cast<int>((left.count() + 999) / 1000);
  }

  // Under `mutex`: one more failure from `group`, and the wait it earns.
  void failed_locked(const std::string& group, Clock::time_point now) {
    if (failures.size() >= kMaxGroups && !failures.count(group)) {
      std::erase_if(failures, [&](const auto& entry) {
        return entry.second.blocked_until <= now && now - entry.second.last > limits.forget_after;
      });
      if (failures.size() >= kMaxGroups) failures.clear();
    }
    Failures& f = failures[group];
    if (f.count > 0 && now - f.last > limits.forget_after) f = {};
    ++f.count;
    f.last = now;
    if (f.count > limits.free_failures) {
      const unsigned doublings = std::min(f.count - limits.free_failures - 1, 30u);
      auto wait = limits.first_backoff * (int64_t{1} << std::min(doublings, 20u));
      if (wait > limits.max_backoff || doublings >= 20) wait = limits.max_backoff;
      f.blocked_until = now + wait;
    }
  }
};

WebAccess::WebAccess() : impl_(std::make_unique<Impl>()) {}
WebAccess::~WebAccess() = default;

Result<std::unique_ptr<WebAccess>> WebAccess::load(const std::string& path, AccessLimits limits) {
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
  // Bounded and regular files only, as every file a user writes (daemon/common/user_file.h).
  auto text = read_user_file(path, 1 << 20);
  if (!text) return make_error(text.error().code, "access file " + text.error().message);
  std::istringstream in(*text);
  std::unique_ptr<WebAccess> access(new WebAccess());
  access->impl_->limits = limits;
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

AccessVerdict WebAccess::check(const std::string& authorization, const std::string& group,
                               Clock::time_point now) {
  using Kind = AccessVerdict::Kind;
  // A browser asks without credentials first: that is no failure.
  if (authorization.empty()) return {Kind::kRefused, 0};
  Impl& d = *impl_;
  if (authorization.starts_with("Bearer ")) {
    // Cheap to check, so checked even while the address backs off (one that shares an address
    // with a guesser, behind a NAT or a proxy, still gets in with its token).
    const std::string token = trim(authorization.substr(7));
    bool found = false;
    for (const auto& known : d.tokens) found |= same(token, known);
    if (found) return {Kind::kAllowed, 0};
    std::lock_guard lock(d.mutex);
    if (const int wait = d.backing_off_locked(group, now)) return {Kind::kBackOff, wait};
    d.failed_locked(group, now);
    return {Kind::kRefused, 0};
  }
  if (!authorization.starts_with("Basic ")) return {Kind::kRefused, 0};
  const HeaderDigest key = digest_of(authorization);
  {
    std::lock_guard lock(d.mutex);
    // A header that passed is let in without crypt, whoever else guesses from its address.
    if (d.verified.count(key)) return {Kind::kAllowed, 0};
    if (const int wait = d.backing_off_locked(group, now)) return {Kind::kBackOff, wait};
    // A header refused before is refused again without paying for crypt, and without counting
    // again: repeating one wrong guess learns nothing.
    if (d.refused.count(key)) return {Kind::kRefused, 0};
  }
  const auto remember_refused = [&] {
    std::lock_guard lock(d.mutex);
    if (d.refused.size() >= 4096) d.refused.clear();
    d.refused.insert(key);
  };
  const auto decoded = base64_decode(trim(authorization.substr(6)));
  if (!decoded || d.users.empty()) {
    remember_refused();
    return {Kind::kRefused, 0};
  }
  const size_t colon = decoded->find(':');
  // A password with a NUL in it is not the one crypt would see.
  if (colon == std::string::npos || decoded->find('\0', colon) != std::string::npos) {
    remember_refused();
    return {Kind::kRefused, 0};
  }
  const std::string name = decoded->substr(0, colon);
  const std::string password = decoded->substr(colon + 1);
  // An unknown user costs the same crypt as a known one: timing does not tell names.
  const std::string* hash = &d.users.front().second;
  bool known = false;
  for (const auto& [user, user_hash] : d.users) {
    if (same(name, user)) {
      hash = &user_hash;
      known = true;
    }
  }
  // A bounded number of crypt calls at once: past them the check is not queued (a queued check
  // holds a server thread all the same) but answered busy.
  if (d.crypts_running.fetch_add(1) >= std::max(1u, d.limits.crypt_budget)) {
    --d.crypts_running;
    return {Kind::kBusy, 1};
  }
  ++d.crypt_calls;
  crypt_data data{};
  const char* computed = crypt_r(password.c_str(), hash->c_str(), &data);
  const bool passed = known && computed != nullptr && computed[0] != '*' && same(computed, *hash);
  --d.crypts_running;
  std::lock_guard lock(d.mutex);
  if (!passed) {
    if (d.refused.size() >= 4096) d.refused.clear();
    d.refused.insert(key);
    d.failed_locked(group, now);
    return {Kind::kRefused, 0};
  }
  if (d.verified.size() >= 256) d.verified.clear();
  d.verified.insert(key);
  return {Kind::kAllowed, 0};
}

size_t WebAccess::crypt_calls() const { return impl_->crypt_calls.load(); }

std::string WebAccess::challenge() const {
  return impl_->users.empty() ? "Bearer realm=\"oomtriage\""
                              : "Basic realm=\"oomtriage\", charset=\"UTF-8\"";
}

}  // namespace oomtriage::daemon
