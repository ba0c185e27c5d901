// tests/parsers/real_logs_test.cc
//
// Scores the analyzer on labelled real crash logs from public issue threads (tests/support/
// corpus_score.h): ../shared/corpus/real-logs must score 100% on every field; the held-out
// rounds in ../shared/corpus/real-logs-2 and the project's own blind-labelled corpus in
// tests/testdata/real-logs-blind print their tables and may miss only what their lists of known
// misses name, each with its class (docs/corpus.md). Skips cleanly when a shared folder is absent.
#include <doctest/doctest.h>

#include <filesystem>

#include "tests/support/corpus_score.h"
#include "tests/support/skip.h"

namespace fs = std::filesystem;
using namespace oomtriage::testing;

namespace {

fs::path shared_corpus(const char* name) {
  return fs::path(OOMTRIAGE_SOURCE_DIR) / ".." / "shared" / "corpus" / name;
}

// What the analyzer still gets wrong on ../shared/corpus/real-logs-2, by class.
const std::vector<KnownMiss> kRealLogs2Misses = {
    {"028", "figures", "a UI's error table names the device as cuda:0, not GPU 0"},
    {"028", "phase (log evidence)", "a UI node's type (ZImageLoader) that names no stage word"},
    {"041", "phase (log evidence)",
     "a quantizer's observer forward (AMD Quark) not in the lexicon"},
    {"047", "figures", "a device index taken from a hint line the label does not count"},
    {"049", "phase (log evidence)",
     "a kill after a trainer's own save line ('Summoning checkpoint')"},
    {"049", "phase not wrong", "the same: train_step from the bar before the save line"},
    {"049", "step", "Lightning's global_step postfix (208) against the bar's count (209)"},
    {"071", "figures", "XPU's old format prints no allocated figure where the label reads 0"},
    {"073", "figures", "CNTK names no device; a hint line gives 0"},
    {"073", "phase (log evidence)",
     "a non-Python trainer's announcement ('Starting minibatch loop')"},
    {"075", "figures", "a UI's markdown error report names the device as cuda:0"},
    {"076", "step", "a save name's second number (-save-50-2-0) as the step"},
    {"078", "phase (log evidence)", "a pipeline's failure banner after the error names the stage"},
    {"084", "phase (log evidence)", "a UI's 'Step 0: Training failed:' line after the error"},
    {"084", "step", "the same line's step"},
    {"085", "figures", "a message lower-cased and quoted by a UI, old format"},
    {"097", "phase (log evidence)", "an epoch bar with a vram postfix but no loss"},
    {"098", "phase (log evidence)", "a rich traceback wrapped mid-frame (Module.to cut)"},
    {"108", "figures", "a message cut before its free figure"},
    {"116", "phase (log evidence)", "pipe.to(device) as a source line under an inference frame"},
    {"116", "phase not wrong", "the same: the frame's 'infer' names sampling"},
    {"117", "phase (log evidence)", "a UI node bar (KSampler 0/20) with no stage word in the log"},
    {"120", "phase (log evidence)", "a kill after training metrics lines with no counter"},
    {"122", "phase (log evidence)", "a Java stack trace (DJL/MXNet)"},
};

// What it still gets wrong on tests/testdata/real-logs-blind, by class.
const std::vector<KnownMiss> kBlindMisses = {
    {"203", "phase (log evidence)",
     "a DPO log-prob statement (torch.gather of logits) as the only frame"},
    {"210", "phase (log evidence)",
     "an OOM inside FSDP's clone() warning while saving a state dict"},
    {"244", "phase (log evidence)", "another rank's traceback (load_model) after this rank's OOM"},
    {"244", "phase not wrong", "the same: this rank's own frames say training"},
    {"246", "phase (log evidence)", "an OOM inside FSDP's clone() warning after the loss dicts"},
    {"246", "phase not wrong", "the same: the loss dicts before it say training"},
    {"304", "phase (log evidence)", "a model's own engine.to(device) under a pipeline frame"},
    {"305", "phase (log evidence)", "a video pipeline's conv3d with the pipeline frame cut"},
    {"306", "phase (log evidence)", "a model built on the device (build_encoder) in a notebook"},
    {"317", "phase (log evidence)", "fastai's lr_find(), a short training run"},
    {"319", "phase (log evidence)", "mmdet's evaluation hook after an epoch"},
    {"324", "figures", "a notebook's message hard-wrapped inside its sizes"},
    {"408", "figures", "THCudaCheck names the device on a line the excerpt cut"},
    {"432", "phase (log evidence)", "fairseq's recovery followed by a second, fatal OOM"},
    {"435", "figures", "the figures are on a caught OOM; the fatal one (bad_alloc) has none"},
    {"446", "step", "YOLOX's per-epoch iteration in a later epoch"},
    {"447", "step", "YOLOX's per-epoch iteration in a later epoch"},
    {"448", "kind", "NCCL's 'Cuda failure 2 out of memory' read as an NCCL OOM"},
    {"448", "step", "Megatron's 'current_iteration to 0'"},
    {"523", "phase (log evidence)", "a kill after a word-vector load bar that finished"},
    {"525", "figures", "the memory summary's device ID read as the GPU; the label has none"},
    {"526", "step", "a step line flushed after Slurm's kill"},
    {"531", "figures", "a message cut inside its total"},
    {"532", "figures", "a device printed as 'GPU O' (letter O)"},
    {"532", "step", "a per-epoch bar in a later epoch, cut mid-count"},
    {"537", "phase (log evidence)",
     "ignite's bar drawn after the error with its counter in the description"},
    {"537", "step", "the same"},
    {"554", "phase (log evidence)", "a validation bar described in brackets, glued to THCudaCheck"},
};

}  // namespace

TEST_CASE("real crash logs from issue threads scan to their labels") {
  const fs::path corpus = shared_corpus("real-logs");
  if (!fs::is_directory(corpus)) {
    OOMTRIAGE_SKIP(corpus.string() + " is absent");
  }
  const CorpusScore scores = score_corpus(corpus);
  MESSAGE("\n" << scores.table());
  REQUIRE(scores.cases > 0);
  for (const auto& entry : scores.fields) {
    const auto& field = entry.first;
    CAPTURE(field);
    CHECK(entry.second.right == entry.second.total);
  }
}

TEST_CASE("the blind-labelled real logs of tests/testdata miss only their known misses") {
  const fs::path corpus = fs::path(OOMTRIAGE_SOURCE_DIR) / "tests" / "testdata" / "real-logs-blind";
  REQUIRE(fs::is_directory(corpus));
  const CorpusScore scores = score_corpus(corpus);
  MESSAGE("\n" << scores.table());
  CHECK(scores.cases >= 150);
  check_known_misses(scores, kBlindMisses);
}

TEST_CASE("the held-out real logs of earlier rounds miss only their known misses") {
  const fs::path corpus = shared_corpus("real-logs-2");
  if (!fs::is_directory(corpus)) {
    OOMTRIAGE_SKIP(corpus.string() + " is absent");
  }
  const CorpusScore scores = score_corpus(corpus);
  MESSAGE("\n" << scores.table());
  REQUIRE(scores.cases > 0);
  check_known_misses(scores, kRealLogs2Misses);
}
