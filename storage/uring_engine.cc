#include "storage/uring_engine.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include <liburing.h>

#include "storage/store_config.h"

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

UringEngine::UringEngine(unsigned queue_depth, uint64_t read_request_bytes,
                         uint64_t write_request_bytes)
    : queue_depth_(std::max(1u, queue_depth)),
      read_request_bytes_(std::clamp(read_request_bytes, kMinRequestBytes, kMaxRequestBytes)),
      write_request_bytes_(std::clamp(write_request_bytes, kMinRequestBytes, kMaxRequestBytes)) {}

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
    if (res < 0 || cqe == nullptr)
      st = Status::unavailable("io_uring: no completion for a no-op");
    else if (cqe->res < 0)
      st = Status::from_errno(-cqe->res, "io_uring no-op");
  }
  io_uring_queue_exit(&ring);
  return st;
}

Result<std::unique_ptr<UringEngine::Ring>> UringEngine::acquire() {
  {
    MutexLock lock(mu_);
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
  MutexLock lock(mu_);
  idle_.push_back(std::move(ring));
}

// A request's chunk with where it came from.
struct UringEngine::Chunk {
  Transfer transfer;
  size_t batch = 0;
  size_t index = 0;  // request within the batch
};

namespace {

// One batch made of the plain request span that run() gets.
class SpanSource final : public IoBatchSource {
 public:
  SpanSource(std::span<const IoRequest> requests, const IoCompletion& on_complete)
      : requests_(requests), on_complete_(on_complete) {}
  bool next_batch(std::span<const IoRequest>& batch) override {
    if (given_) return false;
    given_ = true;
    batch = requests_;
    return true;
  }
  Status completed(size_t /*batch*/, size_t index, Status result) override {
    if (result.is_ok() && on_complete_) on_complete_(index);
    return result;
  }

 private:
  std::span<const IoRequest> requests_;
  const IoCompletion& on_complete_;
  bool given_ = false;
};

// Chunks of one batch still to finish. A failed request's count is set to kFailed so that its
// other chunks, still in flight, report nothing more; the batch is forgotten only when all its
// chunks have finished, since their completions still refer to it.
struct OpenBatch {
  static constexpr uint32_t kFailed = UINT32_MAX;
  std::vector<uint32_t> chunks_left;  // per request
  size_t chunks_unfinished = 0;
};

}  // namespace

Status UringEngine::run(std::span<const IoRequest> requests, const IoCompletion& on_complete) {
  if (requests.empty()) return Status::ok();
  SpanSource source(requests, on_complete);
  return run_batches(source);
}

void UringEngine::cut_batch(std::span<const IoRequest> requests, size_t batch,
                            std::vector<uint32_t>& chunks_left, std::deque<Chunk>& pending) const {
  // Chunk order: round robin over the files (paths), and within one file request after request.
  // Every path stays busy, and requests complete one after another, so the completion callback
  // (checksums) of one request overlaps the transfers of the next instead of all requests
  // finishing together at the end.
  std::vector<std::vector<Chunk>> per_file;
  std::vector<int> files;
  chunks_left.assign(requests.size(), 0);
  uint64_t batch_bytes = 0;
  for (const IoRequest& r : requests) batch_bytes += r.length;
  const uint64_t read_chunk = chunk_bytes(batch_bytes, queue_depth_, read_request_bytes_);
  const uint64_t write_chunk = chunk_bytes(batch_bytes, queue_depth_, write_request_bytes_);
  for (size_t i = 0; i < requests.size(); ++i) {
    const IoRequest& r = requests[i];
    const size_t f = std::find(files.begin(), files.end(), r.fd) - files.begin();
    if (f == files.size()) {
      files.push_back(r.fd);
      per_file.emplace_back();
    }
    const uint64_t chunk = r.op == IoOp::kWrite ? write_chunk : read_chunk;
    for (uint64_t off = 0; off < r.length; off += chunk) {
      ++chunks_left[i];
      per_file[f].push_back(Chunk{
          Transfer{&r, r.offset + off, std::min(chunk, r.length - off), r.buffer + off}, batch, i});
    }
  }
  for (size_t k = 0, added = 1; added != 0; ++k) {
    added = 0;
    for (const auto& file_chunks : per_file) {
      if (k < file_chunks.size()) {
        pending.push_back(file_chunks[k]);
        ++added;
      }
    }
  }
}

Status UringEngine::run_batches(IoBatchSource& source) {
  STRIPESOLVE_ASSIGN_OR_RETURN(std::unique_ptr<Ring> ring, acquire());
  io_uring* u = &ring->ring;

  std::deque<Chunk> pending;               // cut, not submitted yet, in submission order
  std::vector<Chunk> slots(queue_depth_);  // in flight; user_data is the slot index
  std::vector<uint64_t> free_slots;
  for (unsigned k = queue_depth_; k > 0; --k) free_slots.push_back(k - 1);
  std::deque<OpenBatch> open;  // batches first_open, first_open + 1, ...
  size_t first_open = 0;
  bool more = true;
  Status first_error;
  unsigned in_flight = 0;

  const auto report = [&](size_t batch, size_t index, Status result) {
    Status st = source.completed(batch, index, std::move(result));
    if (!st.is_ok() && first_error.is_ok()) first_error = std::move(st);
  };
  const auto forget_finished = [&] {
    while (!open.empty() && open.front().chunks_unfinished == 0) {
      open.pop_front();
      ++first_open;
    }
  };
  const auto finish = [&](const Chunk& c, Status result) {
    OpenBatch& b = open[c.batch - first_open];
    --b.chunks_unfinished;
    uint32_t& left = b.chunks_left[c.index];
    if (left != OpenBatch::kFailed && (!result.is_ok() || --left == 0)) {
      if (!result.is_ok()) left = OpenBatch::kFailed;
      report(c.batch, c.index, std::move(result));
    }
    forget_finished();
  };

  for (;;) {
    // Take the next batches while fewer than a queue's worth of chunks wait: they are cut and
    // ready before the queue drains, so the disk sees no gap between batches.
    std::span<const IoRequest> batch;
    while (more && first_error.is_ok() && pending.size() < queue_depth_) {
      if (!source.next_batch(batch)) {
        more = false;
      } else if (batch.empty()) {
        break;  // the source waits for a completion
      } else {
        const size_t id = first_open + open.size();
        OpenBatch& b = open.emplace_back();
        const size_t before = pending.size();
        cut_batch(batch, id, b.chunks_left, pending);
        b.chunks_unfinished = pending.size() - before;
        // A request of zero bytes has no chunk: it is complete now (a part's empty tail piece).
        for (size_t i = 0; i < batch.size(); ++i) {
          if (open[id - first_open].chunks_left[i] == 0) report(id, i, Status::ok());
        }
        forget_finished();
      }
    }
    while (first_error.is_ok() && !pending.empty() && in_flight < queue_depth_) {
      const uint64_t slot = free_slots.back();
      free_slots.pop_back();
      slots[slot] = pending.front();
      pending.pop_front();
      prepare_sqe(io_uring_get_sqe(u), slots[slot].transfer, slot);
      ++in_flight;
    }
    if (in_flight == 0) {
      if (first_error.is_ok() && more) {
        first_error = Status::internal("I/O batch source is waiting with nothing in flight");
      }
      break;
    }
    int rc = io_uring_submit_and_wait(u, 1);
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      // The ring is unusable (not a transient condition). Tearing it down makes the kernel cancel
      // what is still in flight; the error is reported as possibly having lost written data.
      ring.reset();
      return Status::from_errno(-rc, "io_uring_enter").set_data_lost();
    }
    io_uring_cqe* cqe = nullptr;
    while (io_uring_peek_cqe(u, &cqe) == 0 && cqe != nullptr) {
      const uint64_t slot = io_uring_cqe_get_data64(cqe);
      const int res = cqe->res;
      io_uring_cqe_seen(u, cqe);
      Chunk& c = slots[slot];
      Status error;
      switch (apply_transfer_result(c.transfer, res, &error)) {
        case TransferStep::kDone:
        case TransferStep::kFailed:
          --in_flight;
          free_slots.push_back(slot);
          finish(c, std::move(error));  // error is ok when done
          break;
        case TransferStep::kContinue:
          prepare_sqe(io_uring_get_sqe(u), c.transfer, slot);  // stays in flight
          break;
      }
    }
  }
  release(std::move(ring));
  return first_error;
}

}  // namespace stripesolve::storage
