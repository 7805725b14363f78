// The plan a dense solve of a stored matrix would follow now, without running it: the client's
// `stripesolve solve MATRIX --dry-run` (issues 16 and 19: "the dry run prints the plan", each
// strategy's time bound and what bounds it, compute, disk or PCIe).
//
// The devices and their budget are found as a solve finds them (dense_solve.cc): engine.devices
// or the first engine.gpus devices (0: all), each giving engine.gpu_memory capped at 95% of its
// free memory, or 90% of its free memory and no more than other jobs leave it; the smallest of them
// is the plan's. A solve started later may find other figures (another job may have taken or freed
// memory).
//
// Thread-safety: plan_solve may be called from any thread (it reads the store's manifest and
// the devices' free memory; nothing is reserved).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "scheduler/planner.h"
#include "storage/matrix_store.h"

namespace stripesolve::scheduler {

struct DryRun {
  std::string backend;                // "cpu" or "cuda"
  std::string devices;                // "NVIDIA H100 ... (device 0)", one per device; "" on the CPU
  std::vector<std::string> warnings;  // resolve_backend's (e.g. engine.gpus set without a GPU)
  Plan plan;
};

// `factors_kept`: the solve would keep its factors (stored, in place, or gepp's); false: its
// forecasts write only what the cache spills (plan_dense).
Result<DryRun> plan_solve(const storage::MatrixStore& store, std::string_view matrix_name,
                          const EngineConfig& config, bool factors_kept = true);

// A solve's device budget on one device: engine.gpu_memory capped at 95% of `free_bytes`, or 90%
// of `free_bytes` when it is 0.
uint64_t device_budget(const EngineConfig& config, uint64_t free_bytes);

}  // namespace stripesolve::scheduler
