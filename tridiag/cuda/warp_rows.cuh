// CR, PCR and the hybrids (001 §2.1, 003 §2.3.6, §4.2.2) on one system of N = 32 M rows
// (M = 1, 2, 4 or 8) held in the registers of a warp: the device code of warp_reduction.cu (a
// warp a system) and reduction_kernels.cu (a block a system, a warp a class of its rows).
// Internal to tridiag/cuda/.
//
// Lane t holds the M consecutive rows t M + s (the "consecutive" layout), each divided by its
// diagonal: a x[r - d] + x[r] + c x[r + d] = f, with d the distance the level has reached.
//   A level at a distance below M is register arithmetic, plus the few rows at the lane's ends
//   that the neighbouring lanes hold (one shuffle by one lane each).
//   A level at distance M g takes row r's partners from lanes t - g and t + g, same slot.
// Rows outside the system have zero couplings: a partner that a shuffle wraps around from the
// other end of the warp is multiplied by a zero coefficient, so no lane needs a select (the
// callers keep every value finite: a non-finite input row is reported and zeroed).
//   cr             CR levels within the lanes (targets slot 2h - 1 mod 2h), across them on the
//                  lanes' last rows, then back-substitution; 12 eliminations a lane at M = 8.
//   pcr            PCR at distances 1 .. 16 leave the 32 residue classes mod 32 independent; a
//                  transpose through shared memory gives lane c the class c (rows c + 32 k,
//                  the "class" layout), whose PCR steps are within the lane.
//   pcr_thomas     the same, then Thomas on the lane's class.
//   cr_pcr         CR levels down to 64 rows (kLogSmallRows), PCR on those across the lanes,
//                  back-substitution.
//   cr_pcr_thomas  CR levels down to 64 rows, PCR at their distances 1 .. 16, which leave pairs
//                  of rows 32 apart (lanes t and t + 16), solved as 2 x 2 systems (Thomas on
//                  two rows), back-substitution.
// A pivot (a diagonal before the division) that is zero, tiny against its row or not finite is
// reported: an input row's at its row (the smallest such row of the lane, Ctx; the test deferred
// to the lane's last row, divide_input()), a level's by its system (Ctx::level_worst: the test
// deferred to the end, kLevelFlag), but in PCR's last level, whose rows keep no couplings: a
// zero or non-finite pivot there leaves x non-finite (store_x()).
#pragma once

#include <type_traits>

#include <climits>
#include <cuda_runtime.h>

#include "tridiag/cuda/reduction_kernels.cuh"
#include "tridiag/cuda/small_solves.h"
#include "tridiag/tridiag.h"

namespace stripesolve::tridiag::gpu::warp {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kLogSmallRows = 6;  // the hybrids stop CR at 64 rows

// Where row r of a warp's system lies in its shared-memory arrays (one double of padding
// every 8 rows: lanes reading consecutive rows, 8 a lane, hit distinct banks).
__device__ __forceinline__ int pad(int r) {
  return r + (r >> 3);
}
// Doubles such an array takes: pad(kMaxWarpSystem - 1) + 1, rounded.
constexpr int kWarpArray = static_cast<int>(kMaxWarpSystem) + 32;

// What a lane reports, and where the rows of the warp's system are in the whole system: row q
// of the warp's system is row q stride + offset (one warp a system: 1 and 0; a class of a
// block's system: W and the warp).
// kIntegerTest: the pivot test compares high words (1 / tol to 20 bits of mantissa) by
// integer instructions instead of FP64 comparisons. H100, 2^26 unknowns, in every kernel:
// cr_pcr and cr_pcr_thomas at n = 4096 (16-warp blocks) 59.5% of the roofline -> 63.9%, but
// at n = 1024 78% -> 64% and pcr at 256 83% -> 78% (other registers and schedules); so only
// the CR family's 16-warp blocks take it (62.9% and 63.1% then). Keep the test inline in
// test_divided(): as a member function returning bool it cost the warp kernels 10% more
// instructions (selects and byte permutes instead of one integer minimum). (Measured when
// every division took that test at once; it now serves only the rows that a deferred test
// found wanting: recheck_input().)
template <bool kIntegerTest = false>
struct Ctx {
  static constexpr bool kInteger = kIntegerTest;
  int n;
  double inv_tol;  // 1 / the pivot tolerance
  int stride, offset;
  int bad = INT_MAX;    // the lane's smallest input row with a failed pivot
  int bad_x = INT_MAX;  // the lane's smallest row with a non-finite right-hand side or solution
  // The largest |a|, |c| of the lane's level divisions as high words shifted past the sign bit
  // (note_level()), compared once in report().
  unsigned level_worst = 0;
  // The same of the input rows' |a|, |c| (input_worst) and |f| (input_rhs), compared once after
  // their divisions (divide_input(), inputs_failed()).
  unsigned input_worst = 0, input_rhs = 0;
  __device__ int row(int q) const { return q * stride + offset; }
};

template <int M>
struct Rows {
  double a[M], c[M], f[M];
};

struct Row {
  double a, c, f;
};

__device__ __forceinline__ Row shfl_up(double a, double c, double f, int by) {
  return {__shfl_up_sync(kFull, a, by), __shfl_up_sync(kFull, c, by), __shfl_up_sync(kFull, f, by)};
}
__device__ __forceinline__ Row shfl_down(double a, double c, double f, int by) {
  return {__shfl_down_sync(kFull, a, by), __shfl_down_sync(kFull, c, by),
          __shfl_down_sync(kFull, f, by)};
}
template <int M>
__device__ __forceinline__ Row row_of(const Rows<M>& w, int s) {
  return {w.a[s], w.c[s], w.f[s]};
}

// The test of an input row divided by its pivot b: b zero, not finite or tiny against the row
// (|b| <= tol max(|a|, |c|)) leaves |a| or |c| >= 1 / tol, or a NaN (reciprocal() of 0 or
// infinity is NaN): two comparisons (Ctx::kInteger: of high words).
__device__ __forceinline__ void test_divided(auto& ctx, int row, double a, double c) {
  if constexpr (!kPivotTest) return;  // a measuring build (small_solves.h: kPivotTest)
  if constexpr (std::remove_cvref_t<decltype(ctx)>::kInteger) {
    const unsigned ha = high_word(a) & 0x7fffffffu, hc = high_word(c) & 0x7fffffffu;
    if ((ha > hc ? ha : hc) >= (high_word(ctx.inv_tol) & 0x7fffffffu)) {
      ctx.bad = min(ctx.bad, row);
    }
  } else if (!divided_row_passes(a, c, ctx.inv_tol)) {
    ctx.bad = min(ctx.bad, row);
  }
}

// An input row's division with test_divided() deferred like the levels': the largest |a|, |c|
// after it kept as note_level() keeps them, and of |f| apart (only its being infinite or NaN
// counts), one instruction each. inputs_failed() compares once after the lane's rows; where it
// fails, recheck_input() tests each divided row, which names it (a rare path). The high words'
// test fails wherever the exact one does (|a| >= 1 / tol has a high word at least 1 / tol's).
// With each row's test, its right-hand side's and the zeroing made at its division, pcr's test
// cost 10 / 7 / 12% at n = 256 / 1024 / 4096, deferred 7 / 3 / 7% (H200; docs/performance.md,
// "The input rows' test deferred").
__device__ __forceinline__ void divide_input(auto& ctx, double& a, double b, double& c, double& f) {
  const double r = reciprocal(b);
  a *= r;
  c *= r;
  f *= r;
  ctx.input_worst = __viaddmax_u32(high_word(a), high_word(a), ctx.input_worst);
  ctx.input_worst = __viaddmax_u32(high_word(c), high_word(c), ctx.input_worst);
  ctx.input_rhs = __viaddmax_u32(high_word(f), high_word(f), ctx.input_rhs);
}
constexpr unsigned kNonFiniteHighWords = 0xffe00000u;  // an infinity's high word doubled
__device__ __forceinline__ bool inputs_failed(const auto& ctx) {
  const unsigned limit = kPivotTest ? high_word(ctx.inv_tol) << 1 : kNonFiniteHighWords;
  return ctx.input_worst >= limit || ctx.input_rhs >= kNonFiniteHighWords;
}
// Input row `row`, divided by divide_input(): its pivot tested, a non-finite right-hand side
// noted, and the row zeroed where either failed (reported; what a wrapped shuffle brings must
// stay finite).
__device__ __forceinline__ void recheck_input(auto& ctx, int row, double& a, double& c, double& f) {
  test_divided(ctx, row, a, c);
  if (!isfinite(f)) ctx.bad_x = min(ctx.bad_x, row);
  if (!(isfinite(a) && isfinite(c) && isfinite(f))) a = c = f = 0.0;
}

// A level's division with test_divided() deferred: note_level() keeps the largest |a|, |c|
// after it, and report() compares once. No comparison and no row at each division: a level's
// row mixes 2^level input rows, so its number would tell a user little; the system is named.
// PCR divides every row at each of its log2 n levels, and the test made at each division (as
// test_divided()'s) cost pcr 9-34% of its speed on the H200 (docs/performance.md, "The
// near-breakdown test's own cost").
//
// The high word of a double shifted past its sign bit orders as the double's magnitude does (20
// bits of mantissa; infinity and NaN above every finite value). max(h + h, worst) is one
// instruction on sm_90 (VIADDMNMX; the sum drops the sign bit), two a division: pcr's test at
// n = 4096 cost 12% where a shift and a maximum for each cost 21%, FP32 maxima of the high words
// taken as floats' bits 26% (they made its kernel spill): docs/performance.md, "The levels' test
// deferred".
__device__ __forceinline__ void note_level(auto& ctx, double a, double c) {
  if constexpr (!kPivotTest) return;  // a measuring build (small_solves.h: kPivotTest)
  ctx.level_worst = __viaddmax_u32(high_word(a), high_word(a), ctx.level_worst);
  ctx.level_worst = __viaddmax_u32(high_word(c), high_word(c), ctx.level_worst);
}
__device__ __forceinline__ void divide_level(auto& ctx, double& a, double b, double& c, double& f) {
  const double r = reciprocal(b);
  a *= r;
  c *= r;
  f *= r;
  note_level(ctx, a, c);
}

// Stores the solution's row r of the system at `base`, noting a non-finite value.
__device__ __forceinline__ void store_x(auto& ctx, double* x, std::size_t base, int r, double v) {
  if (!isfinite(v)) ctx.bad_x = min(ctx.bad_x, r);
  x[base + r] = v;
}

// Reports the lane's smallest failed rows of the system at `base`: input rows' pivots in
// flags[0], non-finite values in flags[1], and the system (`base`) in flags[kLevelFlag] where a
// level's pivot failed: |a| or |c| after its division at 1 / tol or above (to 20 bits of
// mantissa), infinite or NaN.
__device__ __forceinline__ void report(const auto& ctx, unsigned long long* flags,
                                       std::size_t base) {
  if (ctx.bad != INT_MAX) atomicMin(flags, static_cast<unsigned long long>(base + ctx.bad));
  if (ctx.level_worst >= high_word(ctx.inv_tol) << 1) {
    atomicMin(flags + kLevelFlag, static_cast<unsigned long long>(base));
  }
  if (ctx.bad_x != INT_MAX) {
    atomicMin(flags + 1, static_cast<unsigned long long>(base + ctx.bad_x));
  }
}

// Reports the input rows' failures (flags[0] and [1]) as soon as their divisions are done, and
// forgets them: no row number stays live through the levels, whose test keeps no row. pcr's
// kernels, at the register limit, spilled the registers it freed (ptxas -v: pcr at n = 4096 124
// bytes with it kept, 4 without).
__device__ __forceinline__ void report_inputs(auto& ctx, unsigned long long* flags,
                                              std::size_t base) {
  if (ctx.bad != INT_MAX) atomicMin(flags, static_cast<unsigned long long>(base + ctx.bad));
  if (ctx.bad_x != INT_MAX) {
    atomicMin(flags + 1, static_cast<unsigned long long>(base + ctx.bad_x));
  }
  ctx.bad = ctx.bad_x = INT_MAX;
}

// Eliminates slot s's partners lo (row r - d) and hi (row r + d): its couplings then reach
// r - 2d and r + 2d. kLast: PCR's last level, where both reach outside the system: they are
// zero (products with the partners' couplings to rows outside, zero since the input rows'),
// and so not formed nor tested; only a zero or non-finite pivot could have failed their test,
// and that leaves x non-finite, which store_x() reports.
template <int M, bool kLast = false>
__device__ __forceinline__ void eliminate(auto& ctx, Rows<M>& w, int s, const Row& lo,
                                          const Row& hi) {
  const double a = w.a[s], c = w.c[s];
  // Fused, with the signs on the operands: no separate negations or subtractions.
  const double b = fma(-c, hi.a, fma(-a, lo.c, 1.0));
  double na = kLast ? 0.0 : (-a) * lo.a, nc = kLast ? 0.0 : (-c) * hi.c;
  double nf = fma(-c, hi.f, fma(-a, lo.f, w.f[s]));
  if constexpr (kLast) {
    w.a[s] = w.c[s] = 0.0;
    w.f[s] = nf * reciprocal(b);
    return;
  }
  divide_level(ctx, na, b, nc, nf);
  w.a[s] = na;
  w.c[s] = nc;
  w.f[s] = nf;
}

// ---- PCR on rows held S slots apart (slots k S + S - 1, k < R = M / S), consecutive layout.

// A PCR step at distance D < R (in the rows held): within the lane, and the lane's D first and
// last rows from the neighbouring lanes.
template <int M, int S, int D>
__device__ void pcr_step_within(auto& ctx, Rows<M>& w) {
  constexpr int R = M / S;
  if constexpr (2 * D == R) {  // pairs (k, k + D), one at a time: fewer registers live
#pragma unroll
    for (int k = 0; k < D; ++k) {
      const int s = k * S + S - 1, u = s + D * S;
      const Row lo = shfl_up(w.a[u], w.c[u], w.f[u], 1), hi = shfl_down(w.a[s], w.c[s], w.f[s], 1);
      const Row own = row_of(w, s), up = row_of(w, u);
      eliminate(ctx, w, s, lo, up);
      eliminate(ctx, w, u, own, hi);
    }
  } else {
    Row prev[D], next[D];
#pragma unroll
    for (int k = 0; k < D; ++k) {
      const int sp = (R - D + k) * S + S - 1, sn = k * S + S - 1;
      prev[k] = shfl_up(w.a[sp], w.c[sp], w.f[sp], 1);
      next[k] = shfl_down(w.a[sn], w.c[sn], w.f[sn], 1);
    }
    const Rows<M> old = w;
#pragma unroll
    for (int k = 0; k < R; ++k) {
      const int s = k * S + S - 1;
      const Row lo = k >= D ? row_of(old, s - D * S) : prev[k];
      const Row hi = k + D < R ? row_of(old, s + D * S) : next[k + D - R];
      eliminate(ctx, w, s, lo, hi);
    }
  }
}

// A PCR step at distance g lanes: partners in lanes t - g and t + g, same slot.
template <int M, int S>
__device__ void pcr_step_across(auto& ctx, Rows<M>& w, int g) {
#pragma unroll
  for (int s = S - 1; s < M; s += S) {
    const Row lo = shfl_up(w.a[s], w.c[s], w.f[s], g);
    const Row hi = shfl_down(w.a[s], w.c[s], w.f[s], g);
    eliminate(ctx, w, s, lo, hi);
  }
}

// PCR steps at distances 1 .. R / 2 within the lanes.
template <int M, int S, int D = 1>
__device__ void pcr_within_lanes(auto& ctx, Rows<M>& w) {
  if constexpr (D < M / S) {
    pcr_step_within<M, S, D>(ctx, w);
    pcr_within_lanes<M, S, 2 * D>(ctx, w);
  }
}

// ---- CR levels, consecutive layout.

// CR level h = H (in slots) within the lanes: targets s = 2H - 1 mod 2H, partners s -+ H; the
// last target's upper partner is the next lane's slot H - 1.
template <int M, int H>
__device__ void cr_down_within(auto& ctx, Rows<M>& w) {
  const Row next = shfl_down(w.a[H - 1], w.c[H - 1], w.f[H - 1], 1);
#pragma unroll
  for (int s = 2 * H - 1; s < M; s += 2 * H) {
    const Row hi = s + H < M ? row_of(w, s + H) : next;
    eliminate(ctx, w, s, row_of(w, s - H), hi);
  }
}

// Its back-substitution: slots s = H - 1 mod 2H take x = f - a x[s - H] - c x[s + H] (x kept
// in f); slot -1 is the previous lane's last row, x_prev.
template <int M, int H>
__device__ void cr_up_within(Rows<M>& w, double x_prev) {
#pragma unroll
  for (int s = H - 1; s < M; s += 2 * H) {
    const double xl = s >= H ? w.f[s - H] : x_prev;
    w.f[s] -= w.a[s] * xl + w.c[s] * w.f[s + H];
  }
}

// CR level at distance g lanes on the lanes' last rows: lanes t = 2g - 1 mod 2g eliminate.
template <int M>
__device__ void cr_down_across(auto& ctx, Rows<M>& w, int g) {
  const int t = threadIdx.x & 31;
  constexpr int s = M - 1;
  const Row lo = shfl_up(w.a[s], w.c[s], w.f[s], g);
  const Row hi = shfl_down(w.a[s], w.c[s], w.f[s], g);
  if ((t & (2 * g - 1)) == 2 * g - 1) eliminate(ctx, w, s, lo, hi);
}

template <int M>
__device__ void cr_up_across(Rows<M>& w, int g) {
  const int t = threadIdx.x & 31;
  constexpr int s = M - 1;
  const double xl = __shfl_up_sync(kFull, w.f[s], g), xr = __shfl_down_sync(kFull, w.f[s], g);
  if ((t & (2 * g - 1)) == g - 1) w.f[s] -= w.a[s] * xl + w.c[s] * xr;
}

// `Levels` CR levels within the lanes from slot distance H on, then `middle` on the rows left
// (slots H' - 1 mod H', H' = H 2^Levels: it solves them, x in f), then the back-substitution.
template <int M, int H, int Levels, typename Middle>
__device__ void cr_within_lanes(auto& ctx, Rows<M>& w, Middle middle) {
  if constexpr (Levels > 0) {
    cr_down_within<M, H>(ctx, w);
    cr_within_lanes<M, 2 * H, Levels - 1>(ctx, w, middle);
    const double x_prev = __shfl_up_sync(kFull, w.f[M - 1], 1);
    cr_up_within<M, H>(w, x_prev);
  } else {
    middle.template operator()<H>();
  }
}

// ---- Class layout (lane c holds rows c + 32 k) and the transposes.

// Moves v from the consecutive layout to the class layout (to_class) or back, through the
// warp's transpose array.
template <int M, bool to_class>
__device__ void transpose(double* tmp, double (&v)[M]) {
  const int t = threadIdx.x & 31;
#pragma unroll
  for (int s = 0; s < M; ++s) tmp[pad(to_class ? t * M + s : t + 32 * s)] = v[s];
  __syncwarp();
#pragma unroll
  for (int s = 0; s < M; ++s) v[s] = tmp[pad(to_class ? t + 32 * s : t * M + s)];
  __syncwarp();
}

// PCR steps at slot distances D .. M / 2 within the lane (class layout): each row alone after.
template <int M, int D = 1>
__device__ void pcr_in_class(auto& ctx, Rows<M>& w) {
  if constexpr (D < M) {
    const Rows<M> old = w;
    const Row zero{0.0, 0.0, 0.0};
#pragma unroll
    for (int s = 0; s < M; ++s) {
      eliminate<M, 2 * D == M>(ctx, w, s, s >= D ? row_of(old, s - D) : zero,
                               s + D < M ? row_of(old, s + D) : zero);
    }
    pcr_in_class<M, 2 * D>(ctx, w);
  }
}

// Thomas on the lane's class (its slots an independent system once the couplings reach 32
// rows): x in f.
template <int M>
__device__ void thomas_in_class(auto& ctx, Rows<M>& w) {
  double cp[M];
  double prev_c = 0.0, prev_f = 0.0;
#pragma unroll
  for (int s = 0; s < M; ++s) {
    double a = w.a[s], c = s + 1 < M ? w.c[s] : 0.0, f = w.f[s] - a * prev_f;
    divide_level(ctx, a, 1.0 - a * prev_c, c, f);  // a: only for the test's scale
    cp[s] = c;
    prev_c = c;
    prev_f = f;
    w.f[s] = f;
  }
#pragma unroll
  for (int s = M - 2; s >= 0; --s) w.f[s] -= cp[s] * w.f[s + 1];
}

// ---- The algorithms on one system in the registers of a warp; x left in f, in the class
// layout (returns true) or the consecutive one (false).

template <int M>
__device__ void pcr_to_classes(auto& ctx, Rows<M>& w, double* tmp) {
  pcr_within_lanes<M, 1>(ctx, w);                                        // distances 1 .. M / 2
  for (int g = 1; g < 32 / M; g *= 2) pcr_step_across<M, 1>(ctx, w, g);  // M .. 16
  if constexpr (M > 1) {
    transpose<M, true>(tmp, w.a);
    transpose<M, true>(tmp, w.c);
    transpose<M, true>(tmp, w.f);
  }
}

template <Algorithm A, int M>
__device__ bool solve_system(auto& ctx, Rows<M>& w, double* tmp) {
  constexpr int kLogM = M == 8 ? 3 : M == 4 ? 2 : M == 2 ? 1 : 0;
  if constexpr (A == Algorithm::kPcr || A == Algorithm::kPcrThomas) {
    pcr_to_classes(ctx, w, tmp);
    if constexpr (A == Algorithm::kPcr) {
      pcr_in_class(ctx, w);
    } else {
      thomas_in_class(ctx, w);
    }
    return true;
  } else if constexpr (A == Algorithm::kCr) {
    cr_within_lanes<M, 1, kLogM>(ctx, w, [&]<int H>() {
      for (int g = 1; g < 32; g *= 2) cr_down_across(ctx, w, g);
      for (int g = 16; g >= 1; g /= 2) cr_up_across(w, g);
    });
    return false;
  } else {  // the hybrids: CR down to 64 rows (or none, N <= 64), then PCR on them
    constexpr int kLevels = kLogM + 5 > kLogSmallRows ? kLogM + 5 - kLogSmallRows : 0;
    cr_within_lanes<M, 1, kLevels>(ctx, w, [&]<int H>() {
      // The rows left are slots H - 1 mod H, R = M / H of them a lane (consecutive rows of the
      // reduced system of 32 R rows).
      constexpr int R = M / H;
      static_assert(R <= 2);
      pcr_within_lanes<M, H>(ctx, w);  // distances 1 .. R / 2
      if constexpr (A == Algorithm::kCrPcr) {
        for (int g = 1; g < 32; g *= 2) pcr_step_across<M, H>(ctx, w, g);
      } else {
        // Distances up to 8 R (a quarter of the rows) leave pairs of rows 16 R apart, held by
        // lanes t and t ^ 16 in the same slot: Thomas on each pair.
        for (int g = 1; g < 16; g *= 2) pcr_step_across<M, H>(ctx, w, g);
        {
          const int t = threadIdx.x & 31;
          const bool upper = t < 16;  // holds the pair's first row
#pragma unroll
          for (int s = H - 1; s < M; s += H) {
            const double pa = __shfl_xor_sync(kFull, w.a[s], 16);
            const double pc = __shfl_xor_sync(kFull, w.c[s], 16);
            const double pf = __shfl_xor_sync(kFull, w.f[s], 16);
            // Rows p (first) and q = p + 32 (second): x_p + c_p x_q = f_p,
            // a_q x_p + x_q = f_q: x_q = (f_q - a_q f_p) / (1 - a_q c_p).
            const double cp = upper ? w.c[s] : pc, fp = upper ? w.f[s] : pf;
            const double aq = upper ? pa : w.a[s], fq = upper ? pf : w.f[s];
            double a = aq, c = 0.0, xq = fq - aq * fp;
            divide_level(ctx, a, 1.0 - aq * cp, c, xq);
            w.f[s] = upper ? fp - cp * xq : xq;
          }
        }
      }
    });
    return false;
  }
}

// The device's multiprocessors (persistent kernels size their grids by it).
inline int multiprocessors() {
  static const int sms = [] {
    int dev = 0, v = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev);
    return v > 0 ? v : 1;
  }();
  return sms;
}

// Copies 8 bytes from global to shared memory asynchronously (cp.async; wait_copies waits
// for the thread's copies, and a barrier then makes them visible to the others).
__device__ __forceinline__ void copy_async(double* dst, const double* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void commit_copies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
// Starts copying rows first, first + kStep, ... (< n) of the system at `base` into the four
// arrays of `in`, kArray doubles apart (dl, d, du, f), row r at pad(r), and commits the copies.
template <int kArray, int kStep>
__device__ __forceinline__ void copy_system_async(double* in, const double* dl, const double* d,
                                                  const double* du, const double* f,
                                                  std::size_t base, int n, int first) {
  for (int r = first; r < n; r += kStep) {
    copy_async(in + pad(r), dl + base + r);
    copy_async(in + kArray + pad(r), d + base + r);
    copy_async(in + 2 * kArray + pad(r), du + base + r);
    copy_async(in + 3 * kArray + pad(r), f + base + r);
  }
  commit_copies();
}
__device__ __forceinline__ void wait_copies() {
  asm volatile("cp.async.wait_all;\n" ::: "memory");
}

// Calls f.template operator()<A>() with `alg`, one of the five, as the constant A (host code:
// one kernel instantiation each).
template <typename F>
void with_algorithm(Algorithm alg, F f) {
  switch (alg) {
    case Algorithm::kCr:
      return f.template operator()<Algorithm::kCr>();
    case Algorithm::kPcr:
      return f.template operator()<Algorithm::kPcr>();
    case Algorithm::kCrPcr:
      return f.template operator()<Algorithm::kCrPcr>();
    case Algorithm::kPcrThomas:
      return f.template operator()<Algorithm::kPcrThomas>();
    default:
      return f.template operator()<Algorithm::kCrPcrThomas>();
  }
}

}  // namespace stripesolve::tridiag::gpu::warp
