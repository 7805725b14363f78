// The I/O role (002 §8.2 "SSDA thread"): one thread that serves the cache's transfer requests.
// Downloads read a stripe part into its cell with StripedMatrix::read_part; uploads write an
// evicted dirty cell back with write_part (storage fans each transfer out over all paths).
//
// Copy on first write (STORAGE_API.md): during a factorization the factor object starts empty;
// a stripe is read from `original` until it has been written to `factor` once, then from
// `factor`. (In place, both are the same object.)
//
// Thread-safety: set_sources() only while no transfer is pending (the cache is empty); `mu_`
// guards the sources and the written flags against the role's thread.
#pragma once

#include <mutex>
#include <thread>
#include <vector>

#include "cache/stripe_cache.h"
#include "scheduler/progress.h"
#include "scheduler/trace.h"
#include "storage/striped_matrix.h"

namespace stripesolve::scheduler {

class IoRole {
 public:
  IoRole(cache::StripeCache& cache, ProgressMeter& progress, TraceRecorder* trace);
  ~IoRole();  // shuts the cache's I/O queue down and joins
  IoRole(const IoRole&) = delete;
  IoRole& operator=(const IoRole&) = delete;

  // Reads come from `factor` for stripes written since this call, else from `original`;
  // uploads go to `factor` (nullptr: read-only phase, an upload is a bug).
  void set_sources(storage::StripedMatrix* original, storage::StripedMatrix* factor);

 private:
  void run();
  Status transfer(const cache::IoWork& work);

  cache::StripeCache& cache_;
  ProgressMeter& progress_;
  TraceRecorder* trace_;
  std::mutex mu_;
  storage::StripedMatrix* original_ = nullptr;  // guarded by mu_
  storage::StripedMatrix* factor_ = nullptr;    // guarded by mu_
  std::vector<bool> written_;                   // guarded by mu_
  std::thread thread_;
};

}  // namespace stripesolve::scheduler
