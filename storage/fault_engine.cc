#include "storage/fault_engine.h"

#include "storage/placement.h"

namespace stripesolve::storage {

Status FaultEngine::spoil(const IoRequest& r) {
  Transfer t{&r, r.offset, r.length, r.buffer};
  Status error;
  const bool torn = plan_.kind == FaultPlan::Kind::kTornWrite && r.op == IoOp::kWrite;
  if (plan_.kind == FaultPlan::Kind::kShortTransfer || torn) {
    const uint64_t half = align_down(r.length / 2);
    if (half > 0) {
      IoRequest first = r;
      first.length = half;
      STRIPESOLVE_RETURN_IF_ERROR(inner_->run({&first, 1}));
      t.done = half;
    }
    if (!torn) {
      apply_transfer_result(t, 0, &error);
      return error;
    }
  }
  t.retries = kMaxRetries;  // a retryable errno is reported, not retried
  apply_transfer_result(t, -int64_t{plan_.error}, &error);
  return error;
}

Status FaultEngine::run(std::span<const IoRequest> requests, const IoCompletion& on_complete) {
  for (size_t i = 0; i < requests.size(); ++i) {
    if (plan_.writes_only && requests[i].op != IoOp::kWrite) continue;
    const int64_t k = seen_.fetch_add(1);
    if (k != plan_.request || fired_.exchange(true)) continue;
    STRIPESOLVE_RETURN_IF_ERROR(inner_->run(requests.subspan(0, i), on_complete));
    return spoil(requests[i]);
  }
  return inner_->run(requests, on_complete);
}

}  // namespace stripesolve::storage
