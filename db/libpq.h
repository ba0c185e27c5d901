// db/libpq.h: PostgreSQL's client library, opened with dlopen(3) the first time a fleet store is.
// Linked, libpq and the two dozen libraries it brings (Kerberos, LDAP, SASL, GnuTLS, ...) cost
// every run of oomtriage about 12 ms before main() on the machines measured here (`perf stat -r 20
// oomtriage --version`), more than scan's regex tables; only a fleet store needs them.
#pragma once

#include <libpq-fe.h>

#include "parsers/result.h"

namespace oomtriage::db {

// The libpq functions oomtriage calls; a member is named and typed as its function.
// clang-format off
#define OOMTRIAGE_LIBPQ_FUNCTIONS(X) \
  X(PQclear) \
  X(PQconnectdbParams) \
  X(PQconninfoFree) \
  X(PQconninfoParse) \
  X(PQerrorMessage) \
  X(PQexec) \
  X(PQexecParams) \
  X(PQfinish) \
  X(PQfreemem) \
  X(PQgetisnull) \
  X(PQgetlength) \
  X(PQgetvalue) \
  X(PQntuples) \
  X(PQresultStatus) \
  X(PQstatus)
// clang-format on

struct Libpq {
#define OOMTRIAGE_LIBPQ_MEMBER(name) decltype(&::name) name = nullptr;
  OOMTRIAGE_LIBPQ_FUNCTIONS(OOMTRIAGE_LIBPQ_MEMBER)
#undef OOMTRIAGE_LIBPQ_MEMBER
};

// Loads libpq once per process (later calls return the first call's answer). The error says which
// library or function was missing and how to install it.
Result<const Libpq*> load_libpq();

// The loaded library. Only for code reached after a successful load_libpq().
const Libpq& libpq();

}  // namespace oomtriage::db
