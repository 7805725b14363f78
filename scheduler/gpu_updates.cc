// GpuElimination's J updates (scheduler/gpu_elimination.h): the range's U on the device (a
// stripe's instance or the meta-stripe's block with its inverted diagonal blocks), the first column
// J must bring, whether J stays on the device, and the update itself on an elim.J lane. The rest of
// the class is in gpu_elimination.cc and gpu_sharing.cc.
#include <algorithm>

#include <fmt/format.h>

#include "scheduler/gpu_elimination.h"

namespace stripesolve::scheduler {

using backend::DeviceBlock;
using cache::CellView;
using cache::DeviceInstance;

int64_t GpuElimination::first_device_column(const Task& t, const CellView& j) const {
  const storage::StripeGeometry& g = geometry_;
  int64_t first = g.row_begin(t.i_begin);
  if (meta_of_[static_cast<size_t>(j.stripe)] == meta_of_[static_cast<size_t>(t.i_begin)]) {
    int64_t s = j.stripe;
    while (s > 0 && meta_of_[static_cast<size_t>(s - 1)] == meta_of_[static_cast<size_t>(j.stripe)])
      --s;
    first = std::min(first, g.row_begin(s));
  }
  return std::max(first, j.i0_store);
}

backend::ColumnPermutation GpuElimination::permutation_of(int64_t i, int64_t first) const {
  const storage::StripeGeometry& g = geometry_;
  return backend::ColumnPermutation{device_perm_ + 4 * g.row_begin(i),
                                    perm_count_[static_cast<size_t>(i)], first};
}

Result<GpuElimination::RangeU> GpuElimination::range_block(backend::DeviceLane& lane,
                                                           const Task& t) {
  const storage::StripeGeometry& g = geometry_;
  const int64_t i0r = g.row_begin(t.i_begin);
  const int64_t k = g.row_end(t.i_end - 1) - i0r;
  const DeviceBlock whole_rows{nullptr, k, g.n - i0r, k};
  if (t.i_end - t.i_begin == 1) {
    auto inst = tier_->find(t.i_begin);
    if (!inst)
      return Status::internal(fmt::format("GPU tier: stripe {} left the device early", t.i_begin));
    return RangeU{instance_block(*inst).from_column(i0r - inst->i0_store), {}};
  }
  // The block: U (k x cols) and then the inverses of its diagonal blocks (k x nb).
  const int64_t nb = inverse_columns(g, k);
  const uint64_t u_bytes = 8ull * static_cast<uint64_t>(k * whole_rows.cols);
  int64_t uses = 0;
  for (const auto& [range, count] : range_uses_) {
    if (range.first == t.i_begin && range.second == t.i_end) uses = count;
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(
      cache::DeviceTier::Block blk,
      tier_->acquire_block(t.i_begin, t.i_end, block_bytes(g, t.i_begin, t.i_end), uses));
  DeviceBlock block = whole_rows;
  block.data = device_at(blk.offset);
  const DeviceBlock inverse{device_at(blk.offset + u_bytes), k, nb, k};
  if (!blk.created) return RangeU{block, inverse};
  TraceRecorder::Span span(ctx_.trace, "elim.J", "assemble U",
                           {{"I0", std::to_string(t.i_begin)}, {"I1", std::to_string(t.i_end)}});
  for (int64_t i = t.i_begin; i < t.i_end; ++i) {
    auto inst = tier_->find(i);
    if (!inst) return Status::internal(fmt::format("GPU tier: stripe {} left the device early", i));
    STRIPESOLVE_RETURN_IF_ERROR(lane.copy_rows(
        block, g.row_begin(i) - i0r, instance_block(*inst).from_column(i0r - inst->i0_store)));
  }
  if (params_.pivot == stripe::PivotMode::kRow) {
    // Stripe a's U is in the coordinates after its own swaps; J will see the swaps of every
    // stripe of the range first, so the earlier stripes' rows get the later swaps (in order).
    for (int64_t b = t.i_begin + 1; b < t.i_end; ++b) {
      DeviceBlock earlier = block;
      earlier.rows = g.row_begin(b) - i0r;
      STRIPESOLVE_RETURN_IF_ERROR(
          lane.permute_columns(earlier, permutation_of(b, g.row_begin(b) - i0r)));
    }
  }
  STRIPESOLVE_RETURN_IF_ERROR(lane.invert_diagonal_blocks(block, inverse));
  tier_->block_ready(t.i_begin, t.i_end);
  // The block holds every row the range's updates read: the stripes' own copies can go (their
  // final values are in RAM once their copies from the elimination have landed).
  for (int64_t i = t.i_begin; i < t.i_end; ++i) {
    if (keeps(i)) continue;
    {
      MutexLock lock(single_mu_);
      if (single_uses_[static_cast<size_t>(i)] > 0) continue;  // its last use drops it
    }
    STRIPESOLVE_RETURN_IF_ERROR(wait_download(i));
    drop_instance(i);
  }
  return RangeU{block, inverse};
}

// J stays on the device when the whole matrix does, and otherwise when it belongs to the
// meta-stripe being eliminated or to the next one (it is an I stripe soon: its elimination and the
// updates inside its meta-stripe then need no copies), while the device keeps room for the J
// parts in flight and a U block. Where the device keeps the whole matrix and RAM cannot, a kept J
// whose every column is on the device gives its RAM back meanwhile (UpdatedJ::kOnDeviceOnly):
// the device then keeps what RAM cannot (a matrix of 512 MiB in a 128 MiB RAM cache on an H200
// was read 6.2 times and written 3.4 times, each J going back to RAM and the SSDs between its
// updates). Not where J parts stream: there a J given back waits for its turn to be eliminated
// (it needs memory again), and the SSD tier (n = 49152, 4 GiB of RAM, 8 GiB of device) factored
// in 64.4 s with 125 GB of SSD traffic against 55.6 s and 117 GB, the same H200 host. A J kept
// beside its RAM cell leaves room in RAM for the planner's working set.
cache::UpdatedJ GpuElimination::keep_j(const Task& t, const CellView& j,
                                       const DeviceInstance& inst) {
  const storage::StripeGeometry& g = geometry_;
  const uint64_t part = part_bytes(g, j.stripe, j.i0_store);
  const uint64_t matrix = 8ull * static_cast<uint64_t>(g.n) * static_cast<uint64_t>(g.n);
  const bool ram_short = plan_.ram_budget < matrix + plan_.stripe_bytes;
  const bool device_only = ram_short && plan_.device_resident && inst.i0_store <= j.i0_store;
  MutexLock lock(kept_->mu);
  const uint64_t before = kept_->of_stripe[static_cast<size_t>(j.stripe)];
  const uint64_t kept_bytes = kept_->bytes;
  const bool keep = [&] {
    // A J kept beside its RAM cell keeps that cell reserved (kOnDevice): room beside the kept
    // parts for the working set, 2 S^m + 2 stripes (002 Eq 17) and a J per elim.J worker.
    if (ram_short && !device_only) {
      const uint64_t reserve =
          static_cast<uint64_t>(2 * params_.meta_stripes + 2 + params_.elim_j_workers +
                                params_.lookahead_workers) *
          plan_.stripe_bytes;
      if (kept_bytes - before + part + reserve > plan_.ram_budget) return false;
    }
    if (plan_.device_resident) return true;
    const int64_t mj = meta_of_[static_cast<size_t>(j.stripe)];
    const int64_t mi = meta_of_[static_cast<size_t>(t.i_begin)];
    if (mj > mi + 1) return false;
    const uint64_t block = block_bound_;
    const uint64_t device_reserve =
        block + static_cast<uint64_t>(params_.elim_j_workers + 1) * tier_->slot_bytes();
    // The next U block needs its bytes in one piece: a kept part must not split the last hole
    // that holds one.
    const cache::DeviceTier::Usage usage = tier_->usage();
    return usage.free_bytes >= device_reserve && usage.largest_free_piece >= block;
  }();
  const bool beside_ram = keep && !device_only;
  kept_->bytes = kept_->bytes - before + (beside_ram ? part : 0);
  kept_->of_stripe[static_cast<size_t>(j.stripe)] = beside_ram ? part : 0;
  return !keep         ? cache::UpdatedJ::kInRam
         : device_only ? cache::UpdatedJ::kOnDeviceOnly
                       : cache::UpdatedJ::kOnDeviceBesideRam;
}

Status GpuElimination::update(int worker, const Task& t, const CellView& j,
                              const std::vector<CellView>& is,
                              const std::vector<stripe::StripePivots>& pivots,
                              cache::UpdatedJ* where) {
  Status st = update_on_device(worker, t, j, is, pivots, where);
  if (!st.is_ok()) tier_->fail(st);
  return st;
}

Status GpuElimination::update_on_device(int worker, const Task& t, const CellView& j,
                                        const std::vector<CellView>& is,
                                        const std::vector<stripe::StripePivots>&,
                                        cache::UpdatedJ* where) {
  const storage::StripeGeometry& g = geometry_;
  backend::DeviceLane& lane = lane_of(worker);
  const std::string role = "elim.J" + std::to_string(worker);
  TraceRecorder::Span span(
      ctx_.trace, role, "update",
      {{"J", std::to_string(t.stripe)}, {"I", fmt::format("[{}, {})", t.i_begin, t.i_end)}});
  tier_->begin_work();
  struct EndWork {
    cache::DeviceTier* t;
    ~EndWork() { t->end_work(); }
  } end_work{tier_.get()};
  const int64_t i0r = g.row_begin(t.i_begin);
  // A J whose RAM went back after an earlier update is on the device only, and stays there.
  const bool ram_gone = j.buffer == nullptr;
  if (ram_gone && !tier_->find(j.stripe)) {
    return Status::internal(
        fmt::format("GPU tier: stripe {} has neither a RAM cell nor a device instance", j.stripe));
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(RangeU u, range_block(lane, t));
  bool created = false;
  STRIPESOLVE_ASSIGN_OR_RETURN(DeviceInstance inst,
                               instance_for(j, first_device_column(t, j), false, lane, &created));
  double* const host = ram_gone ? nullptr : host_of(j, inst);
  const cache::UpdatedJ kept = ram_gone ? cache::UpdatedJ::kOnDeviceOnly : keep_j(t, j, inst);
  const bool keep = kept != cache::UpdatedJ::kInRam;
  backend::DeviceUpdate op;
  op.j = instance_block(inst);
  op.j_col = i0r - inst.i0_store;
  if (op.j_col < 0) {
    return Status::internal(
        fmt::format("GPU tier: stripe {} is on the device from column {}, "
                    "right of the update's first column {}",
                    j.stripe, inst.i0_store, i0r));
  }
  op.u = u.u;
  op.u_inverse = u.inverse;
  if (params_.pivot == stripe::PivotMode::kRow) {
    for (const CellView& ci : is) {
      op.permutations.push_back(permutation_of(ci.stripe, g.row_begin(ci.stripe) - i0r));
    }
  }
  op.segment_columns = plan_.segment_columns > 0 ? plan_.segment_columns : 8192;
  if (created && keep && op.j_col > 0) {
    // A kept part must be whole on the device from its first column: the update below copies
    // only its own columns.
    Status up = lane.upload(host, op.j, 0, op.j_col);
    if (!up.is_ok()) {
      tier_->free(j.stripe);
      return up;
    }
  }
  op.host_in = created ? host : nullptr;
  op.host_out = keep ? nullptr : host;
  Status st = lane.update(op);
  // A J that was newer on the device and is not kept any more still has newer columns left of
  // this update's range (multipliers of earlier updates): copy them back too.
  if (st.is_ok() && !keep && !created && inst.newer && op.j_col > 0) {
    st = lane.download(op.j, host, 0, op.j_col);
  }
  if (!st.is_ok()) {
    tier_->free(j.stripe);
    return st;
  }
  if (keep) {
    tier_->set_newer(j.stripe, true);
  } else {
    tier_->free(j.stripe);
  }
  *where = kept;
  if (t.i_end - t.i_begin == 1) {
    MutexLock lock(single_mu_);
    --single_uses_[static_cast<size_t>(t.i_begin)];
  }
  for (const CellView& ci : is) {
    if (tier_->release_use(ci.stripe)) {
      // The last update by I: its cell leaves kStuck after this (and may then be evicted).
      if (share_.owns(ci.stripe)) STRIPESOLVE_RETURN_IF_ERROR(wait_download(ci.stripe));
      drop_instance(ci.stripe);
    }
  }
  if (t.i_end - t.i_begin > 1) tier_->release_block(t.i_begin, t.i_end);
  return Status::ok();
}

}  // namespace stripesolve::scheduler
