// The client side of tridiag_solve jobs (daemon/tridiag_jobs.h, docs/protocol.md): opens the
// four .npy arrays (and ragged sizes) named on the command line and creates the output's
// temporary, all before anything is sent (a missing file or an unwritable --out costs nothing),
// and builds the job spec naming their descriptors. The daemon reads the arrays and writes the
// solution through them. Shapes, dtypes and values are the daemon's to check (it names the
// array and index).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "client/commands.h"

namespace stripesolve::client {

struct TridiagRequest {
  std::string dl_path, d_path, du_path, rhs_path;
  // Empty (not ragged), an int64 .npy path, or a comma-separated list such as "3,5,2".
  std::string sizes;
  std::string layout = "strided";  // strided or interleaved
  std::string algorithm = "auto";
  bool unstable_ok = false;
  bool fallback = false;        // an explicit unpivoted algorithm falls back to gepp where it fails
  std::string device = "auto";  // auto, cpu or gpu
  std::string out_path;  // the solution's .npy, written by the daemon; empty: kept for `result`
};

// "3,5,2" -> {3, 5, 2}. Errors name the bad item: "--sizes: '0' is not a positive integer".
Result<std::vector<int64_t>> parse_sizes_list(std::string_view text);

// The tridiag_solve job with its files.
Result<JobRequest> build_tridiag_job(const TridiagRequest& request);

}  // namespace stripesolve::client
