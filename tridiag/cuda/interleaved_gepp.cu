// gepp for interleaved batches: a thread a system, dgtsv's row steps (gepp_rows.h). Consecutive
// threads take consecutive systems, so each row of a warp's systems is 256 contiguous bytes, read
// once (dl, d, du, f) and written once (x): 40 bytes an unknown, where a thread-per-system
// elimination that keeps its factors in device memory moves 88 or more. The pivot rows wait in
// shared memory (24 bytes a row, [row][thread], free of bank conflicts) for the substitution, up to
// n = kMaxSharedGeppSystem. Beyond, so few systems' pivot rows would fit an SM: in large batches
// one chunk's pivot rows stay on chip and the substitution eliminates each earlier chunk again
// from its starting row (72 bytes an unknown at most, twice the arithmetic); in smaller ones, where
// the arithmetic of too few threads bounds the time, the first 32 rows' pivot rows wait on chip
// and the later ones in device memory, up to kMaxTailGeppSystem, and above, all of them in device
// memory (88 bytes an unknown). Few threads fit an SM once n is large, so each reads its rows well
// ahead of the elimination: 16 into registers where the systems are small, else 8 into shared
// memory by cp.async, whose waits count rows (the register loads' waits, at 16 rows ahead, still
// stalled: 65 G unknowns/s at n = 64 against 78; interleaved_gepp.cuh).
#include <algorithm>

#include <cuda_pipeline.h>

#include "tridiag/cuda/check_terms.cuh"
#include "tridiag/cuda/gepp_rows.h"
#include "tridiag/cuda/interleaved_gepp.cuh"
#include "tridiag/cuda/kernel_limits.h"

namespace stripesolve::tridiag::gpu {

namespace {

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

__device__ __forceinline__ void flag(unsigned long long* f, std::size_t row) {
  atomicMin(f, static_cast<unsigned long long>(row));
}

// Row `row` of the thread's system as the elimination takes it: dl of row 0 and du of row n - 1,
// which the batch's contract ignores, as 0.
struct RowIn {
  double l, d, u, f;
};

__device__ __forceinline__ RowIn load_row(const InterleavedGepp& a, std::size_t row,
                                          std::size_t at) {
  RowIn r;
  r.l = row > 0 ? __ldcs(a.dl + at) : 0.0;
  r.d = __ldcs(a.d + at);
  r.u = row + 1 < a.n ? __ldcs(a.du + at) : 0.0;
  r.f = __ldcs(a.f + at);
  return r;
}

// Where a thread's pivot rows wait: row i's (f, u1, u2) at f[i * stride], u1[...], u2[...]
// (shared memory, stride the block's threads; or device memory, stride the batch's systems).
struct SavedRows {
  double *f, *u1, *u2;
  std::size_t stride;
  __device__ void put(std::size_t i, const GeppSaved& s) const {
    f[i * stride] = s.f;
    u1[i * stride] = s.u1;
    u2[i * stride] = s.u2;
  }
  __device__ GeppSaved get(std::size_t i) const {
    return {f[i * stride], u1[i * stride], u2[i * stride]};
  }
};

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

// Step i of the elimination with row i + 1 in `r`: the pivot row saved, a singular matrix
// flagged once.
template <typename Store>
__device__ __forceinline__ void step(const InterleavedGepp& a, std::size_t j, std::size_t i,
                                     GeppCarry& c, const RowIn& r, const Store& saved,
                                     bool& singular) {
  double pivot = 0.0;
  const GeppSaved s = gepp_step(c, r.l, r.d, r.u, r.f, pivot);
  if (pivot == 0.0 && !singular) {
    singular = true;
    flag(a.pivot_flag, j * a.n + i);
  }
  saved.put(i, s);
}

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

// Slot k of a chunk's pivot rows as step()'s store.
template <typename Rows>
struct SlotOf {
  Rows& rows;
  std::size_t k;
  __device__ void put(std::size_t, const GeppSaved& s) const { rows.put(k, s); }
};

// A chunk's pivot rows in registers (slots indexed by constants only: eliminate_chunks).
template <std::size_t kChunk>
struct RegisterRows {
  GeppSaved v[kChunk];
  __device__ void put(std::size_t k, const GeppSaved& s) { v[k] = s; }
  __device__ GeppSaved get(std::size_t k) const { return v[k]; }
};

// What a ring slot brings the check (kCheckAhead > 0): row q = the slot's row + kCheckAhead as
// given (dl, d, du, f) and x_{q+1} (0 past the end).
struct CheckIn {
  double l, d, u, f, x_right;
};

// A thread's rows ahead of the elimination in shared memory, copied there by cp.async: kDepth
// rows (a power of two) in flight, row r in slot r % kDepth, one commit group a row, so that a
// wait counts rows. `ring`: the thread's kDepth slots of 4 doubles (9 with kCheckAhead: the
// check's CheckIn after the row), at a stride of `t` (the block's threads). Rows past `last` are
// not read; their groups are empty, so the count stays one a row. Where `checking`, each slot
// also brings its CheckIn (the check's rows past the end are not read).
template <int kDepth, std::size_t kCheckAhead = 0>
struct Ring {
  static constexpr std::size_t kCheck = kCheckAhead;
  static constexpr int kSlot = kCheckAhead > 0 ? 9 : 4;
  const InterleavedGepp& a;
  std::size_t j;
  double* ring;
  int t;
  bool checking = false;
  __device__ double* slot(std::size_t row) const { return ring + (row & (kDepth - 1)) * kSlot * t; }
  __device__ void copy_row(std::size_t row) const {
    double* const dst = slot(row);
    const std::size_t at = row * a.count + j;
    if (row > 0) {
      __pipeline_memcpy_async(dst, a.dl + at, sizeof(double));
    } else {
      dst[0] = 0.0;
    }
    __pipeline_memcpy_async(dst + t, a.d + at, sizeof(double));
    if (row + 1 < a.n) {
      __pipeline_memcpy_async(dst + 2 * t, a.du + at, sizeof(double));
    } else {
      dst[2 * t] = 0.0;
    }
    __pipeline_memcpy_async(dst + 3 * t, a.f + at, sizeof(double));
  }
  __device__ void copy_check(std::size_t row) const {
    const std::size_t q = row + kCheckAhead;
    if (kCheckAhead == 0 || q >= a.n) return;
    double* const dst = slot(row) + 4 * t;
    const std::size_t at = q * a.count + j;
    __pipeline_memcpy_async(dst, a.dl + at, sizeof(double));
    __pipeline_memcpy_async(dst + t, a.d + at, sizeof(double));
    if (q + 1 < a.n) {
      __pipeline_memcpy_async(dst + 2 * t, a.du + at, sizeof(double));
      __pipeline_memcpy_async(dst + 4 * t, a.x + at + a.count, sizeof(double));
    } else {
      dst[2 * t] = 0.0;
      dst[4 * t] = 0.0;
    }
    __pipeline_memcpy_async(dst + 3 * t, a.f + at, sizeof(double));
  }
  __device__ void issue(std::size_t row, std::size_t last) const {
    if (row <= last) {
      copy_row(row);
      if (checking) copy_check(row);
    }
    __pipeline_commit();
  }
  // Rows i0 to i0 + kDepth - 1 (up to `last`): the start of eliminate_range(i0, last).
  __device__ void issue_first(std::size_t i0, std::size_t last) const {
#pragma unroll
    for (int k = 0; k < kDepth; ++k) issue(i0 + k, last);
  }
  // The CheckIn of rows i0 to i0 + kDepth - 1 alone, a group each, for slots issue_first filled
  // before the x they need were stored: the waits stay right (these groups are the newer).
  __device__ void issue_first_checks(std::size_t i0, std::size_t last) const {
#pragma unroll
    for (int k = 0; k < kDepth; ++k) {
      if (i0 + k <= last) copy_check(i0 + k);
      __pipeline_commit();
    }
  }
  __device__ RowIn take(std::size_t row) const {
    const double* const src = slot(row);
    return RowIn{src[0], src[t], src[2 * t], src[3 * t]};
  }
  __device__ CheckIn take_check(std::size_t row) const {
    const double* const src = slot(row) + 4 * t;
    return CheckIn{src[0], src[t], src[2 * t], src[3 * t], src[4 * t]};
  }
  // The start of steps i0 to `last` - 1: rows i0 and i0 + 1 waited for (their copies issued here
  // unless `issued`), c set from row i0 where `from_row`; returns row i0 + 1.
  __device__ RowIn start(std::size_t i0, std::size_t last, bool issued, bool from_row,
                         GeppCarry& c) const {
    if (!issued) issue_first(i0, last);
    __pipeline_wait_prior(kDepth - 2);  // rows i0 and i0 + 1
    if (from_row) {
      const RowIn first = take(i0);
      c = {first.d, first.u, first.f};
    }
    return i0 + 1 <= last ? take(i0 + 1) : RowIn{};
  }
  // Row i + 1, which step i meets (in `next`), with row i + kDepth issued into row i's slot,
  // taken two steps ago, and row i + 2 waited for and taken into `next`. Slot i + 1 stays as it
  // is until the next call (its CheckIn may be taken).
  __device__ RowIn advance(std::size_t i, std::size_t last, RowIn& next) const {
    const RowIn r = next;
    issue(i + kDepth, last);
    __pipeline_wait_prior(kDepth - 2);
    if (i + 2 <= last) next = take(i + 2);
    return r;
  }
};

// Steps i0 to i1 - 1 of the elimination (step i meets row i + 1), rows i0 to i1 through `ring`
// (their first kDepth already issued where `issued` is set: issue_first), so the wait before
// each step is for the row it needs only. `c` is row i0 as eliminated, or where `from_row` is
// set, taken from the ring as read (the elimination's start, i0 = 0). at_step(i, c) sees the row
// before step i. Every copy issued is waited for before the return: the ring is free again.
template <typename Ring, typename Store, typename AtStep>
__device__ GeppCarry eliminate_range(const Ring& ring, std::size_t i0, std::size_t i1, GeppCarry c,
                                     bool from_row, bool issued, const Store& saved, bool& singular,
                                     AtStep at_step) {
  RowIn next = ring.start(i0, i1, issued, from_row, c);
  for (std::size_t i = i0; i < i1; ++i) {
    const RowIn r = ring.advance(i, i1, next);
    at_step(i, c);
    step(ring.a, ring.j, i, c, r, saved, singular);
  }
  __pipeline_wait_prior(0);
  return c;
}

// The same steps kChunk at a time, unrolled, i0 a multiple of kChunk, so that step i's pivot
// row goes to rows.put(i % kChunk) with a constant slot (registers, RegisterRows);
// at_chunk(i, c) sees the row before each chunk's first step, at_slot(i) each step's slot of row
// i + 1 (the ring's CheckIn) before it is used again.
template <std::size_t kChunk, typename Ring, typename Rows, typename AtChunk, typename AtSlot>
__device__ GeppCarry eliminate_chunks(const Ring& ring, std::size_t i0, std::size_t i1, GeppCarry c,
                                      bool from_row, bool issued, Rows& rows, bool& singular,
                                      AtChunk at_chunk, AtSlot at_slot) {
  RowIn next = ring.start(i0, i1, issued, from_row, c);
  for (std::size_t base = i0; base < i1; base += kChunk) {
    at_chunk(base, c);
#pragma unroll
    for (std::size_t k = 0; k < kChunk; ++k) {
      const std::size_t i = base + k;
      if (i < i1) {
        const RowIn r = ring.advance(i, i1, next);
        at_slot(i);
        step(ring.a, ring.j, i, c, r, SlotOf<Rows>{rows, k}, singular);
      }
    }
  }
  __pipeline_wait_prior(0);
  return c;
}

// The whole elimination through the ring, from row 0. Returns the last row as eliminated.
template <int kDepth, typename Store>
__device__ GeppCarry eliminate_from_ring(const InterleavedGepp& a, std::size_t j, double* ring,
                                         int t, const Store& saved, bool& singular) {
  return eliminate_range(Ring<kDepth>{a, j, ring, t}, 0, a.n - 1, GeppCarry{}, true, false, saved,
                         singular, [](std::size_t, const GeppCarry&) {});
}

// Back substitution, x written as it is known (row n - 1 from the last row as eliminated, then
// row(i, pivot row i) for i = n - 2 down to 0), or where row() is told not to, by store_last()
// later; finish() flags the first row with a non-finite x. x goes out evict-first, but where the
// batch is checked (it is read again soon, from L2).
struct Backward {
  const InterleavedGepp& a;
  std::size_t j, at, first_bad;
  double x1, x2;  // x of the two rows after the next
  __device__ Backward(const InterleavedGepp& args, std::size_t system, const GeppCarry& c)
      : a(args),
        j(system),
        at((args.n - 1) * args.count + system),
        first_bad(args.n),
        x1(c.f * reciprocal(c.d)),
        x2(0.0) {
    if (!isfinite(x1)) first_bad = a.n - 1;
    store(x1);
  }
  __device__ void store(double v) const {
    if (a.check.errors != nullptr) {
      __stcg(a.x + at, v);
    } else {
      __stcs(a.x + at, v);
    }
  }
  __device__ void row(std::size_t i, const GeppSaved& s, bool keep = true) {
    at -= a.count;
    const double xi = gepp_back(s, x1, x2);
    if (!isfinite(xi)) first_bad = i;
    if (keep) store(xi);
    x2 = x1;
    x1 = xi;
  }
  __device__ void store_last() const { store(x1); }  // the last row's x
  __device__ void finish() const {
    if (first_bad < a.n && a.x_flag != nullptr) flag(a.x_flag, j * a.n + first_bad);
  }
};

// The substitution with the pivot rows from `rows`: take(i) gives row i's, done(i) says that its
// values are used.
template <typename Rows>
__device__ void substitute(const InterleavedGepp& a, std::size_t j, const GeppCarry& c,
                           Rows& rows) {
  Backward back(a, j, c);
  for (std::size_t i = a.n - 1; i-- > 0;) {
    back.row(i, rows.take(i));
    rows.done(i);
  }
  back.finish();
}

// The pivot rows where they wait in shared memory.
struct SharedRows {
  const SavedRows& saved;
  __device__ GeppSaved take(std::size_t i) const { return saved.get(i); }
  __device__ void done(std::size_t) const {}
};

// The pivot rows from device memory (`saved`, whose row 0 is row `first`), rows `first` to n - 2,
// read kDepth rows ahead (n - 2, n - 3,
// ..., the k-th of them commit group k) into the thread's ring in shared memory, free once the
// elimination is done, by cp.async; a row's slot takes the next row only once its values are
// used. Rows below `first` come from `head` in shared memory.
template <int kDepth>
struct RingRows {
  const SavedRows& saved;
  const SavedRows* head;  // rows below first (null where first is 0)
  double* ring;
  int t;
  std::size_t n, first;
  __device__ RingRows(const SavedRows& s, const SavedRows* h, std::size_t first_row, double* r,
                      int threads, std::size_t rows)
      : saved(s), head(h), ring(r), t(threads), n(rows), first(first_row) {
#pragma unroll
    for (int k = 0; k < kDepth; ++k) {
      issue(n - 2 - k, first + static_cast<std::size_t>(k) + 2 <= n);
    }
  }
  __device__ double* slot(std::size_t row) const {
    return ring + (row & (kDepth - 1)) * 4 * t;
  }
  __device__ void issue(std::size_t row, bool real) const {
    if (real) {
      double* const dst = slot(row);
      const std::size_t at = (row - first) * saved.stride;
      __pipeline_memcpy_async(dst, saved.f + at, sizeof(double));
      __pipeline_memcpy_async(dst + t, saved.u1 + at, sizeof(double));
      __pipeline_memcpy_async(dst + 2 * t, saved.u2 + at, sizeof(double));
    }
    __pipeline_commit();
  }
  __device__ GeppSaved take(std::size_t i) const {
    if (i < first) return head->get(i);
    __pipeline_wait_prior(kDepth - 1);  // row i
    const double* const src = slot(i);
    return {src[0], src[t], src[2 * t]};
  }
  __device__ void done(std::size_t i) const {
    if (i >= first) issue(i - kDepth, i >= first + kDepth);  // into row i's slot
  }
};

// The recomputing variants (kRecomputedChunks*): one chunk of kChunk steps' pivot rows on chip,
// in shared memory (row i at i % kChunk; SharedChunk) or in registers (RegisterChunk), each
// eliminated into and substituted from as its slots allow; the rows as eliminated at the chunks'
// starts in device memory (`starts`, chunk k's three numbers at (3 k + 0, 1, 2) * count + j).
template <std::size_t kChunk>
struct ChunkRows {
  SavedRows rows;
  __device__ void put(std::size_t i, const GeppSaved& s) const { rows.put(i % kChunk, s); }
  __device__ GeppSaved get(std::size_t i) const { return rows.get(i % kChunk); }
};

// A chunk in shared memory takes the rolled loop (eliminate_range): unrolled like the registers'
// chunk, 64 steps needed 255 registers and spilled.
template <std::size_t kChunk>
struct SharedChunk {
  ChunkRows<kChunk> rows;
  template <typename Ring, typename AtChunk, typename AtSlot>
  __device__ GeppCarry eliminate(const Ring& ring, std::size_t i0, std::size_t i1, GeppCarry c,
                                 bool from_row, bool issued, bool& singular, AtChunk at_chunk,
                                 AtSlot at_slot) {
    return eliminate_range(ring, i0, i1, c, from_row, issued, rows, singular,
                           [&](std::size_t i, const GeppCarry& row) {
                             if (i % kChunk == 0) at_chunk(i, row);
                             at_slot(i);
                           });
  }
  // x of rows to - 1 down to from, the first kept back (Backward::store_last).
  __device__ void substitute(Backward& back, std::size_t from, std::size_t to) const {
    for (std::size_t i = to; i-- > from;) back.row(i, rows.get(i), i > from);
  }
};

template <std::size_t kChunk>
struct RegisterChunk {
  RegisterRows<kChunk> rows;
  template <typename Ring, typename AtChunk, typename AtSlot>
  __device__ GeppCarry eliminate(const Ring& ring, std::size_t i0, std::size_t i1, GeppCarry c,
                                 bool from_row, bool issued, bool& singular, AtChunk at_chunk,
                                 AtSlot at_slot) {
    return eliminate_chunks<kChunk>(ring, i0, i1, c, from_row, issued, rows, singular, at_chunk,
                                    at_slot);
  }
  __device__ void substitute(Backward& back, std::size_t from, std::size_t to) const {
#pragma unroll
    for (std::size_t k = kChunk; k-- > 0;) {
      if (from + k < to) back.row(from + k, rows.get(k), k > 0);
    }
  }
};

// Row i of the system as given (dl of row 0 and du of row n - 1 as 0), read again for the check.
__device__ __forceinline__ RowIn check_row(const InterleavedGepp& a, std::size_t row,
                                           std::size_t at) {
  RowIn r;
  r.l = row > 0 ? __ldcg(a.dl + at) : 0.0;
  r.d = __ldcg(a.d + at);
  r.u = row + 1 < a.n ? __ldcg(a.du + at) : 0.0;
  r.f = __ldcg(a.f + at);
  return r;
}

// The check's rows in order, each with the x beside it (check_terms.cuh: row_bits, the separate
// check's arithmetic): row q's residual needs x_{q-1} and x_q (x_left, x_mid, from the rows
// before) and x_{q+1}.
struct RowChecks {
  check::RowBits worst{0, 0, 0, 0};
  double x_left = 0.0, x_mid = 0.0;
  __device__ void add(double l, double d, double u, double f, double x_right) {
    worst = check::max_bits(worst, check::row_bits(l, d, u, x_left, x_mid, x_right, f));
    x_left = x_mid;
    x_mid = x_right;
  }
};

// The elimination keeping one chunk's pivot rows in `chunk` and each chunk's start in device
// memory; the substitution takes the last chunk's as they are and eliminates each earlier chunk
// again from its start (gepp_rows_solve_chunked's order, the same bits), its first rows issued
// while the chunk after it is substituted. x may alias f: a chunk's first x waits until the chunk
// before has read that row (its last step).
//
// With a ring that brings the check's rows (Ring::kCheck = kChunk; a.check set, x apart from f),
// each system gets its verdict without a pass of its own: as chunk k is eliminated again, its
// slots bring rows (k + 1) kChunk + 1 to (k + 2) kChunk, whose x the substitution has just found
// and whose rows were just read (both still in L2), and the x beside them; rows 0 to kChunk are
// read at the end. A chunk's first slots are issued while the chunk after it is substituted,
// before those x are known, so their check parts follow as groups of their own once it is.
template <std::size_t kChunk, typename Ring, typename Chunk>
__device__ void recomputed_chunks(const InterleavedGepp& a, std::size_t j, const Ring& ring,
                                  Chunk& chunk) {
  constexpr bool kChecks = Ring::kCheck > 0;
  static_assert(!kChecks || Ring::kCheck == kChunk);
  const std::size_t n = a.n, m = a.count, steps = n - 1;
  const std::size_t chunks = (steps + kChunk - 1) / kChunk;
  double* const starts = a.pivot_rows + j;
  auto keep_start = [&](std::size_t i, const GeppCarry& c) {
    if (i + kChunk < steps) {  // the last chunk's pivot rows stay
      double* const s = starts + 3 * (i / kChunk) * m;
      s[0] = c.d;
      s[m] = c.u;
      s[2 * m] = c.f;
    }
  };
  auto end_of = [&](std::size_t k) { return (k + 1) * kChunk < steps ? (k + 1) * kChunk : steps; };
  Ring again = ring;  // the passes after the first: with the check's rows
  again.checking = kChecks;
  RowChecks checks;
  auto check_slot = [&](std::size_t i) {
    if constexpr (kChecks) {
      if (i + 1 + kChunk < n) {
        const CheckIn c = again.take_check(i + 1);
        checks.add(c.l, c.d, c.u, c.f, c.x_right);
      }
    }
  };
  bool singular = false;
  const GeppCarry last = chunk.eliminate(ring, 0, steps, GeppCarry{}, true, false, singular,
                                         keep_start, [](std::size_t) {});
  if (last.d == 0.0 && !singular) flag(a.pivot_flag, j * n + n - 1);
  Backward back(a, j, last);
  for (std::size_t k = chunks; k-- > 0;) {
    const std::size_t from = k * kChunk, to = end_of(k);
    if (k + 1 < chunks) {  // this chunk's pivot rows again, from its start (its rows issued)
      const double* const s = starts + 3 * k * m;
      bool flagged = true;      // the first elimination flagged any zero pivot
      checks.x_left = back.x1;  // x of rows (k + 1) kChunk and the one after
      checks.x_mid = back.x2;
      chunk.eliminate(
          again, from, to, GeppCarry{s[0], s[m], s[2 * m]}, false, true, flagged,
          [](std::size_t, const GeppCarry&) {}, check_slot);
      back.store_last();  // x of row `to`, the next chunk's first: its f is read no more
    }
    if (k > 0) ring.issue_first((k - 1) * kChunk, end_of(k - 1));
    chunk.substitute(back, from, to);
    if (kChecks && k > 0) again.issue_first_checks((k - 1) * kChunk, end_of(k - 1));
  }
  back.store_last();  // row 0's (for n = 1, again)
  back.finish();
  if constexpr (kChecks) {
    const std::size_t rows = n - 1 < kChunk ? n : kChunk + 1;
    checks.x_left = 0.0;
    checks.x_mid = back.x1;  // x_0, then x_1 in back.x2
#pragma unroll 8
    for (std::size_t i = 0; i < rows; ++i) {
      const std::size_t at = i * m + j;
      const RowIn r = check_row(a, i, at);
      const double x_right = i + 1 >= n ? 0.0 : i == 0 ? back.x2 : __ldcg(a.x + at + m);
      checks.add(r.l, r.d, r.u, r.f, x_right);
    }
    check::classify(j, check::error_of(checks.worst), a.check.tolerance, a.check);
  }
}

// kWhere: the rows ahead in registers or in shared memory, the pivot rows in shared or device
// memory (never kChoose).
template <GeppKernel kWhere, bool kCheck = false>
__global__ void __launch_bounds__(kMaxBlock) interleaved_gepp_kernel(InterleavedGepp a) {
  extern __shared__ double shared[];
  const std::size_t j = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (j >= a.count) return;
  const int threads = static_cast<int>(blockDim.x);
  double* const mine = shared + threadIdx.x;
  if constexpr (kWhere == GeppKernel::kRecomputedChunksOf32) {
    constexpr std::size_t kChunk = 32;
    const std::size_t plane = kChunk * threads;
    SharedChunk<kChunk> chunk{{{mine, mine + plane, mine + 2 * plane, std::size_t(threads)}}};
    recomputed_chunks<kChunk>(a, j, Ring<kSharedRows>{a, j, mine + 3 * plane, threads}, chunk);
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
    RingRows<kSharedRows> rows(tail, &head, first, ring, threads, a.n);
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
  SharedRows rows{saved};
  substitute(a, j, c, rows);
}

// Shared memory a thread needs: its pivot rows where they wait there, and the ring of rows ahead
// where there is one (its slots larger where they bring the check's rows).
std::size_t thread_bytes(std::size_t n, GeppKernel where, bool check = false) {
  const std::size_t ring = kSharedRows * (check ? 9 : 4) * sizeof(double);
  switch (where) {
    case GeppKernel::kRowsInRegisters:
      return kSavedBytesPerRow * n;
    case GeppKernel::kRowsInSharedMemory:
      return kSavedBytesPerRow * n + ring;
    case GeppKernel::kTailInDeviceMemory:
      return kSavedBytesPerRow * head_rows(n) + ring;
    case GeppKernel::kRecomputedChunksOf32:
      return kSavedBytesPerRow * 32 + ring;
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

std::size_t workspace_rows(std::size_t n, GeppKernel kernel) {
  const std::size_t steps = n > 0 ? n - 1 : 0;
  switch (kernel) {
    case GeppKernel::kPivotRowsInDeviceMemory:
      return n;
    case GeppKernel::kTailInDeviceMemory:
      return n - head_rows(n);
    case GeppKernel::kRecomputedChunksOf32:
      return (steps + 31) / 32;
    case GeppKernel::kRecomputedChunksOf16InRegisters:
      return (steps + 15) / 16;
    default:
      return 0;
  }
}

}  // namespace

GeppKernel choose_gepp_kernel(std::size_t n, std::size_t count, bool checked) {
  if (n <= kMaxRegisterGeppSystem) return GeppKernel::kRowsInRegisters;
  if (n <= kMaxSharedGeppSystem) return GeppKernel::kRowsInSharedMemory;
  if (count >= kMinRecomputedGeppSystems) {
    return n <= kMaxSharedChunkGeppSystem && !checked
               ? GeppKernel::kRecomputedChunksOf32
               : GeppKernel::kRecomputedChunksOf16InRegisters;
  }
  return n <= kMaxTailGeppSystem ? GeppKernel::kTailInDeviceMemory
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
  if (kernel == GeppKernel::kChoose) kernel = choose_gepp_kernel(a.n, a.count, check);
  switch (kernel) {
    case GeppKernel::kRowsInRegisters:
      launch_with<GeppKernel::kRowsInRegisters>(a, stream);
      return false;
    case GeppKernel::kRowsInSharedMemory:
      launch_with<GeppKernel::kRowsInSharedMemory>(a, stream);
      return false;
    case GeppKernel::kTailInDeviceMemory:
      launch_with<GeppKernel::kTailInDeviceMemory>(a, stream);
      return false;
    case GeppKernel::kRecomputedChunksOf32:
      launch_with<GeppKernel::kRecomputedChunksOf32>(a, stream);
      return false;
    case GeppKernel::kRecomputedChunksOf16InRegisters:
      if (check) {
        launch_with<GeppKernel::kRecomputedChunksOf16InRegisters, true>(a, stream);
      } else {
        launch_with<GeppKernel::kRecomputedChunksOf16InRegisters>(a, stream);
      }
      return check;
    default:
      launch_with<GeppKernel::kPivotRowsInDeviceMemory>(a, stream);
      return false;
  }
}

cudaError_t set_interleaved_gepp_limits() {
  static_assert(32 * (kSavedBytesPerRow * kMaxSharedGeppSystem + kSharedRows * 32) <= kSharedLimit);
  for (auto k : {interleaved_gepp_kernel<GeppKernel::kRowsInRegisters>,
                 interleaved_gepp_kernel<GeppKernel::kRowsInSharedMemory>,
                 interleaved_gepp_kernel<GeppKernel::kPivotRowsInDeviceMemory>,
                 interleaved_gepp_kernel<GeppKernel::kTailInDeviceMemory>,
                 interleaved_gepp_kernel<GeppKernel::kRecomputedChunksOf32>,
                 interleaved_gepp_kernel<GeppKernel::kRecomputedChunksOf16InRegisters>,
                 interleaved_gepp_kernel<GeppKernel::kRecomputedChunksOf16InRegisters, true>}) {
    const cudaError_t e =
        cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedLimit);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace stripesolve::tridiag::gpu
