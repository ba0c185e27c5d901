// tests/support/store_damage.h: damaging a closed SQLite store as a bad disk would, for the
// recovery tests (tests/db/store_recovery_test.cc, tests/daemon/store_damage_test.cc).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace oomtriage::testing {

inline constexpr int kStorePage = 4096;  // SQLite's default page size

// Overwrites these pages (1-based, as SQLite numbers them) with random bytes.
inline void garble_pages(const std::filesystem::path& path, const std::vector<int64_t>& pages,
                         uint32_t seed = 11) {
  std::mt19937 random(seed);
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  for (int64_t page : pages) {
    std::string garbage(kStorePage, '\0');
    for (char& c : garbage) c = static_cast<char>(random());
    file.seekp((page - 1) * kStorePage);
    file.write(garbage.data(), kStorePage);
  }
}

// The pages a table's rows live in, from SQLite's dbstat table; empty when this SQLite has none.
inline std::vector<int64_t> pages_of(const std::filesystem::path& path, const std::string& table) {
  std::vector<int64_t> pages;
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT pageno FROM dbstat WHERE name = ?1", -1, &s, nullptr) ==
      SQLITE_OK) {
    sqlite3_bind_text(s, 1, table.c_str(), -1, SQLITE_TRANSIENT);
    while (sqlite3_step(s) == SQLITE_ROW) pages.push_back(sqlite3_column_int64(s, 0));
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return pages;
}

}  // namespace oomtriage::testing
