// daemon/alerts/webhook_signature.cc: HMAC-SHA256 and base64 from OpenSSL.
#include "daemon/alerts/webhook_signature.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <string_view>

namespace oomtriage::daemon {
namespace {

std::string base64(const unsigned char* data, size_t n) {
  std::string out(4 * ((n + 2) / 3), '\0');
  const int written =
      EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(n));
  out.resize(written > 0 ? static_cast<size_t>(written) : 0);
  return out;
}

// EVP_DecodeBlock counts the padding as zero bytes: they are taken off again.
std::string unbase64(std::string_view text) {
  std::string out(3 * ((text.size() + 3) / 4), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return std::string(text);
  size_t size = static_cast<size_t>(n);
  for (size_t i = text.size(); i > 0 && text[i - 1] == '=' && size > 0; --i) --size;
  out.resize(size);
  return out;
}

}  // namespace

std::string standard_webhook_signature(const std::string& secret, const std::string& id,
                                       const std::string& timestamp, const std::string& body) {
  const std::string key = secret.rfind("whsec_", 0) == 0 ? unbase64(secret.substr(6)) : secret;
  const std::string content = id + "." + timestamp + "." + body;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(content.data()), content.size(), mac, &length);
  return "v1," + base64(mac, length);
}

}  // namespace oomtriage::daemon
