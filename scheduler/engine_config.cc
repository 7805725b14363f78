// The engine's configuration (scheduler/planner.h): the backend's name and its resolution
// against the machine, the `engine:` section's keys, and the machine the planner plans for. The
// planner itself is in planner.cc.
#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "backend/device_engine.h"
#include "base/config.h"
#include "base/units.h"
#include "gpu/devices.h"
#include "scheduler/planner.h"

namespace stripesolve::scheduler {

std::string_view compute_backend_name(ComputeBackend b) {
  switch (b) {
    case ComputeBackend::kAuto:
      return "auto";
    case ComputeBackend::kCpu:
      return "cpu";
    case ComputeBackend::kCuda:
      return "cuda";
  }
  return "?";
}

Result<ComputeBackend> parse_compute_backend(std::string_view name) {
  for (ComputeBackend b : {ComputeBackend::kAuto, ComputeBackend::kCpu, ComputeBackend::kCuda}) {
    if (compute_backend_name(b) == name) return b;
  }
  return Status::invalid_argument("unknown backend '" + std::string(name) +
                                  "' (expected auto, cpu or cuda)");
}

Result<ComputeBackend> resolve_backend(const EngineConfig& c, std::vector<std::string>* warnings) {
  const int devices = gpu::device_count();
  if (c.backend == ComputeBackend::kCuda && devices == 0) {
    return Status::failed_precondition(
        gpu::built_with_cuda()
            ? "engine.backend is cuda but no CUDA device is visible (driver, CUDA_VISIBLE_DEVICES?)"
            : "engine.backend is cuda but this build has no CUDA support (STRIPESOLVE_HAVE_CUDA "
              "off); use auto or cpu");
  }
  const ComputeBackend chosen = c.backend == ComputeBackend::kAuto
                                    ? (devices > 0 ? ComputeBackend::kCuda : ComputeBackend::kCpu)
                                    : c.backend;
  if (warnings != nullptr && chosen == ComputeBackend::kCpu &&
      (c.gpu_memory > 0 || c.gpus > 0 || !c.devices.empty())) {
    warnings->push_back(devices == 0
                            ? "engine.gpus / engine.devices / engine.gpu_memory are set but this "
                              "host has no CUDA device: they are ignored, the CPU backend runs"
                            : "engine.gpus / engine.devices / engine.gpu_memory are set but "
                              "engine.backend is cpu: they are ignored");
  }
  if (chosen == ComputeBackend::kCuda) {
    // A device without the toolkit's cuBLAS / cuSOLVER (opened at run time) cannot compute.
    if (const Status libraries = backend::DeviceEngine::libraries_ready(); !libraries.is_ok()) {
      if (c.backend == ComputeBackend::kCuda) {
        return Status::failed_precondition("engine.backend is cuda, but " + libraries.message());
      }
      if (warnings != nullptr) {
        warnings->push_back(libraries.message() + ": the CPU backend runs");
      }
      return ComputeBackend::kCpu;
    }
    STRIPESOLVE_ASSIGN_OR_RETURN(const std::vector<int> used,
                                 gpu::choose_devices(c.devices, c.gpus, devices));
    // Every device the jobs use hit a sticky CUDA error (gpu/devices.h): none can run a job
    // until the daemon restarts.
    if (!used.empty() && gpu::without_failed(used).empty()) {
      const std::string failed = gpu::describe_failures(used);
      if (c.backend == ComputeBackend::kCuda) {
        return Status::failed_precondition(
            "engine.backend is cuda, but every GPU the jobs use has failed (" + failed +
            "); restart the daemon to use them again, or set engine.backend to auto or cpu");
      }
      if (warnings != nullptr) {
        warnings->push_back("every GPU the jobs use has failed (" + failed +
                            "): the CPU backend runs until the daemon restarts");
      }
      return ComputeBackend::kCpu;
    }
    if (warnings != nullptr && gpu::without_failed(used).size() < used.size()) {
      warnings->push_back("leaving out the failed GPU(s): " + gpu::describe_failures(used));
    }
  }
  return chosen;
}

void parse_engine_config(ConfigMap& map, EngineConfig& c) {
  std::string backend(compute_backend_name(c.backend));
  map.get("backend", backend);
  auto parsed = parse_compute_backend(backend);
  if (!parsed.is_ok()) throw ConfigError("engine.backend: " + parsed.status().message());
  c.backend = *parsed;
  map.get_bytes("ram_budget", c.ram_budget, 64 * kKiB);
  map.get("stripe_rows", c.stripe_rows, 0, 1 << 20);
  map.get("substripe_rows", c.substripe_rows, 0, 1 << 20);
  map.get("segment_columns", c.segment_columns, 0, int64_t{1} << 30);
  map.get("meta_stripes", c.meta_stripes, 0, 1 << 20);
  map.get("round_robin_levels", c.round_robin_levels, 0, 1 << 16);
  map.get("elim_j_workers", c.elim_j_workers, 0, 256);
  map.get("lookahead_lanes", c.lookahead_lanes, 0, 8);
  map.get("cores", c.cores, 0, 1 << 16);
  map.get("critical_threads", c.critical_threads, -1, 1024);
  map.get("io_threads", c.io_threads, 1, 8);
  map.get("huge_pages", c.huge_pages);
  map.get("upward_lead", c.upward_lead, -1, int64_t{1} << 30);
  map.get("early_next", c.early_next, -1, 1 << 20);
  map.get_bytes("gpu_memory", c.gpu_memory);
  map.get("gpus", c.gpus, 0, 64);
  map.get("devices", c.devices, 0, 63);
  if (!c.devices.empty() && c.gpus > 0 && c.gpus != static_cast<int64_t>(c.devices.size())) {
    throw ConfigError(map.where("gpus") + ": " + std::to_string(c.gpus) + " GPUs, but " +
                      "engine.devices lists " + std::to_string(c.devices.size()) +
                      "; set one of them");
  }
  map.get("gpu_panel_sms", c.gpu_panel_sms, 0, 1024);
  map.get("gpu_update_k", c.gpu_update_k, 0, int64_t{1} << 20);
  map.get("gpu_panel_blocks", c.gpu_panel_blocks, 0, 64);
  map.get("assumed_gflops", c.assumed_gflops, 0.0, 1e9);
  map.get("ssd_bytes_per_second", c.ssd_bytes_per_second, 0.0, 1e15);
  map.get("pcie_bytes_per_second", c.pcie_bytes_per_second, 0.0, 1e15);
  map.get("progress_interval_seconds", c.progress_interval_seconds, 0.01, 3600.0);
  map.finish();
}

Machine describe_machine(const EngineConfig& c, int64_t paths) {
  Machine m;
  m.ram_budget = c.ram_budget;
  m.paths = std::max<int64_t>(1, paths);
  m.cores = c.cores > 0 ? c.cores : std::max<int64_t>(1, std::thread::hardware_concurrency());
  m.gpu_memory = c.gpu_memory;
  m.gpus = c.gpu_memory > 0 ? std::max<int64_t>(1, c.gpus) : 0;
  // A GPU tier runs at about the device's DGEMM rate (55-63 TFLOP/s FP64 on an H100).
  m.gflops = c.assumed_gflops > 0 ? c.assumed_gflops
             : m.gpus > 0         ? 50e3 * static_cast<double>(m.gpus)
                                  : 15.0 * static_cast<double>(m.cores);
  m.ssd_bytes_per_second =
      c.ssd_bytes_per_second > 0 ? c.ssd_bytes_per_second : 1e9 * static_cast<double>(m.paths);
  m.pcie_bytes_per_second =
      (c.pcie_bytes_per_second > 0 ? c.pcie_bytes_per_second : 50e9) * static_cast<double>(m.gpus);
  return m;
}

}  // namespace stripesolve::scheduler
