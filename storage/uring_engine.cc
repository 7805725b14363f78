#include "storage/uring_engine.h"

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <string>

namespace stripesolve::storage {

struct UringEngine::Ring {
  io_uring ring{};
  bool ready = false;
  ~Ring() {
    if (ready) io_uring_queue_exit(&ring);
  }
};

namespace {

// The one place where request values become submissions.
void prepare_sqe(io_uring_sqe* sqe, const Transfer& t, uint64_t user_data) {
  const IoRequest& r = *t.request;
  const auto length = static_cast<unsigned>(t.length - t.done);
  if (r.op == IoOp::kRead) {
    io_uring_prep_read(sqe, r.fd, t.buffer + t.done, length, t.offset + t.done);
  } else {
    io_uring_prep_write(sqe, r.fd, t.buffer + t.done, length, t.offset + t.done);
  }
  io_uring_sqe_set_data64(sqe, user_data);
}

}  // namespace

UringEngine::UringEngine(unsigned queue_depth, uint64_t request_bytes)
    : queue_depth_(std::max(1u, queue_depth)),
      request_bytes_(std::clamp<uint64_t>(request_bytes, 4096, uint64_t{1} << 30)) {}

UringEngine::~UringEngine() = default;

Status UringEngine::probe() {
  io_uring ring{};
  const int rc = io_uring_queue_init(4, &ring, 0);
  if (rc < 0) return Status::from_errno(-rc, "io_uring_queue_init");
  io_uring_sqe* sqe = io_uring_get_sqe(&ring);
  io_uring_prep_nop(sqe);
  int res = io_uring_submit_and_wait(&ring, 1);
  Status st;
  if (res < 0) {
    st = Status::from_errno(-res, "io_uring_enter");
  } else {
    io_uring_cqe* cqe = nullptr;
    res = io_uring_peek_cqe(&ring, &cqe);
    if (res < 0 || cqe == nullptr) st = Status::unavailable("io_uring: no completion for a no-op");
    else if (cqe->res < 0) st = Status::from_errno(-cqe->res, "io_uring no-op");
  }
  io_uring_queue_exit(&ring);
  return st;
}

Result<std::unique_ptr<UringEngine::Ring>> UringEngine::acquire() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      auto ring = std::move(idle_.back());
      idle_.pop_back();
      return ring;
    }
  }
  auto ring = std::make_unique<Ring>();
  const int rc = io_uring_queue_init(queue_depth_, &ring->ring, 0);
  if (rc < 0) {
    return Status::from_errno(-rc, "io_uring_queue_init(" + std::to_string(queue_depth_) + ")");
  }
  ring->ready = true;
  return ring;
}

void UringEngine::release(std::unique_ptr<Ring> ring) {
  std::lock_guard lock(mu_);
  idle_.push_back(std::move(ring));
}

Status UringEngine::run(std::span<const IoRequest> requests, const IoCompletion& on_complete) {
  if (requests.empty()) return Status::ok();
  std::vector<uint32_t> chunks_left(requests.size(), 0);
  // Chunk order: round robin over the files (paths), and within one file request after request.
  // Every path stays busy, and requests complete one after another, so the completion callback
  // (checksums) of one request overlaps the transfers of the next instead of all requests
  // finishing together at the end.
  std::vector<std::vector<Transfer>> per_file;
  std::vector<int> files;
  for (const IoRequest& r : requests) {
    const size_t f = std::find(files.begin(), files.end(), r.fd) - files.begin();
    if (f == files.size()) {
      files.push_back(r.fd);
      per_file.emplace_back();
    }
    for (uint64_t off = 0; off < r.length; off += request_bytes_) {
      ++chunks_left[&r - requests.data()];
      per_file[f].push_back(Transfer{&r, r.offset + off, std::min(request_bytes_, r.length - off),
                                     r.buffer + off});
    }
  }
  std::vector<Transfer> chunks;
  for (size_t k = 0, added = 1; added != 0; ++k) {
    added = 0;
    for (const auto& file_chunks : per_file) {
      if (k < file_chunks.size()) {
        chunks.push_back(file_chunks[k]);
        ++added;
      }
    }
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(std::unique_ptr<Ring> ring, acquire());
  io_uring* u = &ring->ring;

  Status first_error;
  size_t next = 0;
  unsigned in_flight = 0;
  while (next < chunks.size() || in_flight > 0) {
    while (first_error.is_ok() && next < chunks.size() && in_flight < queue_depth_) {
      prepare_sqe(io_uring_get_sqe(u), chunks[next], next);
      ++next;
      ++in_flight;
    }
    if (in_flight == 0) break;  // stopped by an error and drained
    int rc = io_uring_submit_and_wait(u, 1);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      // The ring is unusable (not a transient condition). Tearing it down makes the kernel cancel
      // what is still in flight; the error is reported as possibly having lost written data.
      ring.reset();
      return Status::from_errno(-rc, "io_uring_enter").set_data_lost();
    }
    io_uring_cqe* cqe = nullptr;
    while (io_uring_peek_cqe(u, &cqe) == 0 && cqe != nullptr) {
      const uint64_t index = io_uring_cqe_get_data64(cqe);
      const int res = cqe->res;
      io_uring_cqe_seen(u, cqe);
      Transfer& t = chunks[index];
      Status error;
      switch (apply_transfer_result(t, res, &error)) {
        case TransferStep::kDone: {
          --in_flight;
          const size_t request = t.request - requests.data();
          if (--chunks_left[request] == 0 && on_complete) on_complete(request);
          break;
        }
        case TransferStep::kContinue:
          prepare_sqe(io_uring_get_sqe(u), t, index);  // stays in flight
              break;
        case TransferStep::kFailed:
          --in_flight;
          if (first_error.is_ok()) first_error = std::move(error);
          break;
      }
    }
  }
  release(std::move(ring));
  return first_error;
}

}  // namespace stripesolve::storage
