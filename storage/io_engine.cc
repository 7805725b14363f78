#include "storage/io_engine.h"

#include <algorithm>
#include <cerrno>
#include <string>

namespace stripesolve::storage {

std::string describe_transfer(const Transfer& t) {
  std::string s = t.request->op == IoOp::kRead ? "read " : "write ";
  s += t.request->path != nullptr ? *t.request->path : "<fd " + std::to_string(t.request->fd) + ">";
  s += " at offset " + std::to_string(t.offset + t.done);
  s += " (length " + std::to_string(t.length - t.done) + ")";
  return s;
}

uint64_t chunk_bytes(uint64_t batch_bytes, unsigned queue_depth, uint64_t request_bytes) {
  constexpr uint64_t kPage = 4096;
  const uint64_t floor = std::min<uint64_t>(request_bytes, uint64_t{1} << 20);
  const uint64_t depth = std::max(1u, queue_depth);
  const uint64_t spread = ((batch_bytes + depth - 1) / depth + kPage - 1) / kPage * kPage;
  return std::clamp(spread, floor, request_bytes);
}

Status IoEngine::run_batches(IoBatchSource& source) {
  std::span<const IoRequest> batch;
  for (size_t b = 0; source.next_batch(batch); ++b) {
    // Requests finish one by one here, so an empty batch means the source waits for itself.
    if (batch.empty())
      return Status::internal("I/O batch source is waiting with nothing in flight");
    for (size_t i = 0; i < batch.size(); ++i) {
      STRIPESOLVE_RETURN_IF_ERROR(source.completed(b, i, run(batch.subspan(i, 1))));
    }
  }
  return Status::ok();
}

TransferStep apply_transfer_result(Transfer& t, int64_t result, Status* error) {
  if (result < 0) {
    const int err = static_cast<int>(-result);
    if ((err == EAGAIN || err == EINTR) && t.retries < kMaxRetries) {
      ++t.retries;
      return TransferStep::kContinue;
    }
    *error = Status::from_errno(err, describe_transfer(t));
    if (t.request->op == IoOp::kWrite) error->set_data_lost();
    return TransferStep::kFailed;
  }
  if (result == 0) {
    if (t.request->op == IoOp::kRead) {
      *error =
          Status::corruption(describe_transfer(t) + ": unexpected end of file after " +
                             std::to_string(t.done) + " of " + std::to_string(t.length) + " bytes");
    } else {
      *error =
          Status::io_error(describe_transfer(t) + ": no progress after " + std::to_string(t.done) +
                           " of " + std::to_string(t.length) + " bytes")
              .set_data_lost();
    }
    return TransferStep::kFailed;
  }
  const auto moved = static_cast<uint64_t>(result);
  if (moved > t.length - t.done) {
    *error = Status::internal(describe_transfer(t) + ": kernel reported " + std::to_string(moved) +
                              " bytes, more than requested");
    return TransferStep::kFailed;
  }
  t.done += moved;
  return t.done == t.length ? TransferStep::kDone : TransferStep::kContinue;
}

}  // namespace stripesolve::storage
