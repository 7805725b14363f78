// Engine configuration and the planner of the out-of-core dense solve (002 §9.7, Table 1,
// Eqs 12-20, updated for today's hardware).
//
// The planner turns (matrix order, stored stripe height, EngineConfig, Machine) into the program
// parameters of Table 1: stripe height S, substripe height S', segment length S^s, meta-stripe size
// S^m, round-robin levels N_RRlevel and the number k of elim.J workers. Every value can be pinned
// in EngineConfig (non-zero = pinned); the others follow these rules:
//   - S^m: N when the cache holds the whole matrix (one meta-stripe: the basic order with its
//     look-ahead, no sweep boundaries); else the largest meta-stripe for which the cache holds
//     2 S^m + 2 full stripes ("peak performance", 002 §8.4.3, Eq 18), at least 1. If even
//     S^m + 2 stripes do not fit (Eq 17), the plan says so: the solve still runs while S^m + 1
//     stripes fit (stuck I stripes plus one J) but it is I/O bound.
//   - S (for new matrices; a stored matrix keeps its own): 1024 on the CPU backend (GEMM inner
//     dimension large enough for OpenBLAS, small enough that <II> stays cheap), reduced until the
//     cache holds S^m + 2 = 4 full stripes.
//   - S' = S/8 clamped to [32, 256] (002 used S/10; the substripe optimisation of 002 §4 wants
//     the dtrsm/dgemm inside <II> to stay blocked).
//   - S^s (Eq 15): GPU memory / (1 + 2k) / (8 S) columns with a GPU; 0 (whole part) on the CPU.
//   - N_RRlevel (Eq 20): ceil(Q n / sqrt(NV_LPC)) with Q = 4, and at least the bound of Eq 19.
//   - k (Eqs 13-14): with a GPU, 2 per GPU (002); on the CPU, one per core (elim.I is short and
//     the master/I-O/DSR roles mostly sleep).
// It also predicts the SSD traffic of each strategy (scheduler/strategy.h) and a time bound
// max(flops / rate, SSD bytes / bandwidth) for the dry run.
//
// Thread-safety: pure functions on values. Files: planner.cc (the plan, its text and JSON),
// engine_config.cc (the backend, the `engine:` keys, the machine).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "scheduler/strategy.h"

namespace stripesolve {
class ConfigMap;
}

namespace stripesolve::scheduler {

// Where the dense arithmetic runs (`engine.backend`): kAuto = the GPU tier when a CUDA device is
// present, else the CPU; kCuda without a device is a start-up error (check_engine_backend).
enum class ComputeBackend { kAuto, kCpu, kCuda };

std::string_view compute_backend_name(ComputeBackend b);  // "auto", "cpu", "cuda"
Result<ComputeBackend> parse_compute_backend(std::string_view name);

struct EngineConfig {
  ComputeBackend backend = ComputeBackend::kAuto;
  uint64_t ram_budget = 4ull << 30;  // bytes of the stripe cache arena (NV_LPC)
  int64_t stripe_rows = 0;           // S for new matrices; 0 = planner
  int64_t substripe_rows = 0;        // S'; 0 = planner
  int64_t segment_columns = 0;       // S^s; 0 = planner (whole part on the CPU)
  int64_t meta_stripes = 0;          // S^m; 0 = planner
  int64_t round_robin_levels = 0;    // N_RRlevel for new matrices; 0 = planner
  int64_t elim_j_workers = 0;        // k; 0 = planner
  int64_t lookahead_lanes = 0;       // GPU tier: look-ahead lanes per device; 0 = planner (1)
  int64_t cores = 0;                 // 0 = std::thread::hardware_concurrency()
  int64_t critical_threads = -1;     // CPU tier's critical-path helpers; -1 = planner, 0 = none
  int64_t io_threads = 1;            // I/O role threads (transfers side by side); 1..8
  // The RAM cache in transparent huge pages when it is 64 MiB or more (cache/arena.h).
  bool huge_pages = true;
  // meta_zigzag's upward sweeps visit the next meta-stripe after this many stripes (strategy.h);
  // -1 = planner; a value of at least the stripe count keeps 002's order (the next one last).
  int64_t upward_lead = -1;
  // The GPU tier: the next meta-stripe's first stripes updated inside the chain, stripe by
  // stripe (strategy.h, make_tasks' early_next); -1 = planner (1 on the GPU tier when the RAM
  // cache holds the matrix, else 0).
  int64_t early_next = -1;
  uint64_t gpu_memory = 0;  // device bytes per GPU a dense solve may use; 0 = 90% of free
  int64_t gpus = 0;         // GPUs the jobs use (devices 0 .. gpus-1); 0 = all
  // The GPUs by CUDA ordinal, in place of gpus (both set: they must agree in number); empty =
  // devices 0 .. gpus-1. The daemon's tridiagonal batches use the same devices.
  std::vector<int64_t> devices;
  int64_t gpu_panel_sms = 0;         // SMs the J updates leave to elim.I (DeviceEngineOptions)
  int64_t gpu_update_k = 0;          // depth of each J-update GEMM on a GPU (DeviceEngineOptions)
  int64_t gpu_panel_blocks = 0;      // blocks of the one-launch panel; 0 = getrf (the same)
  double assumed_gflops = 0;         // for the time bound; 0 = 15 GFLOP/s per core (CPU)
  double ssd_bytes_per_second = 0;   // for the time bound; 0 = 1 GB/s per path
  double pcie_bytes_per_second = 0;  // for the time bound, host <-> device each way, per GPU;
                                     // 0 = 50 GB/s (pinned copies on an H100 host: 55)
  double progress_interval_seconds = 0.5;  // rate limit of the progress callback
};

// Reads an `engine:` section: backend, ram_budget, stripe_rows, substripe_rows, segment_columns,
// meta_stripes, round_robin_levels, elim_j_workers, lookahead_lanes, cores, critical_threads,
// io_threads, huge_pages, early_next, upward_lead, gpu_memory, gpus, devices, gpu_panel_sms,
// gpu_update_k, gpu_panel_blocks, assumed_gflops, ssd_bytes_per_second, pcie_bytes_per_second,
// progress_interval_seconds. Throws ConfigError (base/config.h).
void parse_engine_config(ConfigMap& map, EngineConfig& config);

struct Machine {
  uint64_t ram_budget = 0;
  int64_t paths = 1;  // SSD paths of the store
  int64_t cores = 1;
  uint64_t gpu_memory = 0;
  int64_t gpus = 0;
  double gflops = 0;                 // sustained dgemm rate of the backend
  double ssd_bytes_per_second = 0;   // of all paths together
  double pcie_bytes_per_second = 0;  // host -> device of all GPUs together (0: no GPU)
};

// The machine as the config describes it, filling the unset values from the host. With a
// resolved GPU backend (gpus > 0, gpu_memory the device budget) the rate is the device's.
Machine describe_machine(const EngineConfig& config, int64_t paths);

// The backend a solve will use on this host: kCpu or kCuda. kCuda asked for on a host without a
// device is kFailedPrecondition ("engine.backend is cuda but ..."); kCuda with an
// engine.devices entry the host lacks is kInvalidArgument (gpu::choose_devices). `warnings`
// (optional) gets what the caller should log: GPU keys set on a host that will not use a GPU.
Result<ComputeBackend> resolve_backend(const EngineConfig& config,
                                       std::vector<std::string>* warnings = nullptr);

struct StrategyForecast {
  Strategy strategy = Strategy::kMetaZigzag;
  bool feasible = false;  // false: no forecast, for `why`
  // Why there is none: the budget cannot hold the working set, or the strategy's schedule is
  // over check_schedule_fits' bound (a solve refuses it; its replay would take as long as the
  // tasks are many).
  std::string why;
  Traffic traffic;
  // max(flops / the machine's rate, SSD bytes / the disks' rate, host -> device bytes / PCIe),
  // and which of the three it is: "compute", "disk" or "PCIe".
  double time_bound_seconds = 0;
  std::string limited_by;
};

struct Plan {
  int64_t n = 0;
  int64_t stripe_rows = 0;         // S
  int64_t stripes = 0;             // N
  int64_t substripe_rows = 0;      // S'
  int64_t segment_columns = 0;     // S^s (0 = whole part)
  int64_t meta_stripes = 0;        // S^m
  int64_t round_robin_levels = 0;  // N_RRlevel
  int64_t elim_j_workers = 0;      // k
  int64_t lookahead_workers = 0;   // elim.J lanes for the critical path only (GPU tier: 1)
  int64_t early_next = 0;          // make_tasks' early_next (GPU tier, A cached: 1)
  int64_t critical_threads = 0;    // CPU tier: helpers of elim.I and the critical updates
  bool split_sweeps = false;       // CPU tier out of core: every J update over the helpers too
  int64_t upward_lead = -1;        // meta_zigzag's upward sweeps (strategy.h); -1: next one last
  uint64_t stripe_bytes = 0;       // one full stripe, 8 S n
  uint64_t ram_budget = 0;
  double flops = 0;                  // 2/3 n^3
  uint64_t gpu_memory = 0;           // device budget of the GPU tier (0: CPU backend)
  uint64_t device_bytes_needed = 0;  // the GPU tier's working set (8b)
  bool device_resident = false;      // the whole matrix fits the device budget beside it
  // One device whose budget holds the matrix twice beside the working set: a copy of A stays on
  // the device for the residual (the check of a solve whose factors stay there without a second
  // read of A from the disks), made by the load where the RAM cache holds A, else as the
  // factorization first reads each stripe.
  bool device_keeps_original = false;
  // Without that copy, a RAM budget that holds A twice: the copy stays in the RAM cache's arena
  // instead (the GPU tier's load or the CPU tier's first reads fill it), and the residual runs
  // on the host's cores (ram_original.h).
  bool ram_keeps_original = false;
  // Host -> device bytes of the GPU tier's factorization (the same again comes back): A once
  // when it stays on the device (twice where the copy of A for the residual comes with the
  // factorization's reads); else, per meta-stripe, its stripes and every J after it.
  uint64_t pcie_bytes = 0;
  std::vector<std::string> notes;           // what was pinned, what limits the plan
  std::vector<StrategyForecast> forecasts;  // basic, zigzag, meta_zigzag
};

// Device memory cuBLAS / cuSOLVER keep of their own per handle, out of a device budget of
// `budget` bytes: the GPU tier's pool leaves it out, and the planner counts it.
inline uint64_t device_library_slack(uint64_t budget) {
  return std::min<uint64_t>(256ull << 20, budget / 8);
}

// Rows of the diagonal blocks of a range's U that the GPU tier inverts once for all the range's
// updates (backend::DeviceUpdate::u_inverse).
inline constexpr int64_t kInverseBlockRows = 512;

// At most the device bytes of the U block of a range of `rows` rows of an n x n matrix: its U
// rows and the inverses of their diagonal blocks. The planner and the GPU tier's pool both size
// by it.
inline uint64_t u_block_bytes_bound(int64_t n, int64_t rows) {
  return 8ull * static_cast<uint64_t>(rows) * static_cast<uint64_t>(n + kInverseBlockRows);
}

// `stored_stripe_rows`: S of the stored matrix (0 = choose one for a new matrix). Memory O(N):
// the forecasts replay each strategy's tasks as they are generated; time O(N^2) tasks.
// `factors_kept`: the solve stores its factors (or factors in place); false: its forecasts write
// only what the cache spills (TrafficModel::factors_kept).
Result<Plan> plan_dense(int64_t n, int64_t stored_stripe_rows, const EngineConfig& config,
                        const Machine& machine, bool factors_kept = true);

// S of plan_dense() for a new matrix of order n (>= 1), alone: engine.stripe_rows when pinned,
// else the rule above. O(log S) time, no allocation, so that a request can be checked (free
// space, geometry) before anything in proportion to its size is planned.
int64_t new_matrix_stripe_rows(int64_t n, const EngineConfig& config, const Machine& machine);

// The factorization keeps its task list (make_tasks) and a few flags a task in RAM, beside the
// stripe cache: N (N + 1) / 2 tasks for basic and zigzag, about N^2 / (2 S^m) for meta_zigzag.
inline constexpr uint64_t kScheduleBytesPerTask = sizeof(Task) + 8;
// kResourceExhausted, naming `what` (e.g. "matrix 'A'"), when that bookkeeping for `strategy`
// under `plan` (early_next as the factorization takes it) is more than a quarter of
// plan.ram_budget: a matrix stored in very many thin stripes, whose height was fixed when it was
// created or imported. The message names the stripes, the bytes, and a stripe height that fits.
// Time: O(1) where N (N + 1) / 2 tasks fit, else at most the tasks the limit allows.
// schedule_fits: the same test without the message (the planner's forecasts).
bool schedule_fits(const Plan& plan, Strategy strategy, int64_t early_next);
Status check_schedule_fits(const Plan& plan, Strategy strategy, int64_t early_next,
                           std::string_view what);

std::string plan_to_text(const Plan& plan);
std::string plan_to_json(const Plan& plan);

}  // namespace stripesolve::scheduler
