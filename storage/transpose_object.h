// The out-of-core transpose behind MatrixStore::create_transpose (internal to storage/): how the
// output stripes are grouped to fit a memory budget.
//
// A group of output stripes [J0, J1) holds A^T's rows [row_begin(J0), row_end(J1 - 1)), that is
// A's columns of the same range: one pass over all of A's stripes fills the whole group, which is
// then written. The transpose reads A once per group and writes A^T once, so a budget that holds
// all of A^T reads A once; a budget of k stripes reads it ceil(N / k) times.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "storage/geometry.h"

namespace stripesolve::storage {

// Where the transpose's memory goes: two stream buffers of `stream_bytes` (one reads A, one
// writes A^T; 4 KiB multiples, at least 8 KiB so that each streams in two halves) and the group
// of output stripes (`group_bytes`). Their sum is the budget, except for budgets below 16 KiB
// plus a stripe, which take that much.
struct TransposeMemory {
  uint64_t stream_bytes = 0;
  uint64_t group_bytes = 0;
};
TransposeMemory transpose_memory(const StripeGeometry& g, uint64_t budget, uint64_t import_buffer);

// The groups [J0, J1) in order, each as many consecutive stripes as fit `group_bytes` (at least
// one stripe each).
struct StripeGroup {
  int64_t first = 0;  // J0
  int64_t end = 0;    // J1
};
std::vector<StripeGroup> transpose_groups(const StripeGeometry& g, uint64_t group_bytes);

}  // namespace stripesolve::storage
