#include "storage/transpose.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace stripesolve::storage {
namespace {

// Calls tile(rt, re, ct, ce) for the tiles [rt, re) x [ct, ce) of rows [r0, r1) and columns
// [0, cols), kTransposeTile square, a row of tiles after another.
template <typename Tile>
void for_each_tile(int64_t r0, int64_t r1, int64_t cols, Tile&& tile) {
  for (int64_t rt = r0; rt < r1; rt += kTransposeTile) {
    const int64_t re = std::min(r1, rt + kTransposeTile);
    for (int64_t ct = 0; ct < cols; ct += kTransposeTile) {
      tile(rt, re, ct, std::min(cols, ct + kTransposeTile));
    }
  }
}

template <int kItem, bool kBig>
void rows_to_columns_tiled(const unsigned char* src, int64_t r0, int64_t r1, int64_t cols,
                           double* dst, int64_t ld) {
  const ElementEncoding e{kItem, kBig};
  for_each_tile(r0, r1, cols, [&](int64_t rt, int64_t re, int64_t ct, int64_t ce) {
    for (int64_t c = ct; c < ce; ++c) {
      double* d = dst + c * ld;
      const unsigned char* s = src + (c * kItem);
      for (int64_t r = rt; r < re; ++r) d[r] = decode(s + r * cols * kItem, e);
    }
  });
}

}  // namespace

void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t cores = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 8);
  grain = std::max<int64_t>(1, grain);
  const int64_t chunks = std::min(cores, (count + grain - 1) / grain);
  if (chunks <= 1) {
    if (count > 0) fn(0, count);
    return;
  }
  const int64_t per = (count / chunks + grain - 1) / grain * grain;
  std::vector<std::thread> threads;
  for (int64_t b = per; b < count; b += per) {
    threads.emplace_back([&fn, b, per, count] { fn(b, std::min(count, b + per)); });
  }
  fn(0, std::min(count, per));
  for (auto& t : threads) t.join();
}

void rows_to_columns(const unsigned char* src, int64_t rows, int64_t cols, ElementEncoding e,
                     double* dst, int64_t ld) {
  parallel_for(rows, kTransposeTile, [&](int64_t r0, int64_t r1) {
    if (e.item_bytes == 8) {
      e.big_endian ? rows_to_columns_tiled<8, true>(src, r0, r1, cols, dst, ld)
                   : rows_to_columns_tiled<8, false>(src, r0, r1, cols, dst, ld);
    } else {
      e.big_endian ? rows_to_columns_tiled<4, true>(src, r0, r1, cols, dst, ld)
                   : rows_to_columns_tiled<4, false>(src, r0, r1, cols, dst, ld);
    }
  });
}

void columns_to_rows(const double* src, int64_t ld, int64_t rows, int64_t cols, double* dst) {
  parallel_for(rows, kTransposeTile, [&](int64_t r0, int64_t r1) {
    for_each_tile(r0, r1, cols, [&](int64_t rt, int64_t re, int64_t ct, int64_t ce) {
      for (int64_t r = rt; r < re; ++r) {
        double* d = dst + r * cols;
        for (int64_t c = ct; c < ce; ++c) d[c] = src[r + c * ld];
      }
    });
  });
}

}  // namespace stripesolve::storage
