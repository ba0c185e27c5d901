// parsers/log_analyzer_internal.h
//
// What the parts of LogAnalyzer share and nothing else includes: the window of records an
// incident keeps, how much of a file is sampled for binary bytes, and the evidence line as it is
// stored. The analyzer's state is its class's members (parsers/log_analyzer.h); its member
// functions are defined in parsers/log_analyzer.cc (record dispatch, the public entry points),
// analyzer_bars.cc, analyzer_markers.cc, analyzer_incidents.cc, analyzer_job_facts.cc and
// analyzer_checkpoint.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

#include "parsers/event.h"

namespace oomtriage::parsers {

// Records after an incident's last signal that still belong to it: AI Toolkit prints the error,
// a result block, then a traceback of up to a few hundred lines ending in the same message.
inline constexpr int64_t kIncidentWindow = 400;
inline constexpr size_t kBinarySampleBytes = 64 * 1024;
inline constexpr size_t kEvidenceTextBytes = 200;

// The evidence line as people read it: no indentation, cut at a character boundary. Writes into
// `out` so that a clue updated on every frame reuses its buffer.
inline void assign_evidence(std::string& out, std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  if (text.size() <= kEvidenceTextBytes) {
    out.assign(text);
    return;
  }
  size_t cut = kEvidenceTextBytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // UTF-8
  out.assign(text.substr(0, cut));
  out.append("\u2026");
}

inline std::string evidence_text(std::string_view text) {
  std::string out;
  assign_evidence(out, text);
  return out;
}

// The traceback frames kept for the incidents to come: the newest `kFrameHistory`.
inline constexpr size_t kFrameHistory = 512;
template <class Clue>
void remember_frame(std::deque<Clue>& frames, Clue frame) {
  frames.push_back(std::move(frame));
  if (frames.size() > kFrameHistory) frames.pop_front();
}

// The trainer said it backs off from the incident's OOM (its back-off line, or a bare "Skipping
// batch" under it): a recovered incident, never merged with another OOM, in `phase` unless its
// own lines named one.
template <class Incident>
void mark_backed_off(Incident& incident, int64_t seq, Phase phase) {
  incident.event.recovered = true;
  incident.own_incident = true;
  incident.backed_off = true;
  incident.last_signal_seq = seq;
  if (incident.signal_phase == Phase::kUnknown) incident.signal_phase = phase;
}

}  // namespace oomtriage::parsers
