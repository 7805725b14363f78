#include <algorithm>
#include <cfloat>

#include "tournament_panel.h"

namespace {

constexpr int kCols = TournamentPanel::kLeafColumns;
constexpr int kRowsPerLane = 4;
constexpr int kWarpRows = 32 * kRowsPerLane;  // rows one warp eliminates
constexpr int kWarps = kWarpRows / kCols;     // a block's warps: their winners fill one warp
constexpr int kThreads = 32 * kWarps;
constexpr int kBlockRows = kWarps * kWarpRows;  // leaf rows a block of the first round takes
constexpr int kBlockSets = kWarps * kWarps;     // candidate sets a block of a later round takes
constexpr int kMoves = 2 * kCols;               // rows a leaf moves, at most
static_assert(kWarps * kCols == kWarpRows, "a block's winners are one warp's rows");
static_assert(kWarpRows <= 255, "a row's slot fits the key's low byte");

// The root's results: the winners' L\U (row j = the j-th pivot row) and the leaf's row moves
// (position dst[i] gets the row at src[i], both relative to the leaf's first row).
struct Moves {
  int count;
  int dst[kMoves];
  int src[kMoves];
};

struct Scratch {
  double* lu;  // kCols x kCols, row-major
  Moves* moves;
  int* sets[2];  // candidate sets of a round (kCols leaf rows each, -1: none), ping-pong
};

uint64_t round_up(uint64_t bytes) {
  return (bytes + 255) / 256 * 256;
}

int64_t first_round_sets(int64_t m) {
  return std::max<int64_t>(1, (m + kBlockRows - 1) / kBlockRows);
}

Scratch scratch_in(void* base, int64_t m) {
  auto* p = static_cast<char*>(base);
  Scratch s;
  s.lu = reinterpret_cast<double*>(p);
  p += round_up(sizeof(double) * kCols * kCols);
  s.moves = reinterpret_cast<Moves*>(p);
  p += round_up(sizeof(Moves));
  const uint64_t set_bytes = round_up(sizeof(int) * kCols * first_round_sets(m));
  s.sets[0] = reinterpret_cast<int*>(p);
  s.sets[1] = reinterpret_cast<int*>(p + set_bytes);
  return s;
}

// A row's key in its column: |x| with the low byte replaced by its slot (earlier slots win ties,
// as idamax's first largest; |x| loses 8 of its 52 bits, which only reorders near-ties). 0: not a
// candidate. Non-negative doubles order as their bits; NaN counts as 0.
__device__ inline unsigned long long key_of(double x, int slot) {
  const double v = fabs(x);
  const unsigned long long bits =
      v == v ? static_cast<unsigned long long>(__double_as_longlong(v)) : 0ull;
  return (bits & ~0xFFull) | static_cast<unsigned long long>(0xFF - slot);
}

// Partial pivoting by rows over the warp's kWarpRows leaf rows idx[] (-1: none), columns
// [0, cols) of `leaf`: chosen[j] gets the leaf row pivoted on at step j (-1 for j >= cols or
// when no row was left). With lu, the pivot rows' L\U go to lu (row j = step j's row) and the
// first step with a zero pivot (1-based, 0: none) is returned. The rows stay in registers:
// lane l holds idx[l + 32 i], i < kRowsPerLane.
__device__ int warp_eliminate(const double* leaf, int64_t lda, int cols, const int* idx,
                              int* chosen, double* lu) {
  const int lane = threadIdx.x & 31;
  double a[kRowsPerLane][kCols];
  int row[kRowsPerLane];
  int step[kRowsPerLane];  // -1: a candidate; -2: no row; >= 0: pivoted on at that step
#pragma unroll
  for (int i = 0; i < kRowsPerLane; ++i) {
    row[i] = idx[i * 32 + lane];
    step[i] = row[i] < 0 ? -2 : -1;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      a[i][c] = row[i] >= 0 && c < cols ? leaf[c * lda + row[i]] : 0.0;
    }
  }
  int first_zero = 0;
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    if (j >= cols) {
      if (lane == 0) chosen[j] = -1;
      continue;
    }
    unsigned long long best = 0;
#pragma unroll
    for (int i = 0; i < kRowsPerLane; ++i) {
      if (step[i] == -1) best = max(best, key_of(a[i][j], i * 32 + lane));
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) best = max(best, __shfl_xor_sync(~0u, best, off));
    if (best == 0) {  // no candidate left (fewer rows than columns)
      if (lane == 0) chosen[j] = -1;
      continue;
    }
    const int slot = 0xFF - static_cast<int>(best & 0xFF);
    const int owner = slot & 31, which = slot >> 5;
    double u[kCols];
    int prow = row[0];
#pragma unroll
    for (int i = 1; i < kRowsPerLane; ++i) prow = which == i ? row[i] : prow;
    prow = __shfl_sync(~0u, prow, owner);
#pragma unroll
    for (int c = j; c < kCols; ++c) {
      double v = a[0][c];
#pragma unroll
      for (int i = 1; i < kRowsPerLane; ++i) v = which == i ? a[i][c] : v;
      u[c] = __shfl_sync(~0u, v, owner);
    }
    if (lane == 0) chosen[j] = prow;
#pragma unroll
    for (int i = 0; i < kRowsPerLane; ++i) {
      if (lane == owner && which == i) step[i] = j;
    }
    const double piv = u[j];
    if (piv == 0.0) {
      if (first_zero == 0) first_zero = j + 1;
      continue;  // the column's candidates are all 0 (or NaN): nothing to eliminate
    }
    const bool reciprocal = fabs(piv) >= DBL_MIN;  // as dgetf2 (sfmin)
    const double inv = 1.0 / piv;
#pragma unroll
    for (int i = 0; i < kRowsPerLane; ++i) {
      if (step[i] != -1) continue;
      const double l = reciprocal ? a[i][j] * inv : a[i][j] / piv;
      a[i][j] = l;
#pragma unroll
      for (int c = j + 1; c < kCols; ++c) a[i][c] -= l * u[c];
    }
  }
  if (lu != nullptr) {
#pragma unroll
    for (int i = 0; i < kRowsPerLane; ++i) {
      if (step[i] < 0) continue;
#pragma unroll
      for (int c = 0; c < kCols; ++c) lu[step[i] * kCols + c] = a[i][c];
    }
  }
  return first_zero;
}

// The root's bookkeeping (one thread): the winners w[j] (leaf rows, in pivot order) as
// getrf's sequential swaps (ipiv, panel rows from `base`, 1-based) and as one set of moves.
__device__ void root_moves(const int* w, int cols, int base, int32_t* ipiv, Moves* moves) {
  int pos[kMoves], who[kMoves];  // position pos[k] holds leaf row who[k]; others their own
  int n = 0;
  auto row_at = [&](int p) {
    for (int k = 0; k < n; ++k) {
      if (pos[k] == p) return who[k];
    }
    return p;
  };
  auto place = [&](int p, int r) {
    for (int k = 0; k < n; ++k) {
      if (pos[k] == p) {
        who[k] = r;
        return;
      }
    }
    pos[n] = p;
    who[n] = r;
    ++n;
  };
  auto where = [&](int r) {
    for (int k = 0; k < n; ++k) {
      if (who[k] == r) return pos[k];
    }
    return r;
  };
  for (int j = 0; j < cols; ++j) {
    const int p = w[j] < 0 ? j : where(w[j]);
    ipiv[base + j] = base + p + 1;
    if (p == j) continue;
    const int at_j = row_at(j);
    place(j, row_at(p));
    place(p, at_j);
  }
  int count = 0;
  for (int k = 0; k < n; ++k) {
    if (pos[k] == who[k]) continue;
    moves->dst[count] = pos[k];
    moves->src[count] = who[k];
    ++count;
  }
  moves->count = count;
}

// One round of the tournament over the leaf (rows [0, rows), columns [0, cols)). The first round
// (in == nullptr): block b takes leaf rows [b kBlockRows, ...), kWarpRows a warp; later rounds:
// block b takes sets [b kBlockSets, ...) of `in` (in_sets of them), kWarps a warp. Each warp
// keeps cols of its rows, then warp 0 keeps cols of the block's: out[b]. A round of one block is
// the root: it leaves the winners' L\U and the moves in `s`, ipiv and *info.
__global__ void __launch_bounds__(kThreads)
    tournament_round(const double* leaf, int64_t lda, int rows, int cols, const int* in,
                     int in_sets, int* out, Scratch s, int base, int32_t* ipiv, int32_t* info) {
  __shared__ int idx[kWarps][kWarpRows];
  __shared__ int won[kWarpRows];
  __shared__ int final_set[kCols];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t b = blockIdx.x;
  for (int t = lane; t < kWarpRows; t += 32) {
    int r = -1;
    if (in == nullptr) {
      const int64_t lr = b * kBlockRows + warp * kWarpRows + t;
      r = lr < rows ? static_cast<int>(lr) : -1;
    } else {
      const int64_t set = b * kBlockSets + warp * kWarps + t / kCols;
      r = set < in_sets ? in[set * kCols + t % kCols] : -1;
    }
    idx[warp][t] = r;
  }
  __syncwarp();
  (void)warp_eliminate(leaf, lda, cols, idx[warp], &won[warp * kCols], nullptr);
  __syncthreads();
  if (warp != 0) return;
  const bool root = gridDim.x == 1;
  const int zero = warp_eliminate(leaf, lda, cols, won, final_set, root ? s.lu : nullptr);
  __syncwarp();
  if (!root) {
    if (lane < kCols) out[b * kCols + lane] = final_set[lane];
    return;
  }
  if (lane == 0) {
    root_moves(final_set, cols, base, ipiv, s.moves);
    if (zero > 0) atomicCAS(info, 0, base + zero);
  }
}

// The leaf's moves applied to every column of the panel (rows from `base`): all of a column's
// moved rows are read before any is written. kThreads / kMoves columns a pass.
__global__ void __launch_bounds__(kThreads)
    move_rows(double* panel, int64_t lda, int64_t width, int base, const Moves* moves) {
  constexpr int kPerPass = kThreads / kMoves;
  const int count = moves->count;
  const int i = threadIdx.x % kMoves;
  const bool mover = i < count;
  const int src = mover ? moves->src[i] : 0, dst = mover ? moves->dst[i] : 0;
  for (int64_t c0 = static_cast<int64_t>(blockIdx.x) * kPerPass; c0 < width;
       c0 += static_cast<int64_t>(gridDim.x) * kPerPass) {
    const int64_t col = c0 + threadIdx.x / kMoves;
    const bool mine = mover && col < width;
    double* column = panel + col * lda + base;
    double x = 0.0;
    if (mine) x = column[src];
    __syncthreads();
    if (mine) column[dst] = x;
    __syncthreads();
  }
}

// After the moves: the leaf's top cols rows get the winners' L\U, each row below its L row
// x = a U^-1 (forward over the columns; a zero pivot leaves its column unscaled, as dgetf2).
__global__ void __launch_bounds__(256)
    finish_leaf(double* leaf, int64_t lda, int rows, int cols, const double* lu) {
  __shared__ double u[kCols * kCols];
  for (int t = threadIdx.x; t < kCols * kCols; t += blockDim.x) u[t] = lu[t];
  __syncthreads();
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  if (r < cols) {
    for (int c = 0; c < cols; ++c) leaf[c * lda + r] = u[r * kCols + c];
    return;
  }
  double x[kCols];
#pragma unroll
  for (int c = 0; c < kCols; ++c) x[c] = c < cols ? leaf[c * lda + r] : 0.0;
#pragma unroll
  for (int j = 0; j < kCols; ++j) {
    double v = x[j];
#pragma unroll
    for (int k = 0; k < j; ++k) v -= x[k] * u[k * kCols + j];
    const double d = u[j * kCols + j];
    x[j] = d != 0.0 ? v / d : v;
  }
#pragma unroll
  for (int c = 0; c < kCols; ++c) {
    if (c < cols) leaf[c * lda + r] = x[c];
  }
}

}  // namespace

uint64_t TournamentPanel::scratch_bytes(int64_t m) {
  return round_up(sizeof(double) * kCols * kCols) + round_up(sizeof(Moves)) +
         2 * round_up(sizeof(int) * kCols * first_round_sets(m));
}

cudaError_t TournamentPanel::factor(double* a, int64_t lda, int64_t m, int64_t n, int32_t* ipiv,
                                    int32_t* info, cublasHandle_t blas, cudaStream_t stream) {
  if (n <= 0 || n > m || m > INT32_MAX || lda < m) return cudaErrorInvalidValue;
  a_ = a;
  lda_ = lda;
  m_ = m;
  n_ = n;
  ipiv_ = ipiv;
  info_ = info;
  blas_ = blas;
  stream_ = stream;
  const cudaError_t err = cudaMemsetAsync(info, 0, sizeof(int32_t), stream);
  if (err != cudaSuccess) return err;
  return factor_part(0, n);
}

// Columns [c0, c1), rows [c0, m): dgetrf2's halving. The left part (a multiple of the leaf's
// width), then the right part's update by it (dtrsm of its top rows, dgemm of the rest), then the
// right part below the left's rows. The leaves move rows across the whole panel.
cudaError_t TournamentPanel::factor_part(int64_t c0, int64_t c1) {
  const int64_t n = c1 - c0;
  if (n <= kCols) return leaf(c0, n);
  const int64_t mid = c0 + (n / 2 + kCols - 1) / kCols * kCols;
  cudaError_t err = factor_part(c0, mid);
  if (err != cudaSuccess) return err;
  const double one = 1.0, minus_one = -1.0;
  const int n1 = static_cast<int>(mid - c0), n2 = static_cast<int>(c1 - mid);
  const int ld = static_cast<int>(lda_);
  double* l11 = a_ + c0 * lda_ + c0;
  double* a12 = a_ + mid * lda_ + c0;
  if (cublasDtrsm(blas_, CUBLAS_SIDE_LEFT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, CUBLAS_DIAG_UNIT,
                  n1, n2, &one, l11, ld, a12, ld) != CUBLAS_STATUS_SUCCESS ||
      cublasDgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(m_ - mid), n2, n1, &minus_one,
                  l11 + n1, ld, a12, ld, &one, a12 + n1, ld) != CUBLAS_STATUS_SUCCESS) {
    return cudaErrorUnknown;
  }
  return factor_part(mid, c1);
}

// The leaf of columns [base, base + cols), rows [base, m): the tournament's rounds, the moves,
// then the L rows.
cudaError_t TournamentPanel::leaf(int64_t base, int64_t cols) {
  const Scratch s = scratch_in(scratch_, m_);
  const int rows = static_cast<int>(m_ - base);
  const int ib = static_cast<int>(base), ic = static_cast<int>(cols);
  double* leaf = a_ + base * lda_ + base;
  int64_t blocks = first_round_sets(rows);
  tournament_round<<<static_cast<unsigned>(blocks), kThreads, 0, stream_>>>(
      leaf, lda_, rows, ic, nullptr, 0, s.sets[0], s, ib, ipiv_, info_);
  for (int r = 0; blocks > 1; r ^= 1) {
    const int in_sets = static_cast<int>(blocks);
    blocks = (blocks + kBlockSets - 1) / kBlockSets;
    tournament_round<<<static_cast<unsigned>(blocks), kThreads, 0, stream_>>>(
        leaf, lda_, rows, ic, s.sets[r], in_sets, s.sets[r ^ 1], s, ib, ipiv_, info_);
  }
  const int64_t pass = kThreads / kMoves;
  const auto move_blocks = static_cast<unsigned>(std::min<int64_t>((n_ + pass - 1) / pass, 1024));
  move_rows<<<move_blocks, kThreads, 0, stream_>>>(a_, lda_, n_, ib, s.moves);
  finish_leaf<<<static_cast<unsigned>((rows + 255) / 256), 256, 0, stream_>>>(leaf, lda_, rows, ic,
                                                                              s.lu);
  return cudaGetLastError();
}
