// The input arrays of a tridiag_solve job (daemon/tridiag_jobs.h), gathered at the edge: the
// uploads the job names are taken from the store, the headers of the files it passed are read
// (their data is read later, by the job), and a ragged batch's sizes are read, bounded.
// Runs on the job's thread. Every upload the job names leaves the store, even when the job then
// fails.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "daemon/job_manager.h"
#include "daemon/uploads.h"
#include "protocol/npy.h"

namespace stripesolve::daemon {

// The job's four arrays, in the order of tridiag::BatchArrays.
inline constexpr std::array<std::string_view, 4> kTridiagArrays = {"dl", "d", "du", "rhs"};

// One input array of a job: an upload's image, or a file the client passed (read in place).
struct TridiagSource {
  std::string bytes;  // the upload, or empty
  int fd = -1;        // the passed file, or -1
  protocol::NpyHeader header;
};

// The input arrays of a job, their headers and the ragged sizes.
struct TridiagInputs {
  std::array<TridiagSource, 4> arrays;
  std::optional<std::vector<int64_t>> sizes;
};

// Takes every upload the job names before checking any of them, so that none is left behind in
// the store (holding memory until it expires) when the job fails. Passed files are only looked
// at here (their headers); their data is read in the load phase.
Result<TridiagInputs> take_tridiag_inputs(const JobContext& ctx, UploadStore& uploads,
                                          uint64_t max_bytes);

}  // namespace stripesolve::daemon
