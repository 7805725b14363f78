// Even partitions of an index range: stripes of rows (002 Eq 3), substripes of a stripe (002 Eq 7)
// and column segments (the columns one device pass handles). Pure arithmetic.
//
// [0, length) is cut into count = ceil(length / max_part) parts, part p = [p*length/count,
// (p+1)*length/count) in integer arithmetic: sizes differ by at most one, none exceeds max_part,
// and the truncation is spread over all parts instead of leaving a tiny last one (002 §3). For
// stripes this is exactly storage::StripeGeometry's row ranges.
//
// Thread-safety: a plain value.
#pragma once

#include <cstdint>

namespace stripesolve::stripe {

struct EvenPartition {
  int64_t length = 0;
  int64_t count = 0;

  // length >= 0, max_part >= 1 (checked by the caller). length == 0 gives zero parts.
  static EvenPartition with_max_part(int64_t length, int64_t max_part) {
    return {length, length == 0 ? 0 : (length + max_part - 1) / max_part};
  }
  int64_t begin(int64_t p) const { return p * length / count; }
  int64_t end(int64_t p) const { return (p + 1) * length / count; }
  int64_t size(int64_t p) const { return end(p) - begin(p); }
  // The part holding index (0 <= index < length): the largest p with begin(p) <= index.
  int64_t part_of(int64_t index) const { return ((index + 1) * count - 1) / length; }
};

}  // namespace stripesolve::stripe
