// triage/preflight.cc: the estimate, the verdict and the fixes of a pre-flight check.
#include "triage/preflight.h"

#include "triage/spec_from_config.h"

namespace oomtriage::triage {

Preflight preflight_spec(const MemorySpec& spec, uint64_t usable_bytes,
                         const MemoryCorrection& correction) {
  Preflight out;
  out.spec = spec;
  out.estimate = estimate_memory(spec, correction);
  out.usable_bytes = usable_bytes;
  out.verdict = judge(out.estimate, usable_bytes);
  return out;
}

Preflight preflight_config(const parsers::JobConfig& config, uint64_t usable_bytes,
                           const MemoryCorrection& correction) {
  return preflight_spec(spec_from_config(config), usable_bytes, correction);
}

}  // namespace oomtriage::triage
