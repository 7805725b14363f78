// The parts a thread's gepp on an interleaved batch is built from (interleaved_gepp.cu, a thread
// a system): a row as read, the ring that brings rows ahead of the elimination by cp.async (and,
// where asked, the check's rows), the elimination's steps over a range of rows, rolled or a
// chunk at a time unrolled, and the back substitution that writes x. Device code only, included
// by interleaved_gepp.cu alone; the recomputing variants' chunks are in gepp_chunks.cuh.
#pragma once

#include <type_traits>

#include <cuda_pipeline.h>

#include "tridiag/cuda/check_terms.cuh"
#include "tridiag/cuda/gepp_rows.h"
#include "tridiag/cuda/interleaved_gepp.cuh"

namespace stripesolve::tridiag::gpu::gepp {

__device__ __forceinline__ void flag(unsigned long long* f, std::size_t row) {
  atomicMin(f, static_cast<unsigned long long>(row));
}

// Where a thread finds its system's rows: row i of system j at i * count + j, its dl and du as
// given (PlainRows); or, for the twisted variant's two halves (two threads a system, from both
// ends), a half's rows in the order it takes them (HalfRows): the upper half's as given, the
// lower half's from the last row up, row i being row n - 1 - i with dl and du exchanged, so that
// the same steps eliminate both. `name` gives a row's own number (for the flags), `previous` the
// place of the row before (the substitution's order).
struct PlainRows {
  __device__ std::size_t at(const InterleavedGepp& a, std::size_t j, std::size_t row) const {
    return row * a.count + j;
  }
  __device__ const double* lower(const InterleavedGepp& a) const { return a.dl; }
  __device__ const double* upper(const InterleavedGepp& a) const { return a.du; }
  __device__ std::size_t name(const InterleavedGepp&, std::size_t row) const { return row; }
  __device__ std::size_t previous(const InterleavedGepp& a, std::size_t at) const {
    return at - a.count;
  }
};
struct HalfRows {
  bool from_bottom;  // the lower half (the same for a warp's threads: no divergence)
  __device__ std::size_t name(const InterleavedGepp& a, std::size_t row) const {
    return from_bottom ? a.n - 1 - row : row;
  }
  __device__ std::size_t at(const InterleavedGepp& a, std::size_t j, std::size_t row) const {
    return name(a, row) * a.count + j;
  }
  __device__ const double* lower(const InterleavedGepp& a) const {
    return from_bottom ? a.du : a.dl;
  }
  __device__ const double* upper(const InterleavedGepp& a) const {
    return from_bottom ? a.dl : a.du;
  }
  __device__ std::size_t previous(const InterleavedGepp& a, std::size_t at) const {
    return from_bottom ? at + a.count : at - a.count;
  }
};

// Row `row` of the thread's system as the elimination takes it: dl of row 0 and du of row n - 1,
// which the batch's contract ignores, as 0.
struct RowIn {
  double l, d, u, f;
};

// Read evict-first, or where kAgain (the check reads it a second time), cached in L2 only.
template <bool kAgain = false>
__device__ __forceinline__ RowIn load_row(const InterleavedGepp& a, std::size_t row,
                                          std::size_t at) {
  auto load = [](const double* p) { return kAgain ? __ldcg(p) : __ldcs(p); };
  RowIn r;
  r.l = row > 0 ? load(a.dl + at) : 0.0;
  r.d = load(a.d + at);
  r.u = row + 1 < a.n ? load(a.du + at) : 0.0;
  r.f = load(a.f + at);
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

// Step i of the elimination with row i + 1 in `r`: the pivot row saved, a singular matrix
// flagged once (row i by its own number: `map`).
template <typename Store, typename Map = PlainRows>
__device__ __forceinline__ void step(const InterleavedGepp& a, std::size_t j, std::size_t i,
                                     GeppCarry& c, const RowIn& r, const Store& saved,
                                     bool& singular, const Map& map = {}) {
  double pivot = 0.0;
  const GeppSaved s = gepp_step(c, r.l, r.d, r.u, r.f, pivot);
  if (pivot == 0.0 && !singular) {
    singular = true;
    flag(a.pivot_flag, j * a.n + map.name(a, i));
  }
  saved.put(i, s);
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

// Starts copying row `row` of system j as given (dl of row 0 and du of row n - 1 as 0) to dst[0],
// dst[t], dst[2 t] and dst[3 t] by cp.async (the caller commits the group); rows as `map` takes
// them.
template <typename Map = PlainRows>
__device__ __forceinline__ void copy_row_async(const InterleavedGepp& a, std::size_t j,
                                               std::size_t row, double* dst, int t,
                                               const Map& map = {}) {
  const std::size_t at = map.at(a, j, row);
  if (row > 0) {
    __pipeline_memcpy_async(dst, map.lower(a) + at, sizeof(double));
  } else {
    dst[0] = 0.0;
  }
  __pipeline_memcpy_async(dst + t, a.d + at, sizeof(double));
  if (row + 1 < a.n) {
    __pipeline_memcpy_async(dst + 2 * t, map.upper(a) + at, sizeof(double));
  } else {
    dst[2 * t] = 0.0;
  }
  __pipeline_memcpy_async(dst + 3 * t, a.f + at, sizeof(double));
}

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
// also brings its CheckIn (the check's rows past the end are not read). Rows as `map` takes them
// (the check's only as given).
template <int kDepth, std::size_t kCheckAhead = 0, typename Map = PlainRows>
struct Ring {
  static_assert(kCheckAhead == 0 || std::is_same_v<Map, PlainRows>);
  static constexpr std::size_t kCheck = kCheckAhead;
  static constexpr int kSlot = kCheckAhead > 0 ? 9 : 4;
  const InterleavedGepp& a;
  std::size_t j;
  double* ring;
  int t;
  bool checking = false;
  Map map{};
  __device__ double* slot(std::size_t row) const { return ring + (row & (kDepth - 1)) * kSlot * t; }
  __device__ void copy_row(std::size_t row) const { copy_row_async(a, j, row, slot(row), t, map); }
  __device__ void copy_check(std::size_t row) const {
    const std::size_t q = row + kCheckAhead;
    if (kCheckAhead == 0 || q >= a.n) return;
    double* const dst = slot(row) + 4 * t;
    copy_row_async(a, j, q, dst, t);
    if (q + 1 < a.n) {
      __pipeline_memcpy_async(dst + 4 * t, a.x + (q + 1) * a.count + j, sizeof(double));
    } else {
      dst[4 * t] = 0.0;
    }
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
    step(ring.a, ring.j, i, c, r, saved, singular, ring.map);
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
        step(ring.a, ring.j, i, c, r, SlotOf<Rows>{rows, k}, singular, ring.map);
      }
    }
  }
  __pipeline_wait_prior(0);
  return c;
}

// The check's rows in order, each with the x beside it (check_terms.cuh: row_bits, the separate
// check's arithmetic): row q's residual needs x_{q-1} and x_q (x_left, x_mid, from the rows
// before) and x_{q+1}.
struct RowChecks {
  check::RowBits worst{0, 0, 0, 0};
  double x_left = 0.0, x_mid = 0.0;
  // Row r with the x beside it given (the substitution's order, rows descending).
  __device__ void add_row(const RowIn& r, double x_left_of, double x_of, double x_right_of) {
    worst =
        check::max_bits(worst, check::row_bits(r.l, r.d, r.u, x_left_of, x_of, x_right_of, r.f));
  }
  // The next row up, x_left and x_mid from the rows before.
  __device__ void add(double l, double d, double u, double f, double x_right) {
    add_row(RowIn{l, d, u, f}, x_left, x_mid, x_right);
    x_left = x_mid;
    x_mid = x_right;
  }
};

// Back substitution, x written as it is known (row n - 1 from the last row as eliminated, then
// row(i, pivot row i) for i = n - 2 down to 0), or where row() is told not to, by store_last()
// later; finish() flags the first row with a non-finite x. x goes out evict-first, but where the
// batch is checked (it is read again soon, from L2). A twisted half (HalfRows) starts from the
// x its half's last row meets (row `last`, x_last, and x_after beyond it).
template <typename Map = PlainRows>
struct Backward {
  const InterleavedGepp& a;
  Map map;
  std::size_t j, at, first_bad;
  double x1, x2;  // x of the two rows after the next
  __device__ Backward(const InterleavedGepp& args, std::size_t system, const GeppCarry& c)
      : Backward(args, Map{}, system, args.n - 1, c.f * reciprocal(c.d), 0.0) {}
  __device__ Backward(const InterleavedGepp& args, const Map& rows, std::size_t system,
                      std::size_t last, double x_last, double x_after)
      : a(args),
        map(rows),
        j(system),
        at(rows.at(args, system, last)),
        first_bad(args.n),
        x1(x_last),
        x2(x_after) {
    if (!isfinite(x1)) first_bad = last;
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
    at = map.previous(a, at);
    const double xi = gepp_back(s, x1, x2);
    if (!isfinite(xi)) first_bad = i;
    if (keep) store(xi);
    x2 = x1;
    x1 = xi;
  }
  __device__ void store_last() const { store(x1); }  // the last row's x
  __device__ void finish() const {
    if (first_bad < a.n && a.x_flag != nullptr) flag(a.x_flag, j * a.n + map.name(a, first_bad));
  }
};

}  // namespace stripesolve::tridiag::gpu::gepp
