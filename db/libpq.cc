// db/libpq.cc: libpq's functions looked up with dlsym(3) in libpq.so.5, the soname of every
// libpq since PostgreSQL 8.3.
#include "db/libpq.h"

#include <dlfcn.h>

#include <string>

namespace oomtriage::db {
namespace {

constexpr const char* kLibpqSoname = "libpq.so.5";

Libpq loaded;

Result<const Libpq*> open_libpq() {
  // RTLD_NODELETE: connections may outlive any owner we could give the handle.
  void* handle = ::dlopen(kLibpqSoname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const char* reason = ::dlerror();
    return make_error(ErrorCode::kIo, std::string("a fleet store needs PostgreSQL's client "
                                                  "library (Debian: apt-get install libpq5): ") +
                                          (reason ? reason : kLibpqSoname));
  }
  Libpq functions;
#define OOMTRIAGE_LIBPQ_LOOKUP(name)                                                            \
  functions.name = reinterpret_cast<decltype(functions.name)>(::dlsym(handle, #name));          \
  if (functions.name == nullptr) {                                                              \
    return make_error(ErrorCode::kIo, std::string(kLibpqSoname) +                               \
                                          " has no " #name                                      \
                                          ": a libpq older than PostgreSQL 9.3 is not enough"); \
  }
  OOMTRIAGE_LIBPQ_FUNCTIONS(OOMTRIAGE_LIBPQ_LOOKUP)
#undef OOMTRIAGE_LIBPQ_LOOKUP
  loaded = functions;
  return &loaded;
}

}  // namespace

Result<const Libpq*> load_libpq() {
  static const Result<const Libpq*> once = open_libpq();  // thread-safe, run once
  return once;
}

const Libpq& libpq() { return loaded; }

}  // namespace oomtriage::db
