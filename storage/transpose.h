// Moving a block of a matrix between the row-major order of a C-order file and the column-major
// order of a stripe (import and export), converting the file's element type on the way in, in
// cache-sized tiles and spread over the cores. Also the parallel loop the producers of
// write_stripes use (generators).
//
// Thread-safety: pure functions on the caller's buffers; they start and join their own threads.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>

namespace stripesolve::storage {

// The side of the square tiles the transposes move: 32 x 32 doubles (8 KiB), so a tile of the
// source and one of the destination fit L1.
inline constexpr int64_t kTransposeTile = 32;

// How the elements of a file are encoded.
struct ElementEncoding {
  int item_bytes = 8;  // 8 (float64) or 4 (float32)
  bool big_endian = false;
};

// One element of a file as a double (float32 widened), inline: the transpose's inner loop.
inline double decode(const unsigned char* p, ElementEncoding e) {
  if (e.item_bytes == 8) {
    uint64_t bits;
    std::memcpy(&bits, p, 8);
    if (e.big_endian) bits = __builtin_bswap64(bits);
    return std::bit_cast<double>(bits);
  }
  uint32_t bits;
  std::memcpy(&bits, p, 4);
  if (e.big_endian) bits = __builtin_bswap32(bits);
  return static_cast<double>(std::bit_cast<float>(bits));
}

// dst[r + c * ld] = src row r, element c (rows x cols, row-major, `cols` items per row, decoded).
void rows_to_columns(const unsigned char* src, int64_t rows, int64_t cols, ElementEncoding e,
                     double* dst, int64_t ld);

// dst[r * cols + c] = src[r + c * ld] (float64, little-endian: the store's export format).
void columns_to_rows(const double* src, int64_t ld, int64_t rows, int64_t cols, double* dst);

// Runs fn(begin, end) over [0, count) split into contiguous chunks, one per core (up to 8); the
// chunks' bounds are multiples of `grain`. Small ranges run on the calling thread.
void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace stripesolve::storage
