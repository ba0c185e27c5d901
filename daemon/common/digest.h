// daemon/common/digest.h: SHA-256 as lowercase hex (OpenSSL): config snapshots, fix records and
// the tailer's content identity all name bytes by it.
#pragma once

#include <string>
#include <string_view>

namespace oomtriage::daemon {

std::string sha256_hex(std::string_view bytes);

}  // namespace oomtriage::daemon
