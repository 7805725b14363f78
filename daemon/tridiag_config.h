// The `tridiag:` section of stripesolved.yaml (docs/config.md): limits and resources of
// tridiag_solve jobs (daemon/tridiag_jobs.h). It lives in daemon/ because the limits are the
// daemon's policy; tridiag/ itself takes everything as call options.
#pragma once

#include <cstdint>
#include <vector>

#include "base/units.h"

namespace stripesolve {
class ConfigMap;
}

namespace stripesolve::daemon {

struct TridiagJobConfig {
  // The four input arrays of one job as float64 (32 bytes per unknown). The daemon holds the
  // inputs and the solution in RAM for the job, about 1.25x this at the peak.
  uint64_t max_bytes = 2 * kGiB;
  int64_t threads = 0;      // CPU threads per job; 0 = all cores
  uint64_t gpu_memory = 0;  // device bytes per job; 0 = 90% of the free device memory
  // The GPUs batches are shared by: engine.devices, else the first engine.gpus (0: all); the
  // daemon copies them from its engine section (they are not keys of this one).
  std::vector<int64_t> devices;
  int64_t gpus = 0;
};

// Reads a `tridiag:` section (throws ConfigError, see base/config.h).
void parse_tridiag_job_config(ConfigMap& map, TridiagJobConfig& config);

}  // namespace stripesolve::daemon
