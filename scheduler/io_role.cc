#include "scheduler/io_role.h"

#include <string>

#include "base/internal_error.h"

namespace stripesolve::scheduler {

IoRole::IoRole(cache::StripeCache& cache, ProgressMeter& progress, TraceRecorder* trace)
    : cache_(cache), progress_(progress), trace_(trace), thread_([this] { run(); }) {}

IoRole::~IoRole() {
  cache_.shutdown();
  thread_.join();
}

void IoRole::set_sources(storage::StripedMatrix* original, storage::StripedMatrix* factor) {
  std::lock_guard<std::mutex> lock(mu_);
  original_ = original;
  factor_ = factor;
  written_.assign(original == nullptr ? 0 : original->geometry().stripes, false);
}

Status IoRole::transfer(const cache::IoWork& work) {
  const int64_t s = work.cell.stripe;
  const int64_t c0 = work.cell.i0_store;
  storage::StripedMatrix* object = nullptr;
  bool download = work.kind == cache::IoWork::Kind::kDownload;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (download) {
      object = (factor_ != nullptr && written_[s]) ? factor_ : original_;
    } else {
      STRIPESOLVE_CHECK(factor_ != nullptr, "upload of stripe " + std::to_string(s) +
                                                " in a read-only phase");
      object = factor_;
    }
  }
  STRIPESOLVE_CHECK(object != nullptr, "I/O role has no source for stripe " + std::to_string(s));
  const storage::PartLayout layout = object->part_layout(s, c0);
  STRIPESOLVE_CHECK(layout.buffer_bytes <= work.cell.bytes,
                    "cell of stripe " + std::to_string(s) + " smaller than its part");
  TraceRecorder::Span span(trace_, "io", download ? "read" : "write",
                           {{"stripe", std::to_string(s)}, {"col", std::to_string(c0)},
                            {"bytes", std::to_string(layout.data_bytes)}});
  if (download) {
    STRIPESOLVE_RETURN_IF_ERROR(object->read_part(s, c0, work.cell.buffer));
    progress_.add_io(layout.data_bytes, 0);
  } else {
    STRIPESOLVE_RETURN_IF_ERROR(object->write_part(s, c0, work.cell.buffer));
    progress_.add_io(0, layout.data_bytes);
    std::lock_guard<std::mutex> lock(mu_);
    written_[s] = true;
  }
  return Status::ok();
}

void IoRole::run() {
  while (auto work = cache_.next_io_work()) {
    cache_.finish_io(*work, transfer(*work));
  }
}

}  // namespace stripesolve::scheduler
