// bench_dense_gpu's command line (dense_gpu_bench.cc's header has the usage): its arguments,
// their defaults by mode, and the run's arguments and host as JSON for the result document.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dense_gpu_bench {

struct Args {
  std::string mode = "fits";
  std::vector<int64_t> ns{32768, 57344};
  int64_t nrhs = 1;
  std::string pivot = "row";
  std::optional<uint64_t> ram_budget;  // unset: 1.25 x the matrix (fits, ram) or 4 GiB (ssd)
  std::optional<uint64_t>
      gpu_memory;  // unset: 0 = engine default (fits), 12 GiB (ram), 8 GiB (ssd)
  int reps = 2;
  int dgemm_reps = 5;
  bool persist_factors = false;
  bool records = true;  // DenseSolveOptions::record_progress (persisted factors only)
  // DenseSolveOptions::load_first off: where one device keeps the matrix, A read as the
  // factorization first needs it (the daemon's way), not loaded into RAM first.
  bool stream_a = false;
  int64_t stripe_rows = 0;      // 0 = the planner's S for the run's config
  int64_t meta_stripes = 0;     // S^m; 0 = the planner's
  int64_t elim_j_workers = 0;   // k; 0 = the planner's
  int64_t lookahead_lanes = 0;  // engine.lookahead_lanes; 0 = the planner's
  int64_t early_next = -1;      // engine.early_next; -1 = the planner's
  int64_t upward_lead = -1;     // engine.upward_lead; -1 = the planner's
  int64_t io_threads = 1;       // engine.io_threads
  int64_t gpus = 0;             // devices; 0 = every device of the host
  int64_t panel_sms = 0;        // engine.gpu_panel_sms
  int64_t update_k = 0;         // engine.gpu_update_k
  int64_t panel_blocks = 0;     // engine.gpu_panel_blocks
  // --panel-blocks B,C,..: C.. solved too in every rep, each right after B's (paired in one
  // process, so that their difference is not the runs' drift).
  std::vector<int64_t> panel_blocks_paired;
  int64_t segment_columns = 0;  // engine.segment_columns (S^s); 0 = the planner's
  std::string dir = "/var/tmp/stripesolve-bench-gpu";
  std::string backend = "cuda";
  std::string cusolver_api = "legacy";
  std::optional<uint64_t> disk_bytes;  // unset: 4 GiB in ssd mode, no disk test otherwise
  int64_t queue_depth = 0;             // store.queue_depth; 0 = the store's default
  uint64_t request_bytes = 0;          // store.request_bytes; 0 = the store's default
  std::set<std::string> skip;          // engine, cusolver, dgemm, disk
  std::string trace;                   // prefix of Chrome traces of the best reps ("" = none)
};

// Prints `why` (where not empty) and the usage to stderr, and exits 2.
[[noreturn]] void usage(const std::string& why);
// The arguments, with the mode's defaults filled in; a bad one prints the usage and exits 2.
Args parse_args(int argc, char** argv);
nlohmann::json args_json(const Args& a);
nlohmann::json host_json();  // host name, cores, RAM and the kernel's huge page setting
// "a,b,,c" as {"a", "b", "c"}.
std::vector<std::string> split(const std::string& s);

}  // namespace dense_gpu_bench
