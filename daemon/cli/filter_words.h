// daemon/cli/filter_words.h
//
// The words a jobs filter is given (`jobs --family flux1-dev --trainer aitk`, the web list's
// `?family=FLUX&trainer=kohya`) as the store spells them: a family through the family table
// (triage/family_names.h), a trainer through the trainer table's names and aliases
// (parsers::trainer_from_string()). The store compares exact ids (db/store_jobs.cc,
// db/fleet_store_reads.cc), so every filter goes through here first (find_jobs_page(),
// daemon/cli/report_command.h).
#pragma once

#include <string>
#include <vector>

namespace oomtriage::daemon {

struct FilterWords {
  std::string trainer;  // the store's id ("ai-toolkit"), or "" for any
  std::string family;   // the store's id ("flux.1"), or "" for any
  // What a reader should know of the words: a family the store files under "other", or a word
  // neither table knows (then `answerable` is false: no job can match it).
  std::vector<std::string> notes;
  bool answerable = true;
};

// `trainer` and `family` as typed ("" for any).
FilterWords store_words(const std::string& trainer, const std::string& family);

// "" when `word` names a family of the family table; else "unknown model family 'fluxx'; did you
// mean flux, flux.1?" and the families' ids (a CLI11 check, as command_table.cc's known_trainer).
std::string known_family(const std::string& word);

}  // namespace oomtriage::daemon
