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
                          const EngineConfig& config, bool factors_kept) {
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
    STRIPESOLVE_ASSIGN_OR_RETURN(
        const std::vector<int> listed,
        gpu::choose_devices(config.devices, config.gpus, static_cast<int>(all.size())));
    // As solve_dense: the failed devices left out (resolve_backend made sure one is left, and
    // warned).
    const std::vector<int> chosen = gpu::without_failed(listed);
    run.backend = "cuda";
    for (const int d : chosen) {
      const gpu::DeviceInfo& dev = all[static_cast<size_t>(d)];
      uint64_t budget = device_budget(config, dev.free_memory);
      if (config.gpu_memory == 0)
        budget = std::min(budget, gpu::DeviceBudget::of(dev.index).available());
      c.gpu_memory = c.gpu_memory == 0 ? budget : std::min(c.gpu_memory, budget);
      run.devices +=
          fmt::format("{}{} (device {})", run.devices.empty() ? "" : ", ", dev.name, dev.index);
    }
    c.gpus = static_cast<int64_t>(chosen.size());
    c.devices.clear();
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(run.plan,
                               plan_dense(info.geometry.n, info.geometry.stripe_rows, c,
                                          describe_machine(c, info.path_count), factors_kept));
  // What a solve by the default strategy would refuse (solve_once checks the one it is given).
  const Status schedule = check_schedule_fits(run.plan, Strategy::kMetaZigzag,
                                              run.backend == "cuda" ? run.plan.early_next : 0,
                                              "matrix '" + std::string(matrix_name) + "'");
  if (!schedule.is_ok()) run.warnings.push_back(schedule.message());
  return run;
}

}  // namespace stripesolve::scheduler
