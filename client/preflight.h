// Checks the client makes before it submits, so that a mistake it can see costs no job: the
// shapes and element types of the .npy files it passes, and what it can ask the daemon first
// (the matrix's order, whether the daemon has a GPU). The daemon's own checks stay the
// authority: these only report the same mistakes earlier, with the option named.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "client/commands.h"
#include "client/connection.h"
#include "client/tridiag_request.h"
#include "protocol/npy.h"

namespace stripesolve::client {

// The header of the .npy at `path` (read from its start; the data is not read); errors name
// the option ("--rhs file 'b.npy': npy: ...").
Result<protocol::NpyHeader> read_npy_header(const std::string& path, std::string_view option);

// The four arrays of a tridiagonal batch: float elements, one shape for all four, at most two
// dimensions; with a --sizes list, 1-D arrays as long as the sizes' sum.
Status check_tridiag_files(const TridiagRequest& request);

// A dense solve: the matrix exists (asked with the `matrices` query, which makes no job) and
// --rhs, when given, is a float (n) or (n, k) array for its order n.
Status check_solve(Connection& connection, const SolveRequest& request);

// matrix import: the file is a square float64 or float32 array (its header only; NaN and Inf
// in the data are the daemon's to find, as it reads them).
Status check_import_file(const std::string& path);

// --device gpu: the daemon has a GPU (asked with daemon_status).
Status check_gpu_requested(Connection& connection, std::string_view device);

}  // namespace stripesolve::client
