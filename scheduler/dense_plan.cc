#include "scheduler/dense_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "gpu/devices.h"

namespace stripesolve::scheduler {

uint64_t device_budget(const EngineConfig& config, uint64_t free_bytes) {
  const uint64_t cap = free_bytes / 20 * 19;
  if (config.gpu_memory > 0) return std::min(config.gpu_memory, cap);
  return free_bytes / 10 * 9;
}

Result<DryRun> plan_solve(const storage::MatrixStore& store, std::string_view matrix_name,
                          const EngineConfig& config) {
  STRIPESOLVE_ASSIGN_OR_RETURN(storage::MatrixInfo info, store.info(matrix_name));
  DryRun run;
  STRIPESOLVE_ASSIGN_OR_RETURN(ComputeBackend which, resolve_backend(config, &run.warnings));
  EngineConfig c = config;
  c.gpus = 0;
  c.gpu_memory = 0;
  run.backend = "cpu";
  if (which == ComputeBackend::kCuda) {
    const std::vector<gpu::DeviceInfo> all = gpu::list_devices();
    if (all.empty()) return Status::unavailable("the daemon sees no CUDA device");
    const size_t count =
        config.gpus > 0 ? std::min(static_cast<size_t>(config.gpus), all.size()) : all.size();
    run.backend = "cuda";
    for (size_t d = 0; d < count; ++d) {
      const gpu::DeviceInfo& dev = all[d];
      uint64_t budget = device_budget(config, dev.free_memory);
      if (config.gpu_memory == 0)
        budget = std::min(budget, gpu::DeviceBudget::of(dev.index).available());
      c.gpu_memory = c.gpu_memory == 0 ? budget : std::min(c.gpu_memory, budget);
      run.devices += fmt::format("{}{} (device {})", d == 0 ? "" : ", ", dev.name, dev.index);
    }
    c.gpus = static_cast<int64_t>(count);
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(run.plan, plan_dense(info.geometry.n, info.geometry.stripe_rows, c,
                                                    describe_machine(c, info.path_count)));
  return run;
}

}  // namespace stripesolve::scheduler
