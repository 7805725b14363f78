// The recomputing variants of interleaved gepp (interleaved_gepp.cuh:
// kRecomputedChunksOf32LastOf48 and kRecomputedChunksOf16InRegisters): one chunk's pivot rows on
// chip, each earlier chunk eliminated again for the substitution, and the check that rides on that
// second elimination. Device code only, included by interleaved_gepp.cu alone (the parts:
// gepp_thread.cuh).
#pragma once

#include "tridiag/cuda/gepp_thread.cuh"

namespace stripesolve::tridiag::gpu::gepp {

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
  template <typename Back>
  __device__ void substitute(Back& back, std::size_t from, std::size_t to) const {
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
  template <typename Back>
  __device__ void substitute(Back& back, std::size_t from, std::size_t to) const {
#pragma unroll
    for (std::size_t k = kChunk; k-- > 0;) {
      if (from + k < to) back.row(from + k, rows.get(k), k > 0);
    }
  }
};

// The last chunk's pivot rows where it has kExtra steps more than kChunk (recomputed_chunks'
// kExtra): its first kChunk in `shared`'s slots 0 to kChunk - 1, the others in registers.
template <std::size_t kChunk, std::size_t kExtra>
struct LastChunk {
  const SavedRows& shared;
  RegisterRows<kExtra> registers;
  // x of rows to - 1 down to from (from + kChunk + kExtra >= to), the first kept back.
  template <typename Back>
  __device__ void substitute(Back& back, std::size_t from, std::size_t to) const {
    const std::size_t mid = from + kChunk < to ? from + kChunk : to;
#pragma unroll
    for (std::size_t k = kExtra; k-- > 0;) {
      if (mid + k < to) back.row(mid + k, registers.get(k));
    }
    for (std::size_t i = mid; i-- > from;) back.row(i, shared.get(i - from), i > from);
  }
};
template <std::size_t kChunk>
struct LastChunk<kChunk, 0> {};  // none: the last chunk is like the others

// A thread's whole system: its n rows, its chunks' starting rows at pivot_rows + j, and the
// substitution from its last row as eliminated (a zero there flagged).
struct WholeSystem {
  __device__ std::size_t rows(const InterleavedGepp& a) const { return a.n; }
  __device__ double* starts(const InterleavedGepp& a, std::size_t j) const {
    return a.pivot_rows + j;
  }
  __device__ Backward<> backward(const InterleavedGepp& a, std::size_t j, const GeppCarry& last,
                                 bool singular) const {
    if (last.d == 0.0 && !singular) flag(a.pivot_flag, j * a.n + a.n - 1);
    return Backward<>(a, j, last);
  }
};

// Half a system in the twisted variant (two threads a system, a warp each half of 32 systems):
// the upper half's gepp_upper_rows(n) rows from the top or the lower half's from the bottom
// (map: the direction a value, the same code for both warps; a copy of the code for each
// direction ran 10-30% slower on an H200), its chunks' starts after the upper half's (`offset`
// chunks on); the two threads of a system meet through `exchange` (shared memory, three doubles
// a thread at a stride of the block's 64 threads; `me` the thread's place, the other half's 32
// from it): each leaves its last row as eliminated there, and after the block's barrier (every
// thread of the block reaches it, at this one place) both take the same 2 x 2 step (gepp_meet),
// so that x_(m-1) and x_m agree to the bit.
struct TwistedHalf {
  HalfRows map;
  std::size_t half, offset;
  double* exchange;
  int me;
  static constexpr int kThreads = 64;
  __device__ std::size_t rows(const InterleavedGepp&) const { return half; }
  __device__ double* starts(const InterleavedGepp& a, std::size_t j) const {
    return a.pivot_rows + (map.from_bottom ? 3 * offset * a.count : 0) + j;
  }
  __device__ Backward<HalfRows> backward(const InterleavedGepp& a, std::size_t j,
                                         const GeppCarry& last, bool singular) const {
    exchange[me] = last.d;
    exchange[me + kThreads] = last.u;
    exchange[me + 2 * kThreads] = last.f;
    __syncthreads();
    const int other = me ^ 32;
    const GeppCarry theirs{exchange[other], exchange[other + kThreads],
                           exchange[other + 2 * kThreads]};
    const GeppMeet meet = map.from_bottom ? gepp_meet(theirs, last) : gepp_meet(last, theirs);
    const std::size_t m = gepp_upper_rows(static_cast<long>(a.n));
    if (!map.from_bottom && !singular) {  // the upper thread names the rows that meet
      if (meet.pivot == 0.0) {
        flag(a.pivot_flag, j * a.n + m - 1);
      } else if (meet.last_pivot == 0.0) {
        flag(a.pivot_flag, j * a.n + m);
      }
    }
    return map.from_bottom ? Backward<HalfRows>(a, map, j, half - 1, meet.x_lower, meet.x_upper)
                           : Backward<HalfRows>(a, map, j, half - 1, meet.x_upper, meet.x_lower);
  }
};

// The elimination keeping one chunk's pivot rows in `chunk` and each chunk's start in device
// memory; the substitution takes the last chunk's as they are and eliminates each earlier chunk
// again from its start (gepp_rows_solve_chunked's order, the same bits), its first rows issued
// while the chunk after it is substituted. x may alias f: a chunk's first x waits until the chunk
// before has read that row (its last step).
//
// kExtra > 0 (a SharedChunk only): the last chunk takes the last kChunk + kExtra steps, its
// pivot rows after the first kChunk in registers (LastChunk), and the chunk before it is the
// shorter: rows not read again are those of that chunk only (at n = 128 with chunks of 32, 79
// rows of 128 read again against 96).
//
// With a ring that brings the check's rows (Ring::kCheck = kChunk; a.check set, x apart from f),
// each system gets its verdict without a pass of its own: as chunk k is eliminated again, its
// slots bring rows (k + 1) kChunk + 1 to (k + 2) kChunk, whose x the substitution has just found
// and whose rows were just read (both still in L2), and the x beside them; rows 0 to kChunk are
// read at the end. A chunk's first slots are issued while the chunk after it is substituted,
// before those x are known, so their check parts follow as groups of their own once it is.
//
// `ends`: what the thread eliminates and where its substitution starts: a whole system
// (WholeSystem), or a twisted half (TwistedHalf: its rows, and the 2 x 2 step where it meets the
// other half).
template <std::size_t kChunk, std::size_t kExtra = 0, typename Ring, typename Chunk,
          typename Ends = WholeSystem>
__device__ void recomputed_chunks(const InterleavedGepp& a, std::size_t j, const Ring& ring,
                                  Chunk& chunk, const Ends& ends = {}) {
  constexpr bool kChecks = Ring::kCheck > 0;
  static_assert(!kChecks || (Ring::kCheck == kChunk && kExtra == 0));
  static_assert(!kChecks || std::is_same_v<Ends, WholeSystem>);
  const std::size_t n = ends.rows(a), m = a.count, steps = n - 1;
  // kExtra > 0: the last chunk is [last_from, steps), the ones before it start at multiples of
  // kChunk. kExtra = 0 (last_from unused): every chunk starts at a multiple of kChunk, the last
  // holding what is left, in expressions of their own below: one formula for both layouts gave
  // the chunks of 16 238 registers against 190 (four blocks an SM against five).
  const std::size_t last_from = steps > kChunk + kExtra ? steps - kChunk - kExtra : 0;
  const std::size_t chunks = kExtra == 0  ? (steps + kChunk - 1) / kChunk
                             : steps == 0 ? 0
                                          : (last_from + kChunk - 1) / kChunk + 1;
  double* const starts = ends.starts(a, j);
  auto keep_start = [&](std::size_t i, const GeppCarry& c) {
    if (kExtra == 0 ? i + kChunk < steps : i < last_from) {  // the last chunk's pivot rows stay
      double* const s = starts + 3 * (i / kChunk) * m;
      s[0] = c.d;
      s[m] = c.u;
      s[2 * m] = c.f;
    }
  };
  auto end_of = [&](std::size_t k) {
    if constexpr (kExtra == 0) {
      return (k + 1) * kChunk < steps ? (k + 1) * kChunk : steps;
    } else {
      return k + 1 == chunks ? steps : (k + 1) * kChunk < last_from ? (k + 1) * kChunk : last_from;
    }
  };
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
  GeppCarry last;
  LastChunk<kChunk, kExtra> tail = [&] {
    if constexpr (kExtra == 0) {
      return LastChunk<kChunk, 0>{};
    } else {
      return LastChunk<kChunk, kExtra>{chunk.rows.rows, {}};
    }
  }();
  if constexpr (kExtra == 0) {
    last = chunk.eliminate(ring, 0, steps, GeppCarry{}, true, false, singular, keep_start,
                           [](std::size_t) {});
  } else {
    // One pass through the ring: the steps before the last chunk's registers rolled (pivot rows
    // to slot i % kChunk, or i - last_from in the last chunk), its last kExtra unrolled.
    const std::size_t mid = last_from + kChunk < steps ? last_from + kChunk : steps;
    RowIn next = ring.start(0, steps, false, true, last);
    for (std::size_t i = 0; i < mid; ++i) {
      const RowIn r = ring.advance(i, steps, next);
      const bool before = i < last_from;
      if (before && i % kChunk == 0) keep_start(i, last);
      step(a, j, i, last, r,
           SlotOf<const SavedRows>{tail.shared, before ? i % kChunk : i - last_from}, singular,
           ring.map);
    }
#pragma unroll
    for (std::size_t k = 0; k < kExtra; ++k) {
      const std::size_t i = mid + k;
      if (i < steps) {
        const RowIn r = ring.advance(i, steps, next);
        step(a, j, i, last, r, SlotOf<RegisterRows<kExtra>>{tail.registers, k}, singular, ring.map);
      }
    }
    __pipeline_wait_prior(0);
  }
  auto back = ends.backward(a, j, last, singular);
  for (std::size_t k = chunks; k-- > 0;) {
    const std::size_t from = kExtra > 0 && k + 1 == chunks ? last_from : k * kChunk;
    const std::size_t to = end_of(k);
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
    if constexpr (kExtra > 0) {
      if (k + 1 == chunks) {
        tail.substitute(back, from, to);
      } else {
        chunk.substitute(back, from, to);
      }
    } else {
      chunk.substitute(back, from, to);
    }
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
      const RowIn r = load_row</*kAgain=*/true>(a, i, at);
      const double x_right = i + 1 >= n ? 0.0 : i == 0 ? back.x2 : __ldcg(a.x + at + m);
      checks.add(r.l, r.d, r.u, r.f, x_right);
    }
    check::classify(j, check::error_of(checks.worst), a.check.tolerance, a.check);
  }
}

}  // namespace stripesolve::tridiag::gpu::gepp
