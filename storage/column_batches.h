// Planning the import of a Fortran-order (column-major) file: the file holds whole columns one
// after another, a stripe wants its rows of every column, so reading stripe by stripe means one
// small read per column and stripe (h elements). Instead the columns are taken in ranges: one
// batch holds a window of every stripe over the same columns [col_begin, col_end), produced
// from one large sequential read of those whole columns (a staging block) and written together
// (write_stripe_batches in storage/stripe_stream.h).
//
// Window bounds are 4 KiB aligned (O_DIRECT), so a window may start a little before its batch's
// first column; col_begin/col_end cover every element of the batch's windows exactly.
//
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <vector>

#include "storage/placement.h"
#include "storage/stripe_stream.h"

namespace stripesolve::storage {

struct ColumnBatch {
  int64_t col_begin = 0;  // the whole columns of the file the windows' elements lie in
  int64_t col_end = 0;
  std::vector<StripeWindow> windows;  // at most one per stripe, in stripe order
};

// Batches of windows over column ranges as wide as fit: each batch's window bytes (float64) at
// most `batch_bytes`, each batch's columns in the file (n * item_bytes bytes each) at most
// `staging_bytes`. Empty when not even one column per batch fits (the caller then imports
// stripe by stripe).
std::vector<ColumnBatch> plan_column_batches(const Placement& placement, uint64_t batch_bytes,
                                             uint64_t staging_bytes, int item_bytes);

}  // namespace stripesolve::storage
