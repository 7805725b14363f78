// GpuElimination's sharing of eliminated stripes (scheduler/gpu_elimination.h): the use counts
// that decide when a device instance goes, the adoption of another device's stripe, and a resumed
// run's stripes loaded final. The rest of the class is in gpu_elimination.cc.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "base/logging.h"
#include "base/units.h"
#include "scheduler/gpu_elimination.h"

namespace stripesolve::scheduler {

using backend::DeviceBlock;
using cache::CellView;
using cache::DeviceInstance;

void GpuElimination::count_uses(const std::vector<bool>& skip) {
  const storage::StripeGeometry& g = geometry_;
  // The updates of this device's J stripes, and for each own stripe the other devices that will
  // adopt it (those with updates that read it).
  stripe_uses_.assign(static_cast<size_t>(g.stripes), 0);
  std::vector<int64_t> single(static_cast<size_t>(g.stripes), 0);
  std::vector<uint64_t> adopters(static_cast<size_t>(g.stripes), 0);  // device bit masks
  std::map<std::pair<int64_t, int64_t>, int64_t> ranges;
  const std::vector<Task> tasks = make_tasks(params_.strategy, g.stripes, params_.meta_stripes,
                                             params_.upward_lead, params_.early_next);
  for (size_t k = 0; k < tasks.size(); ++k) {
    const Task& t = tasks[k];
    if (t.kind != Task::Kind::kUpdate || (k < skip.size() && skip[k])) continue;
    if (!share_.owns(t.stripe)) {
      for (int64_t i = t.i_begin; i < t.i_end; ++i) {
        if (share_.owns(i))
          adopters[static_cast<size_t>(i)] |= 1ull << share_.owner[static_cast<size_t>(t.stripe)];
      }
      continue;
    }
    for (int64_t i = t.i_begin; i < t.i_end; ++i) ++stripe_uses_[static_cast<size_t>(i)];
    if (t.i_end - t.i_begin > 1) {
      ++ranges[{t.i_begin, t.i_end}];
    } else {
      ++single[static_cast<size_t>(t.i_begin)];
    }
  }
  range_uses_.assign(ranges.begin(), ranges.end());
  {
    MutexLock lock(single_mu_);
    single_uses_ = std::move(single);
  }
  MutexLock peers(peer_mu_);
  peer_uses_.assign(static_cast<size_t>(g.stripes), 0);
  for (size_t i = 0; i < adopters.size(); ++i) peer_uses_[i] = __builtin_popcountll(adopters[i]);
  free_pending_.assign(static_cast<size_t>(g.stripes), false);
}

Status GpuElimination::begin(const ResumePlan& plan) {
  count_uses(plan.skip);
  if (pinning_) {
    TraceRecorder::Span span(ctx_.trace, "elim.I", "pin wait");
    // Unpinned, the copies are staged through the driver: right, only several times slower
    // (docs/performance.md: 8.3 against 42 TFLOP/s at n = 57344). A warning, not a failure.
    const Status pinned = pinning_->wait();
    const uint64_t capacity = ctx_.cache.arena().capacity();
    const std::string bytes = format_bytes(pinning_->bytes());
    if (pinned.is_ok()) {
      pinned_bytes_ = pinning_->bytes();
      logger("scheduler")
          ->info("RAM cache pinned for the devices ({} in {:.2f} s){}", bytes, pinning_->seconds(),
                 pinned_bytes_ < capacity
                     ? fmt::format(", not the {} above the cells (the copy of A for the residual)",
                                   format_bytes(capacity - pinned_bytes_))
                     : "");
    } else {
      logger("scheduler")
          ->warn(
              "the RAM cache ({}) could not be pinned for the devices: {}; its copies to and from "
              "the GPUs are staged, several times slower",
              bytes, pinned.message());
    }
  }
  copies_ready_.store(true, std::memory_order_release);
  return Status::ok();
}

Status GpuElimination::load_final(int64_t i, const CellView& cell,
                                  const stripe::StripePivots& pivots) {
  const storage::StripeGeometry& g = geometry_;
  TraceRecorder::Span span(ctx_.trace, "elim.I", "load final", {{"stripe", std::to_string(i)}});
  loaded_final_ = true;
  const int64_t uses = stripe_uses_[static_cast<size_t>(i)];
  int peers = 0;
  {
    MutexLock lock(peer_mu_);
    peers = peer_uses_[static_cast<size_t>(i)];
  }
  if (uses == 0 && peers == 0) return Status::ok();
  // Updates and adoptions read it from the first column of its meta-stripe on (as after its
  // elimination: its U rows and the multipliers the U block carries along).
  int64_t first = i;
  while (first > 0 && meta_of_[static_cast<size_t>(first - 1)] == meta_of_[static_cast<size_t>(i)])
    --first;
  bool created = false;
  const auto inst =
      instance_for(cell, std::max(g.row_begin(first), cell.i0_store), true, *lane_i_, &created);
  if (!inst.is_ok()) return inst.status();
  Status st = created ? Status::ok()
                      : Status::internal(fmt::format(
                            "GPU tier: stripe {}, loaded final, was on the device already", i));
  if (st.is_ok() && params_.pivot == stripe::PivotMode::kRow) {
    st = upload_permutation(*lane_i_, i, pivots);
  }
  if (st.is_ok()) st = lane_i_->synchronize();
  if (!st.is_ok()) {
    tier_->free(i);
    tier_->fail(st);
    return st;
  }
  if (uses == 0) {
    drop_instance(i);  // only other devices read it: freed once they have copied it
  } else {
    tier_->set_uses(i, uses);
  }
  return Status::ok();
}

Status GpuElimination::upload_permutation(backend::DeviceLane& lane, int64_t i,
                                          const stripe::StripePivots& pivots) {
  const storage::StripeGeometry& g = geometry_;
  // The permutation the elimination made on the owner's device, from the swaps (relative to the
  // diagonal).
  std::vector<int32_t> raw(pivots.swaps.size());
  for (size_t k = 0; k < raw.size(); ++k) {
    raw[k] = static_cast<int32_t>(pivots.swaps[k] - g.row_begin(i));
  }
  const std::vector<int32_t> pairs = backend::permutation_pairs(raw);
  perm_count_[static_cast<size_t>(i)] = static_cast<int64_t>(pairs.size() / 2);
  return lane.upload_ints(pairs, device_perm_ + 4 * g.row_begin(i));
}

void GpuElimination::drop_instance(int64_t i) {
  if (keeps(i)) return;
  {
    MutexLock lock(peer_mu_);
    if (peer_uses_[static_cast<size_t>(i)] > 0) {
      free_pending_[static_cast<size_t>(i)] = true;
      return;
    }
  }
  tier_->free(i);
}

Result<const double*> GpuElimination::peer_source(int64_t i, int64_t from) const {
  auto inst = tier_->find(i);
  if (!inst || inst->i0_store > from) {
    return Status::internal(fmt::format(
        "GPU tier: stripe {} left device {} before another adopted it", i, share_.index));
  }
  return device_at(inst->offset) + (from - inst->i0_store) * geometry_.rows(i);
}

void GpuElimination::release_peer_use(int64_t i) {
  {
    MutexLock lock(peer_mu_);
    if (--peer_uses_[static_cast<size_t>(i)] > 0 || !free_pending_[static_cast<size_t>(i)]) return;
    free_pending_[static_cast<size_t>(i)] = false;
  }
  if (!keeps(i)) tier_->free(i);
}

Status GpuElimination::adopt(int worker, const CellView& cell, const stripe::StripePivots& pivots,
                             GpuElimination& owner) {
  const storage::StripeGeometry& g = geometry_;
  const int64_t i = cell.stripe;
  MutexLock lock(adopt_mu_);
  if (adopted_[static_cast<size_t>(i)]) return Status::ok();
  adopted_[static_cast<size_t>(i)] = true;
  const int64_t uses = stripe_uses_[static_cast<size_t>(i)];
  if (uses == 0) return Status::ok();
  TraceRecorder::Span span(ctx_.trace, "elim.J" + std::to_string(worker), "adopt",
                           {{"stripe", std::to_string(i)}});
  // The updates here read the stripe from the first column of its meta-stripe on (its U rows
  // and, inside the meta-stripe, the multipliers the U block carries along).
  int64_t first_stripe = i;
  while (first_stripe > 0 &&
         meta_of_[static_cast<size_t>(first_stripe - 1)] == meta_of_[static_cast<size_t>(i)]) {
    --first_stripe;
  }
  const int64_t first = g.row_begin(first_stripe);
  const int64_t from = std::max(first, cell.i0_store);
  STRIPESOLVE_ASSIGN_OR_RETURN(
      DeviceInstance inst,
      tier_->allocate(i, from,
                      8ull * static_cast<uint64_t>(g.rows(i)) * static_cast<uint64_t>(g.n - from)));
  backend::DeviceLane& lane = lane_of(worker);
  // Straight from the owner's instance (final: the cell is kStuck once its elimination has
  // returned), which waits for this copy before it goes.
  Status st = Status::ok();
  {
    auto src = owner.peer_source(i, from);
    const DeviceBlock b = instance_block(inst);
    st = src.is_ok() ? lane.copy_from_peer(b.data, *src, owner.device(),
                                           8ull * static_cast<uint64_t>(b.rows * b.cols))
                     : src.status();
    owner.release_peer_use(i);
  }
  if (st.is_ok() && params_.pivot == stripe::PivotMode::kRow) {
    st = upload_permutation(lane, i, pivots);
  }
  if (!st.is_ok()) {
    tier_->free(i);
    return st;
  }
  tier_->set_uses(i, uses);
  return Status::ok();
}

}  // namespace stripesolve::scheduler
