// GpuElimination's copy of A for the residual (scheduler/gpu_elimination.h): filled from the RAM
// cache during the load, when the disks, not the link, set the pace, or where the RAM cache
// cannot hold A, from the factorization's first read of each stripe; read after the
// factorization, so that the backward error of a solve whose factors stay on the device needs
// no second pass of A from the disks (the fits tier at n = 57344: 26 GB read again, 16-19 s on
// the H200 host, against a few milliseconds of the device's memory bandwidth).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "base/logging.h"
#include "base/units.h"
#include "scheduler/gpu_elimination.h"

namespace stripesolve::scheduler {

using backend::DeviceBlock;

Status GpuElimination::keep_original(int64_t i, const double* host) {
  if (original_ == nullptr) return Status::ok();
  // Copies from the arena run once it is pinned (a copy from memory being registered may
  // fail); the wait is for the registration that begin() would wait for anyway, and begin()
  // says whether it failed (the copies are then staged, slower but right).
  if (pinning_) (void)pinning_->wait();
  const storage::StripeGeometry& g = geometry_;
  const int64_t h = g.rows(i);
  auto* at = static_cast<double*>(original_) + g.row_begin(i) * g.n;
  const Status copied = lane_i_->upload(host, DeviceBlock{at, h, g.n, h}, 0, g.n);
  if (!copied.is_ok()) {
    // The residual then reads A from the store, as without the copy; a device that is failing
    // says so again at the factorization's first copy.
    logger("scheduler")
        ->warn("the copy of A for the residual on the device stopped at stripe {}: {}", i,
               copied.message());
    release_original();
    return Status::ok();
  }
  MutexLock lock(original_mu_);
  original_loaded_[static_cast<size_t>(i)] = true;
  return Status::ok();
}

void GpuElimination::keep_read(const cache::CellView& cell, const storage::PartLayout& layout) {
  const storage::StripeGeometry& g = geometry_;
  if (!copies_ready_.load(std::memory_order_acquire) || cell.i0_store != 0 ||
      layout.data_bytes < g.stripe_bytes(cell.stripe)) {
    return;
  }
  const int64_t i = cell.stripe;
  const int64_t h = g.rows(i);
  Status copied;
  {
    MutexLock lock(original_mu_);
    if (original_ == nullptr || lane_copy_ == nullptr || original_loaded_[static_cast<size_t>(i)])
      return;
    auto* at = static_cast<double*>(original_) + g.row_begin(i) * g.n;
    const auto* host = reinterpret_cast<const double*>(cell.buffer + layout.data_offset);
    copied = lane_copy_->upload(host, DeviceBlock{at, h, g.n, h}, 0, g.n);
    if (copied.is_ok()) original_loaded_[static_cast<size_t>(i)] = true;
  }
  if (!copied.is_ok()) {
    // Not complete: the solve gives the copy back after the factorization and the residual
    // reads A from the store.
    logger("scheduler")
        ->warn("the copy of A for the residual on the device missed stripe {}: {}", i,
               copied.message());
  }
}

void GpuElimination::release_original() {
  MutexLock lock(original_mu_);
  if (original_ == nullptr) return;
  engine_.release(original_);
  original_ = nullptr;
  original_loaded_.clear();
}

void GpuElimination::release_original_unless_complete() {
  if (!original_complete()) release_original();
}

bool GpuElimination::original_complete() const {
  MutexLock lock(original_mu_);
  return original_ != nullptr && !loaded_final_ &&
         std::all_of(original_loaded_.begin(), original_loaded_.end(), [](bool b) { return b; });
}

Result<ResidualResult> GpuElimination::residual(const double* b, const double* x, int64_t nrhs,
                                                double* r, bool transposed) {
  if (!original_complete()) {
    return Status::internal("GPU tier: the residual on the device without the whole copy of A");
  }
  const storage::StripeGeometry& g = geometry_;
  const int64_t n = g.n;
  // x, then r, then A's sums (2n + 1) in the first free piece of the pool.
  const uint64_t bytes = 8ull * static_cast<uint64_t>(2 * n * nrhs + 2 * n + 1);
  auto room = tier_->allocate(-1, 0, bytes);
  if (!room.is_ok()) {
    if (room.status().code() != StatusCode::kResourceExhausted) return room.status();
    return Status::resource_exhausted(
        fmt::format("no room on the device for x and r ({}) beside the factors and the copy of A",
                    format_bytes(bytes)));
  }
  const cache::DeviceInstance scratch = *room;
  double* base = device_at(scratch.offset);
  const DeviceBlock xs{base, n, nrhs, n};
  const DeviceBlock rs{base + n * nrhs, n, nrhs, n};
  double* sums = base + 2 * n * nrhs;
  std::vector<backend::DeviceLane::FactorStripe> stripes;
  for (int64_t i = 0; i < g.stripes; ++i) {
    const int64_t h = g.rows(i);
    stripes.push_back({DeviceBlock{static_cast<double*>(original_) + g.row_begin(i) * n, h, n, h},
                       g.row_begin(i)});
  }
  std::vector<double> host_sums(static_cast<size_t>(2 * n + 1));
  backend::DeviceLane& lane = *lane_i_;
  Status st = lane.upload(x, xs, 0, nrhs);
  if (st.is_ok()) st = lane.upload(b, rs, 0, nrhs);
  if (st.is_ok()) {
    TraceRecorder::Span span(ctx_.trace, "master", "residual (device)");
    st = lane.residual(stripes, xs, rs, sums, transposed);
  }
  if (st.is_ok()) st = lane.download(rs, r, 0, nrhs);
  if (st.is_ok()) {
    st = lane.download(DeviceBlock{sums, 2 * n + 1, 1, 2 * n + 1}, host_sums.data(), 0, 1);
  }
  tier_->free(-1);
  STRIPESOLVE_RETURN_IF_ERROR(st);
  ResidualResult out;
  // The stripes' row sums are A's row sums, or its column sums where the stripes are A^T's.
  const size_t rows_of_a = transposed ? static_cast<size_t>(n) : 0;
  const size_t columns_of_a = transposed ? 0 : static_cast<size_t>(n);
  for (int64_t q = 0; q < n; ++q) {
    out.a_norm_inf = std::max(out.a_norm_inf, host_sums[rows_of_a + static_cast<size_t>(q)]);
    out.a_norm_1 = std::max(out.a_norm_1, host_sums[columns_of_a + static_cast<size_t>(q)]);
  }
  out.a_max_abs = host_sums[static_cast<size_t>(2 * n)];
  for (int64_t k = 0; k < n * nrhs; ++k) out.r_norm_inf = std::max(out.r_norm_inf, std::fabs(r[k]));
  return out;
}

}  // namespace stripesolve::scheduler
