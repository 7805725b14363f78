// A small parallel-for over an index range for the CPU solvers (no pool: threads are started per
// call and joined before it returns, which costs tens of microseconds and keeps no state
// between calls; solve_batch calls it once per batch).
//
// parallel_for(count, threads, grain, body) splits [0, count) into chunks of `grain` indices and
// hands them out through an atomic counter to `threads` workers (the calling thread is worker
// 0). body(begin, end, worker) returns a Status; after the first error no new chunk starts,
// and the error of the lowest-indexed failing chunk is returned, so the result does not depend
// on scheduling. Threading: body runs concurrently on different chunks; it must only touch
// per-chunk or per-worker state.
#pragma once

#include <cstddef>
#include <functional>

#include "base/status.h"

namespace stripesolve::tridiag {

unsigned resolve_threads(unsigned requested);

Status parallel_for(std::size_t count, unsigned threads, std::size_t grain,
                    const std::function<Status(std::size_t, std::size_t, unsigned)>& body);

}  // namespace stripesolve::tridiag
