// The part the cache tests request: 1024 doubles of a stripe, for an elim.J step by one stripe.
#pragma once

#include <cstdint>

#include "cache/stripe_cache.h"

namespace stripesolve::cache::testing {

inline constexpr uint64_t kPart = 2 * kExtentAlignment;  // every test part: 1024 doubles

inline PartRequest j_request(int64_t stripe, int64_t col = 0) {
  return PartRequest{stripe, col, kPart, CellState::kWaitElimJ, 0, 1, 0};
}

}  // namespace stripesolve::cache::testing
