// A copy of A in the RAM cache's arena, for the residual of a solve whose RAM budget holds A
// twice (Plan::ram_keeps_original): the GPU tier's load fills it as A's stripes arrive, the CPU
// tier's I/O role as the factorization first reads each stripe, and the residual and each
// refinement step read it instead of A from the disks (the GPU tier's RAM tier at n = 57344:
// 26 GB read again, 16-19 s on the H200 host, against one pass of RAM on the host's cores).
// The device's own copy (Plan::device_keeps_original, gpu_residual.cc) is preferred where the
// device holds A twice; this one serves the RAM tier, several devices, fits-tier devices too
// small for two copies, and the CPU tier.
//
// Threads: keep() is called by the load's consumer or by the I/O threads, for different
// stripes at once (`mu_` guards which are kept; each copy writes its own stripe's rows);
// residual() by the solve's thread after the factorization, and it fans the stripes out to
// threads of its own that write disjoint rows of r and their own sums.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/mutex.h"
#include "cache/stripe_cache.h"
#include "scheduler/factor_run.h"
#include "scheduler/substitution.h"
#include "storage/geometry.h"
#include "storage/striped_matrix.h"

namespace stripesolve::scheduler {

class RamOriginal {
 public:
  // Reserves 8 n^2 bytes in `cache` where the rest of its budget still holds `cells_need`
  // bytes (A's cells); nullptr (with the reason logged) otherwise.
  static std::unique_ptr<RamOriginal> reserve(cache::StripeCache& cache,
                                              const storage::StripeGeometry& g,
                                              uint64_t cells_need);
  ~RamOriginal();  // gives the block back to the cache
  RamOriginal(const RamOriginal&) = delete;
  RamOriginal& operator=(const RamOriginal&) = delete;

  // Stripe `stripe`'s rows from column 0 (column-major, ld = its rows), as the load reads
  // them, copied on `threads` threads (the load's consumer has the host's cores to itself:
  // one thread copied a 448 MiB stripe into the block's fresh pages in 0.17-0.29 s, about
  // the disk's pace on the H200 host). A stripe kept already is left alone.
  void keep(int64_t stripe, const double* data, int threads = 1);
  // The I/O role's read hook (io_role.h): a part of A from column 0 through n is kept, any
  // other part ignored.
  void keep_read(const cache::CellView& cell, const storage::PartLayout& layout);
  // Every stripe kept.
  bool complete() const;
  // r = b - A x (n x nrhs, ld = n) and A's norms, on `threads` threads. Progress: one phase
  // "residual" of 2 n^2 nrhs flops.
  ResidualResult residual(EngineContext& ctx, const double* b, const double* x, int64_t nrhs,
                          double* r, int threads);

 private:
  RamOriginal(cache::StripeCache& cache, const storage::StripeGeometry& g, std::byte* block);

  cache::StripeCache& cache_;
  const storage::StripeGeometry g_;
  std::byte* block_;
  mutable Mutex mu_;
  std::vector<bool> kept_ GUARDED_BY(mu_);
  // A's norms from the first residual (A does not change): later passes compute r alone.
  std::unique_ptr<ResidualResult> norms_;
};

}  // namespace stripesolve::scheduler
