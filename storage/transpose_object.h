// The out-of-core transpose behind MatrixStore::create_transpose (internal to storage/): how the
// output stripes are grouped to fit a memory budget.
//
// A group of output stripes [J0, J1) holds A^T's rows [row_begin(J0), row_end(J1 - 1)), that is
// A's columns of the same range: one pass over all of A's stripes, reading only those columns of
// each (the 4 KiB blocks around them: a contiguous run of the stripe), fills the group, which is
// then written. So A is read once (plus a block per stripe and group) and A^T written once
// whatever the budget; a smaller budget makes more, shorter reads.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "storage/geometry.h"

namespace stripesolve::storage {

// Where the transpose's memory goes: the stream buffer that writes A^T (`stream_bytes`, a 4 KiB
// multiple, at least 8 KiB so that it streams in two halves), the group of output stripes
// (`group_bytes`) and two reads of the group's columns of one of A's stripes (2 h / n of the
// group each, h the tallest stripe). Their sum is the budget, except for budgets too small for
// one stripe, which take that much.
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
