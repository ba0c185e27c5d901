// daemon/alerts/webhook_signature.h: Standard Webhooks signing, so a receiver can check that an
// alert came from this daemon and was not replayed (the id and timestamp are signed too).
#pragma once

#include <string>

namespace oomtriage::daemon {

// "v1,<base64(HMAC-SHA256(secret, id.timestamp.body))>"; a "whsec_" secret is base64 after the
// prefix.
std::string standard_webhook_signature(const std::string& secret, const std::string& id,
                                       const std::string& timestamp, const std::string& body);

}  // namespace oomtriage::daemon
