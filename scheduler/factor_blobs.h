// What a stored factor keeps beside its parts, in two blobs of the factor object
// (docs/storage-format.md): `pivots`, every stripe's row swaps (u64 count, then per stripe a u64
// length and stripe::serialize_pivots' bytes, little-endian), and `max_abs_u`, max|U| of the
// factorization (8 bytes, a little-endian double) for the pivot growth of later solves that reuse
// the factor. Written once, before the factor is committed; read when a solve reuses it.
// Thread-safety: as the factor object's write_blob/read_blob.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "storage/striped_matrix.h"
#include "stripe/stripe_ops.h"

namespace stripesolve::scheduler {

Status write_pivots(storage::StripedMatrix& factor,
                    const std::vector<stripe::StripePivots>& pivots);

// The pivots of the factor's `stripes` stripes; a blob that does not hold exactly that many is
// corruption, named after factor `name`.
Result<std::vector<stripe::StripePivots>> read_pivots(const storage::StripedMatrix& factor,
                                                      int64_t stripes, const std::string& name);

// Records max|U|; -1 (not tracked) writes nothing.
Status write_max_abs_u(storage::StripedMatrix& factor, double max_abs_u);

// max|U| as recorded; -1 for a factor made before it was (issue 17), which has no such blob.
double read_max_abs_u(const storage::StripedMatrix& factor);

}  // namespace stripesolve::scheduler
