// A solve report's I/O and cache counters as JSON fields, named alike wherever a report is written
// out (the daemon's job result, the benchmarks' documents).
#pragma once

#include <nlohmann/json.hpp>

#include "scheduler/dense_solve.h"

namespace stripesolve::scheduler {

// io_read_bytes, io_written_bytes, cache_hits, cache_misses, cache_peak_bytes and cache_budget.
nlohmann::json io_counters_json(const SolveReport& report);

}  // namespace stripesolve::scheduler
