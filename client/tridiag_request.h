// The client side of tridiag_solve jobs (daemon/tridiag_jobs.h, docs/protocol.md): reads the
// four .npy arrays (and ragged sizes) named on the command line, uploads them and builds the job
// spec. Every file is read before anything is uploaded, so a missing file costs no upload.
// Shapes, dtypes and values are the daemon's to check (it names the array and index).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "client/connection.h"

namespace stripesolve::client {

struct TridiagRequest {
  std::string dl_path, d_path, du_path, rhs_path;
  // Empty (not ragged), an int64 .npy path, or a comma-separated list such as "3,5,2".
  std::string sizes;
  std::string layout = "strided";  // strided or interleaved
  std::string algorithm = "auto";
  bool unstable_ok = false;
  std::string device = "auto";  // auto, cpu or gpu
};

// "3,5,2" -> {3, 5, 2}. Errors name the bad item: "--sizes: '0' is not a positive integer".
Result<std::vector<int64_t>> parse_sizes_list(std::string_view text);

// Uploads the arrays and returns the tridiag_solve job spec.
Result<nlohmann::json> build_tridiag_job(Connection& conn, const TridiagRequest& request);

}  // namespace stripesolve::client
