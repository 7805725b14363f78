#include "storage/column_batches.h"

#include <algorithm>

namespace stripesolve::storage {
namespace {

// The batches of `width` columns each (the last one narrower).
std::vector<ColumnBatch> batches_of_width(const Placement& pl, int64_t width) {
  const StripeGeometry& g = pl.geometry();
  std::vector<ColumnBatch> out;
  for (int64_t c0 = 0; c0 < g.n; c0 += width) {
    const int64_t c1 = std::min(g.n, c0 + width);
    ColumnBatch b;
    b.col_begin = g.n;
    b.col_end = 0;
    for (int64_t I = 0; I < g.stripes; ++I) {
      const auto h = static_cast<uint64_t>(g.rows(I));
      const uint64_t begin = align_down(static_cast<uint64_t>(c0) * h * kElementBytes);
      const uint64_t end = c1 == g.n ? pl.stored_bytes(I)
                                     : align_down(static_cast<uint64_t>(c1) * h * kElementBytes);
      if (end <= begin) continue;  // this stripe's next window starts in a later batch
      const uint64_t data_end = std::min(end, g.stripe_bytes(I));
      b.windows.push_back(StripeWindow{I, begin, end});
      b.col_begin = std::min(b.col_begin, static_cast<int64_t>(begin / kElementBytes / h));
      b.col_end = std::max(b.col_end, static_cast<int64_t>((data_end / kElementBytes + h - 1) / h));
    }
    if (!b.windows.empty()) out.push_back(std::move(b));
  }
  return out;
}

bool fits(const std::vector<ColumnBatch>& batches, uint64_t batch_bytes, uint64_t column_bytes,
          uint64_t staging_bytes) {
  for (const ColumnBatch& b : batches) {
    uint64_t bytes = 0;
    for (const StripeWindow& w : b.windows) bytes += w.end - w.begin;
    if (bytes > batch_bytes) return false;
    if (static_cast<uint64_t>(b.col_end - b.col_begin) * column_bytes > staging_bytes) return false;
  }
  return true;
}

}  // namespace

std::vector<ColumnBatch> plan_column_batches(const Placement& placement, uint64_t batch_bytes,
                                             uint64_t staging_bytes, int item_bytes) {
  const StripeGeometry& g = placement.geometry();
  if (g.n <= 0) return {};
  const uint64_t column_f64 = kElementBytes * static_cast<uint64_t>(g.n);
  const uint64_t column_file = static_cast<uint64_t>(item_bytes) * static_cast<uint64_t>(g.n);
  // Alignment moves each window's ends by less than 4 KiB, and the last one carries padding.
  const uint64_t slack = 2 * kAlignment * static_cast<uint64_t>(g.stripes);
  if (batch_bytes <= slack) return {};
  auto width = static_cast<int64_t>(
      std::min((batch_bytes - slack) / column_f64, staging_bytes / column_file));
  width = std::min(width, g.n);
  while (width >= 1) {
    std::vector<ColumnBatch> batches = batches_of_width(placement, width);
    if (fits(batches, batch_bytes, column_file, staging_bytes)) return batches;
    width -= std::max<int64_t>(1, width / 16);
  }
  return {};
}

}  // namespace stripesolve::storage
