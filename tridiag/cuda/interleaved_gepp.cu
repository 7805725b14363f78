// gepp for interleaved batches: a thread a system, dgtsv's row steps (gepp_rows.h). Consecutive
// threads take consecutive systems, so each row of a warp's systems is 256 contiguous bytes, read
// once (dl, d, du, f) and written once (x): 40 bytes an unknown, where a thread-per-system
// elimination that keeps its factors in device memory moves 88 or more. The pivot rows wait in
// shared memory (24 bytes a row, [row][thread], free of bank conflicts) for the substitution, up to
// n = kMaxSharedGeppSystem. Beyond, so few systems' pivot rows would fit an SM: in large batches
// one chunk's pivot rows stay on chip and the substitution eliminates each earlier chunk again
// from its starting row (72 bytes an unknown at most, twice the arithmetic); in smaller ones, where
// the arithmetic of too few threads bounds the time, the first 32 rows' pivot rows wait on chip
// and the later ones in device memory, up to kMaxTailGeppSystem in batches of
// kMinTailGeppSystems, and otherwise all of them in device memory (88 bytes an unknown). Few
// threads fit an SM once n is large, so each reads its rows well ahead of the elimination: 16 into
// registers where the systems are small, else 8 into shared memory by cp.async, whose waits count
// rows (the register loads' waits, at 16 rows ahead, still stalled: 65 G unknowns/s at n = 64
// against 78; interleaved_gepp.cuh). The parts a thread's solve is built from are in
// gepp_thread.cuh, the recomputing variants' chunks in gepp_chunks.cuh; here the variants that keep
// every pivot row, the kernel and its launches.
#include <algorithm>

#include <cuda_pipeline.h>

#include "tridiag/cuda/gepp_chunks.cuh"
#include "tridiag/cuda/gepp_rows.h"
#include "tridiag/cuda/gepp_thread.cuh"
#include "tridiag/cuda/interleaved_gepp.cuh"
#include "tridiag/cuda/kernel_limits.h"

namespace stripesolve::tridiag::gpu {

namespace {

using gepp::Backward;
using gepp::copy_row_async;
using gepp::eliminate_range;
using gepp::flag;
using gepp::HalfRows;
using gepp::load_row;
using gepp::recomputed_chunks;
using gepp::RegisterChunk;
using gepp::Ring;
using gepp::RowChecks;
using gepp::RowIn;
using gepp::SavedRows;
using gepp::SharedChunk;
using gepp::step;
using gepp::TwistedHalf;

constexpr int kMaxBlock = 64;
// Rows read ahead of the elimination (interleaved_gepp.cuh: GeppKernel): in registers, or in
// shared memory (there deeper rings cost more threads an SM than they gain: 16 rows ran at 44
// G unknowns/s at n = 64 against 78 for 8).
constexpr int kRegisterRows = 16;
constexpr int kSharedRows = 8;
// kTailInDeviceMemory: the pivot rows a thread keeps in shared memory (three blocks of 64
// threads an SM; H200, G unknowns/s at n = 128 / 256 / 384: 57 / 51 / 43 with 32 rows, 58 / 49 /
// 39 with 64 (two blocks an SM), 55 / 49 / 42 with 48, 52 / 48 / 36 with 24); the later rows, read
// back first, go to device memory.
constexpr std::size_t kSharedHeadRows = 32;

// The rows whose pivot rows kTailInDeviceMemory keeps in shared memory.
__host__ __device__ constexpr std::size_t head_rows(std::size_t n) {
  return n < kSharedHeadRows ? n : kSharedHeadRows;
}
constexpr std::size_t kSavedBytesPerRow = sizeof(GeppSaved);  // 24

// The largest dynamic shared memory a block may have on sm_90 (227 KB).
constexpr int kSharedLimit = 227 * 1024;

// Pivot rows split: rows below `first` in shared memory (`head`), the others in device memory
// (`tail`, whose row 0 is row `first`).
struct SplitRows {
  SavedRows head, tail;
  std::size_t first;
  __device__ void put(std::size_t i, const GeppSaved& s) const {
    if (i < first) {
      head.put(i, s);
    } else {
      tail.put(i - first, s);
    }
  }
};

// The elimination with the rows ahead in registers, kAhead of them, each read as the row kAhead
// before it is taken. Returns the last row as eliminated.
template <int kAhead>
__device__ GeppCarry eliminate_from_registers(const InterleavedGepp& a, std::size_t j,
                                              const SavedRows& saved, bool& singular) {
  const std::size_t n = a.n, m = a.count;
  RowIn ahead[kAhead];  // row r waits in ahead[r % kAhead]
#pragma unroll
  for (int k = 0; k < kAhead; ++k) {
    if (static_cast<std::size_t>(k) < n) ahead[k] = load_row(a, k, k * m + j);
  }
  GeppCarry c{ahead[0].d, ahead[0].u, ahead[0].f};
  std::size_t next = kAhead;  // the next row to read
  std::size_t next_at = next * m + j;
  if (next < n) ahead[0] = load_row(a, next, next_at);
  ++next;
  next_at += m;
  for (std::size_t base = 0; base + 1 < n; base += kAhead) {
#pragma unroll
    for (int k = 0; k < kAhead; ++k) {
      const std::size_t i = base + k;  // this step eliminates below row i
      if (i + 1 < n) {
        const int slot = (k + 1) % kAhead;  // a constant once unrolled
        const RowIn r = ahead[slot];
        if (next < n) ahead[slot] = load_row(a, next, next_at);
        ++next;
        next_at += m;
        step(a, j, i, c, r, saved, singular);
      }
    }
  }
  return c;
}

// The whole elimination through the ring, from row 0. Returns the last row as eliminated.
template <int kDepth, typename Store>
__device__ GeppCarry eliminate_from_ring(const InterleavedGepp& a, std::size_t j, double* ring,
                                         int t, const Store& saved, bool& singular) {
  return eliminate_range(Ring<kDepth>{a, j, ring, t}, 0, a.n - 1, GeppCarry{}, true, false, saved,
                         singular, [](std::size_t, const GeppCarry&) {});
}

// The substitution with the pivot rows from `rows`: take(i) gives row i's, done(i) says that its
// values are used. Where Rows::kChecks, row i + 1's residual is taken once x_i is known, row i + 1
// as given from rows.row_after(i) (the same ring, read kDepth rows ahead), row 0 read at the end,
// and the system gets its verdict.
template <typename Rows>
__device__ void substitute(const InterleavedGepp& a, std::size_t j, const GeppCarry& c,
                           Rows& rows) {
  Backward back(a, j, c);
  RowChecks checks;
  for (std::size_t i = a.n - 1; i-- > 0;) {
    const double x_next = back.x1, x_after = back.x2;  // x_{i+1}, x_{i+2}
    back.row(i, rows.take(i));
    if constexpr (Rows::kChecks) checks.add_row(rows.row_after(i), back.x1, x_next, x_after);
    rows.done(i);
  }
  back.finish();
  if constexpr (Rows::kChecks) {
    checks.add_row(load_row</*kAgain=*/true>(a, 0, j), 0.0, back.x1, back.x2);
    check::classify(j, check::error_of(checks.worst), a.check.tolerance, a.check);
  }
}

// The pivot rows where they wait in shared memory.
struct SharedRows {
  static constexpr bool kChecks = false;
  const SavedRows& saved;
  __device__ GeppSaved take(std::size_t i) const { return saved.get(i); }
  __device__ void done(std::size_t) const {}
};

// The pivot rows from device memory (`saved`, whose row 0 is row `first`), rows `first` to n - 2,
// read kDepth rows ahead (n - 2, n - 3, ..., the k-th of them commit group k) into the thread's
// ring in shared memory, free once the elimination is done, by cp.async; a row's slot takes the
// next row only once its values are used. Rows below `first` come from `head` in shared memory.
// kCheck: each slot also brings row i + 1 as given (the check's, row_after), for every row, so
// that every row has its group (first may be n: every pivot row from `head`).
template <int kDepth, bool kCheck = false>
struct RingRows {
  static constexpr bool kChecks = kCheck;
  static constexpr int kSlot = kCheck ? 7 : 4;
  const InterleavedGepp& a;
  std::size_t j;  // the thread's system
  const SavedRows& saved;
  const SavedRows* head;  // rows below first (null where first is 0)
  double* ring;
  int t;
  std::size_t n, first;
  __device__ RingRows(const InterleavedGepp& args, std::size_t system, const SavedRows& s,
                      const SavedRows* h, std::size_t first_row, double* r, int threads)
      : a(args), j(system), saved(s), head(h), ring(r), t(threads), n(args.n), first(first_row) {
#pragma unroll
    for (int k = 0; k < kDepth; ++k) {
      const std::size_t after = static_cast<std::size_t>(k) + 2;  // row n - after
      issue(n - after, first + after <= n, kCheck && after <= n);
    }
  }
  __device__ double* slot(std::size_t row) const {
    return ring + (row & (kDepth - 1)) * kSlot * t;
  }
  __device__ void issue(std::size_t row, bool pivot_row, bool row_after) const {
    double* const dst = slot(row);
    if (pivot_row) {
      const std::size_t at = (row - first) * saved.stride;
      __pipeline_memcpy_async(dst, saved.f + at, sizeof(double));
      __pipeline_memcpy_async(dst + t, saved.u1 + at, sizeof(double));
      __pipeline_memcpy_async(dst + 2 * t, saved.u2 + at, sizeof(double));
    }
    if (kCheck && row_after) copy_row_async(a, j, row + 1, dst + 3 * t, t);  // row i + 1 as given
    __pipeline_commit();
  }
  __device__ GeppSaved take(std::size_t i) const {
    if (!kCheck && i < first) return head->get(i);
    __pipeline_wait_prior(kDepth - 1);  // row i
    if (i < first) return head->get(i);
    const double* const src = slot(i);
    return {src[0], src[t], src[2 * t]};
  }
  __device__ RowIn row_after(std::size_t i) const {
    const double* const src = slot(i) + 3 * t;
    return {src[0], src[t], src[2 * t], src[3 * t]};
  }
  __device__ void done(std::size_t i) const {
    if (kCheck || i >= first) {
      issue(i - kDepth, i >= first + kDepth, i >= kDepth);  // into row i's slot
    }
  }
};

// kWhere: the rows ahead in registers or in shared memory, the pivot rows in shared or device
// memory (never kChoose).
template <GeppKernel kWhere, bool kCheck = false>
__global__ void __launch_bounds__(kMaxBlock) interleaved_gepp_kernel(InterleavedGepp a) {
  extern __shared__ double shared[];
  const std::size_t j = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (j >= a.count) return;
  const int threads = static_cast<int>(blockDim.x);
  double* const mine = shared + threadIdx.x;
  if constexpr (kWhere == GeppKernel::kRecomputedChunksOf32LastOf48) {
    constexpr std::size_t kChunk = 32;
    const std::size_t plane = kChunk * threads;
    SharedChunk<kChunk> chunk{{{mine, mine + plane, mine + 2 * plane, std::size_t(threads)}}};
    recomputed_chunks<kChunk, 16>(a, j, Ring<kSharedRows>{a, j, mine + 3 * plane, threads}, chunk);
    return;
  } else if constexpr (kWhere == GeppKernel::kRecomputedChunksOf16InRegisters) {
    RegisterChunk<16> chunk;
    if constexpr (kCheck) {
      recomputed_chunks<16>(a, j, Ring<kSharedRows, 16>{a, j, mine, threads}, chunk);
    } else {
      recomputed_chunks<16>(a, j, Ring<kSharedRows>{a, j, mine, threads}, chunk);
    }
    return;
  }
  bool singular = false;
  GeppCarry c;
  if constexpr (kWhere == GeppKernel::kPivotRowsInDeviceMemory ||
                kWhere == GeppKernel::kTailInDeviceMemory) {
    // The first `first` rows' pivot rows in shared memory (none for kPivotRowsInDeviceMemory),
    // then the ring; the others in device memory.
    const std::size_t first =
        kWhere == GeppKernel::kTailInDeviceMemory ? head_rows(a.n) : std::size_t{0};
    const std::size_t head_plane = first * threads, plane = (a.n - first) * a.count;
    const SavedRows head{mine, mine + head_plane, mine + 2 * head_plane, std::size_t(threads)};
    const SavedRows tail{a.pivot_rows + j, a.pivot_rows + plane + j, a.pivot_rows + 2 * plane + j,
                         a.count};
    double* const ring = mine + 3 * head_plane;
    c = eliminate_from_ring<kSharedRows>(a, j, ring, threads, SplitRows{head, tail, first},
                                         singular);
    if (c.d == 0.0 && !singular) flag(a.pivot_flag, j * a.n + a.n - 1);
    __threadfence_block();  // the pivot rows stored before the ring's copies read them back
    RingRows<kSharedRows, kCheck> rows(a, j, tail, &head, first, ring, threads);
    substitute(a, j, c, rows);
    return;
  }
  const std::size_t plane = a.n * threads;
  const SavedRows saved{mine, mine + plane, mine + 2 * plane, std::size_t(threads)};
  if constexpr (kWhere == GeppKernel::kRowsInRegisters) {
    c = eliminate_from_registers<kRegisterRows>(a, j, saved, singular);
  } else {
    c = eliminate_from_ring<kSharedRows>(a, j, mine + 3 * plane, threads, saved, singular);
  }
  if (c.d == 0.0 && !singular) flag(a.pivot_flag, j * a.n + a.n - 1);
  if constexpr (kCheck && kWhere == GeppKernel::kRowsInSharedMemory) {
    // Every pivot row from shared memory, the ring (free again) bringing the check's rows.
    RingRows<kSharedRows, true> rows(a, j, saved, &saved, a.n, mine + 3 * plane, threads);
    substitute(a, j, c, rows);
  } else {
    SharedRows rows{saved};
    substitute(a, j, c, rows);
  }
}

// kTwistedChunksOf32LastOf48 (interleaved_gepp.cuh): a block of two warps takes 32 systems,
// warp 0 their upper halves and warp 1 their lower halves, each thread as
// kRecomputedChunksOf32LastOf48 takes a whole system (its shared memory laid out alike), and
// three doubles a thread after it where the halves meet (at the block's barrier, which every
// thread of the block reaches). The systems past the last whole group of 32, where there are
// any, go to block 0, a whole system a thread as kRecomputedChunksOf32LastOf48 solves them:
// first, so that their chains, twice a half's, end with the rest (a launch of their own after
// this one ran n = 160 / 192 / 384 at 52.6 / 48.9 / 40.2 G unknowns/s on an H200, against
// 55.8 / 51.9 / 45.0 this way).
constexpr std::size_t kTwistedGroup = 32;
__global__ void __launch_bounds__(kMaxBlock) twisted_gepp_kernel(InterleavedGepp a) {
  extern __shared__ double shared[];
  constexpr int kThreads = 2 * static_cast<int>(kTwistedGroup);
  static_assert(kThreads == TwistedHalf::kThreads && kTwistedGroup == 32,
                "TwistedHalf pairs thread t with t ^ 32 in a block of 64");
  constexpr std::size_t kChunk = 32;
  const int me = static_cast<int>(threadIdx.x);
  double* const mine = shared + me;
  const std::size_t plane = kChunk * kThreads;
  double* const ring = mine + 3 * plane;
  SharedChunk<kChunk> chunk{{{mine, mine + plane, mine + 2 * plane, std::size_t(kThreads)}}};
  const std::size_t whole_end = a.count / kTwistedGroup * kTwistedGroup;
  const bool rest = whole_end < a.count;
  if (rest && blockIdx.x == 0) {
    const std::size_t j = whole_end + me;
    if (j < a.count) {
      recomputed_chunks<kChunk, 16>(a, j, Ring<kSharedRows>{a, j, ring, kThreads}, chunk);
    }
    return;
  }
  const std::size_t group = blockIdx.x - (rest ? 1 : 0);
  const std::size_t j = group * kTwistedGroup + (me % kTwistedGroup);
  double* const exchange = shared + 3 * plane + kSharedRows * 4 * kThreads;
  const std::size_t m = gepp_upper_rows(static_cast<long>(a.n));
  const HalfRows map{me >= static_cast<int>(kTwistedGroup)};
  const TwistedHalf half{map, map.from_bottom ? a.n - m : m, (m + kChunk - 1) / kChunk, exchange,
                         me};
  recomputed_chunks<kChunk, 16>(
      a, j, Ring<kSharedRows, 0, HalfRows>{a, j, ring, kThreads, false, map}, chunk, half);
}

// Shared memory a thread needs: its pivot rows where they wait there, and the ring of rows ahead
// where there is one (its slots larger where they bring the check's rows).
std::size_t thread_bytes(std::size_t n, GeppKernel where, bool check = false) {
  const std::size_t slot = !check                                                  ? 4
                           : where == GeppKernel::kRecomputedChunksOf16InRegisters ? 9
                                                                                   : 7;
  const std::size_t ring = kSharedRows * slot * sizeof(double);
  switch (where) {
    case GeppKernel::kRowsInRegisters:
      return kSavedBytesPerRow * n;
    case GeppKernel::kRowsInSharedMemory:
      return kSavedBytesPerRow * n + ring;
    case GeppKernel::kTailInDeviceMemory:
      return kSavedBytesPerRow * head_rows(n) + ring;
    case GeppKernel::kRecomputedChunksOf32LastOf48:
      return kSavedBytesPerRow * 32 + ring;
    case GeppKernel::kTwistedChunksOf32LastOf48:  // and where the halves meet
      return kSavedBytesPerRow * 32 + ring + 3 * sizeof(double);
    default:
      return ring;
  }
}

// Threads a block: 64 where 64 threads' shared memory fits a block, else 32.
int block_threads(std::size_t n, GeppKernel where) {
  return 64 * thread_bytes(n, where) <= static_cast<std::size_t>(kSharedLimit) ? 64 : 32;
}

template <GeppKernel kWhere, bool kCheck = false>
void launch_with(const InterleavedGepp& a, cudaStream_t stream) {
  const int threads = block_threads(a.n, kWhere);
  const std::size_t blocks = (a.count + threads - 1) / threads;
  const std::size_t bytes = thread_bytes(a.n, kWhere, kCheck) * threads;
  interleaved_gepp_kernel<kWhere, kCheck>
      <<<static_cast<unsigned>(blocks), threads, bytes, stream>>>(a);
}

// The twisted variant: a block for each whole group of 32 systems and one for the rest; systems
// of one row as kRecomputedChunksOf32LastOf48.
void launch_twisted(const InterleavedGepp& a, cudaStream_t stream) {
  if (a.n < 2) {
    launch_with<GeppKernel::kRecomputedChunksOf32LastOf48>(a, stream);
    return;
  }
  const std::size_t blocks = (a.count + kTwistedGroup - 1) / kTwistedGroup;
  const std::size_t bytes =
      thread_bytes(a.n, GeppKernel::kTwistedChunksOf32LastOf48) * 2 * kTwistedGroup;
  twisted_gepp_kernel<<<static_cast<unsigned>(blocks), 2 * kTwistedGroup, bytes, stream>>>(a);
}

// The variants that can check (kCheck) launched with the check or without.
template <GeppKernel kWhere>
void launch_checked_or_not(const InterleavedGepp& a, cudaStream_t stream, bool check) {
  if (check) {
    launch_with<kWhere, true>(a, stream);
  } else {
    launch_with<kWhere>(a, stream);
  }
}

std::size_t workspace_rows(std::size_t n, GeppKernel kernel) {
  const std::size_t steps = n > 0 ? n - 1 : 0;
  switch (kernel) {
    case GeppKernel::kPivotRowsInDeviceMemory:
      return n;
    case GeppKernel::kTailInDeviceMemory:
      return n - head_rows(n);
    case GeppKernel::kRecomputedChunksOf32LastOf48:  // at most: the chunks before the last
      return (steps + 31) / 32;
    case GeppKernel::kRecomputedChunksOf16InRegisters:
      return (steps + 15) / 16;
    case GeppKernel::kTwistedChunksOf32LastOf48: {  // the upper half's chunks, then the lower's
      const std::size_t m = gepp_upper_rows(static_cast<long>(n));
      return std::max((m + 31) / 32 + (n - m + 31) / 32, (steps + 31) / 32);
    }
    default:
      return 0;
  }
}

}  // namespace

GeppKernel choose_gepp_kernel(std::size_t n, std::size_t count, bool checked) {
  const bool many = count >= kMinRecomputedGeppSystems;
  if (n <= kMaxRegisterGeppSystem) {
    return checked && many ? GeppKernel::kRecomputedChunksOf16InRegisters
                           : GeppKernel::kRowsInRegisters;
  }
  if (n <= kMaxSharedGeppSystem) return GeppKernel::kRowsInSharedMemory;
  if (many && !checked && twisted_gepp_serves(n)) return GeppKernel::kTwistedChunksOf32LastOf48;
  if (many) {
    return checked || n > kMaxSharedChunkGeppSystem ? GeppKernel::kRecomputedChunksOf16InRegisters
                                                    : GeppKernel::kRecomputedChunksOf32LastOf48;
  }
  return n <= kMaxTailGeppSystem && count >= kMinTailGeppSystems
             ? GeppKernel::kTailInDeviceMemory
             : GeppKernel::kPivotRowsInDeviceMemory;
}

std::size_t interleaved_gepp_workspace_bytes(std::size_t n, std::size_t count, GeppKernel kernel) {
  const std::size_t rows = kernel != GeppKernel::kChoose
                               ? workspace_rows(n, kernel)
                               : std::max(workspace_rows(n, choose_gepp_kernel(n, count, false)),
                                          workspace_rows(n, choose_gepp_kernel(n, count, true)));
  return kSavedBytesPerRow * rows * count;
}

bool launch_interleaved_gepp(const InterleavedGepp& a, GeppKernel kernel, void* stream_ptr) {
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const bool check = a.check.errors != nullptr && a.x != a.f;
  const bool named = kernel != GeppKernel::kChoose;
  if (!named) kernel = choose_gepp_kernel(a.n, a.count, check);
  // Checked inside: the variants whose substitution reads through a ring (the chunks of 16, the
  // tail's and every pivot row in device memory, which kChoose takes for checked batches above
  // n = 64 or of kMinRecomputedGeppSystems but at 32 < n <= 64); the shared-memory variant only
  // where named, its check costing more than the separate pass (interleaved_gepp.cuh).
  const bool inside = check && (kernel == GeppKernel::kRecomputedChunksOf16InRegisters ||
                                kernel == GeppKernel::kTailInDeviceMemory ||
                                kernel == GeppKernel::kPivotRowsInDeviceMemory ||
                                (named && kernel == GeppKernel::kRowsInSharedMemory));
  switch (kernel) {
    case GeppKernel::kRowsInRegisters:
      launch_with<GeppKernel::kRowsInRegisters>(a, stream);
      return false;
    case GeppKernel::kRecomputedChunksOf32LastOf48:
      launch_with<GeppKernel::kRecomputedChunksOf32LastOf48>(a, stream);
      return false;
    case GeppKernel::kTwistedChunksOf32LastOf48:
      launch_twisted(a, stream);
      return false;
    case GeppKernel::kRowsInSharedMemory:
      launch_checked_or_not<GeppKernel::kRowsInSharedMemory>(a, stream, inside);
      return inside;
    case GeppKernel::kTailInDeviceMemory:
      launch_checked_or_not<GeppKernel::kTailInDeviceMemory>(a, stream, inside);
      return inside;
    case GeppKernel::kRecomputedChunksOf16InRegisters:
      launch_checked_or_not<GeppKernel::kRecomputedChunksOf16InRegisters>(a, stream, inside);
      return inside;
    default:
      launch_checked_or_not<GeppKernel::kPivotRowsInDeviceMemory>(a, stream, inside);
      return inside;
  }
}

cudaError_t set_interleaved_gepp_limits() {
  static_assert(32 * (kSavedBytesPerRow * kMaxSharedGeppSystem + kSharedRows * 32) <= kSharedLimit);
  for (auto k : {interleaved_gepp_kernel<GeppKernel::kRowsInRegisters>,
                 interleaved_gepp_kernel<GeppKernel::kRowsInSharedMemory>,
                 interleaved_gepp_kernel<GeppKernel::kPivotRowsInDeviceMemory>,
                 interleaved_gepp_kernel<GeppKernel::kTailInDeviceMemory>,
                 interleaved_gepp_kernel<GeppKernel::kRecomputedChunksOf32LastOf48>,
                 interleaved_gepp_kernel<GeppKernel::kRecomputedChunksOf16InRegisters>,
                 interleaved_gepp_kernel<GeppKernel::kRecomputedChunksOf16InRegisters, true>,
                 interleaved_gepp_kernel<GeppKernel::kRowsInSharedMemory, true>,
                 interleaved_gepp_kernel<GeppKernel::kTailInDeviceMemory, true>,
                 interleaved_gepp_kernel<GeppKernel::kPivotRowsInDeviceMemory, true>}) {
    const cudaError_t e =
        cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedLimit);
    if (e != cudaSuccess) return e;
  }
  return cudaFuncSetAttribute(twisted_gepp_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              kSharedLimit);
}

}  // namespace stripesolve::tridiag::gpu
