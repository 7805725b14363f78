#include "scheduler/gpu_elimination.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/logging.h"
#include "base/units.h"

namespace stripesolve::scheduler {

using backend::DeviceBlock;
using cache::CellView;
using cache::DeviceInstance;

namespace {

uint64_t part_bytes(const storage::StripeGeometry& g, int64_t stripe, int64_t i0_store) {
  return 8ull * static_cast<uint64_t>(g.rows(stripe)) * static_cast<uint64_t>(g.n - i0_store);
}

// The columns of a U block's diagonal inverses (k rows of U).
int64_t inverse_columns(const storage::StripeGeometry& g, int64_t k) {
  return std::min<int64_t>({kInverseBlockRows, k, 2 * ((g.n + g.stripes - 1) / g.stripes)});
}

// The U block of stripes [i0, i1): their U rows from the range's first row on, and the inverses.
uint64_t block_bytes(const storage::StripeGeometry& g, int64_t i0, int64_t i1) {
  const int64_t k = g.row_end(i1 - 1) - g.row_begin(i0);
  return 8ull * static_cast<uint64_t>(k) *
         static_cast<uint64_t>(g.n - g.row_begin(i0) + inverse_columns(g, k));
}

}  // namespace

GpuElimination::GpuElimination(EngineContext& ctx, backend::DeviceEngine& engine,
                               const storage::StripedMatrix& layout, const FactorParams& params,
                               const Plan& plan, DeviceShare share,
                               std::shared_ptr<KeepLedger> kept)
    : ctx_(ctx),
      engine_(engine),
      layout_(layout),
      geometry_(layout.geometry()),
      params_(params),
      plan_(plan),
      share_(std::move(share)),
      kept_(kept ? std::move(kept) : std::make_shared<KeepLedger>()) {}

Result<std::unique_ptr<GpuElimination>> GpuElimination::create(EngineContext& ctx,
                                                               backend::DeviceEngine& engine,
                                                               const storage::StripedMatrix& layout,
                                                               const FactorParams& params,
                                                               const Plan& plan, DeviceShare share,
                                                               std::shared_ptr<KeepLedger> kept) {
  std::unique_ptr<GpuElimination> e(
      new GpuElimination(ctx, engine, layout, params, plan, std::move(share), std::move(kept)));
  STRIPESOLVE_RETURN_IF_ERROR(e->open());
  return e;
}

Status GpuElimination::open() {
  const storage::StripeGeometry& g = geometry_;
  const int64_t s_max = (g.n + g.stripes - 1) / g.stripes;
  const int64_t k_max = s_max;  // permutations are per stripe
  meta_of_.assign(static_cast<size_t>(g.stripes), 0);
  const int64_t metas = meta_stripe_count(g.stripes, std::max<int64_t>(1, params_.meta_stripes));
  for (int64_t im = 0; im < metas; ++im) {
    for (int64_t i = im * g.stripes / metas; i < (im + 1) * g.stripes / metas; ++i) {
      meta_of_[static_cast<size_t>(i)] = im;
    }
  }
  perm_count_.assign(static_cast<size_t>(g.stripes), 0);
  stripe_max_abs_u_.assign(static_cast<size_t>(g.stripes), -1);
  download_wait_mu_ = std::make_unique<Mutex[]>(static_cast<size_t>(g.stripes));
  {  // no other thread yet: the locks are for the analysis
    MutexLock downloads(downloads_mu_);
    download_ticket_.assign(static_cast<size_t>(g.stripes), 0);
  }
  count_uses({});
  {
    MutexLock adopting(adopt_mu_);
    adopted_.assign(static_cast<size_t>(g.stripes), false);
  }
  {
    MutexLock lock(kept_->mu);
    kept_->of_stripe.assign(static_cast<size_t>(g.stripes), 0);
  }

  STRIPESOLVE_ASSIGN_OR_RETURN(
      uint64_t ws_i, engine_.lane_workspace_bytes(s_max, g.n, params_.pivot, s_max, k_max));
  STRIPESOLVE_ASSIGN_OR_RETURN(uint64_t ws_j,
                               engine_.lane_workspace_bytes(0, 0, params_.pivot, s_max, k_max));
  // Look-ahead lanes first (factor_run's worker numbers), at high priority like elim.I's.
  const int64_t lookahead = std::max<int64_t>(0, params_.lookahead_workers);
  const int64_t all_workers = std::max<int64_t>(1, params_.elim_j_workers) + lookahead;
  int64_t workers = 0;  // the workers this device serves (DeviceShare::serves)
  for (int64_t w = 0; w < all_workers; ++w) workers += share_.serves(w) ? 1 : 0;
  const uint64_t lanes = ws_i + ws_j * static_cast<uint64_t>(workers);
  const uint64_t pivots = 4ull * 5ull * static_cast<uint64_t>(g.n) + 4096;
  const uint64_t slack = device_library_slack(plan_.gpu_memory);
  if (plan_.gpu_memory <= lanes + pivots + slack) {
    return Status::resource_exhausted(
        fmt::format("GPU tier: the device budget {} does not cover the lanes' workspaces ({})",
                    format_bytes(plan_.gpu_memory), format_bytes(lanes + pivots + slack)));
  }
  // The pool is whole slots, one per stripe instance (cache/device_tier.h): the largest
  // stripe's bytes.
  const uint64_t slot =
      cache::Arena::round_up(8ull * static_cast<uint64_t>(s_max) * static_cast<uint64_t>(g.n));
  pool_bytes_ = (plan_.gpu_memory - lanes - pivots - slack) / slot * slot;
  if (pool_bytes_ == 0) {
    return Status::resource_exhausted(fmt::format(
        "GPU tier: the device budget {} leaves less than one stripe ({}) beside the lanes' "
        "workspaces ({})",
        format_bytes(plan_.gpu_memory), format_bytes(slot), format_bytes(lanes + pivots + slack)));
  }
  tier_ = std::make_unique<cache::DeviceTier>(pool_bytes_, slot,
                                              [this] { return ctx_.cache.failure(); });
  // A range's U block is assembled from its eliminated stripes: both in the pool at once. A pool
  // that cannot hold them fails the solve here rather than at the range (engine.meta_stripes
  // pinned too large for the budget; the planner's own S^m fits).
  for (const auto& [range, count] : range_uses_) {
    const uint64_t need = tier_->in_slots(block_bytes(g, range.first, range.second)) +
                          static_cast<uint64_t>(range.second - range.first) * slot;
    if (need > pool_bytes_) {
      return Status::resource_exhausted(fmt::format(
          "GPU tier: the pool of {} (device budget {}) cannot hold the U block of stripes [{}, "
          "{}) beside those stripes ({} in all): raise engine.gpu_memory or lower "
          "engine.meta_stripes (now {})",
          format_bytes(pool_bytes_), format_bytes(plan_.gpu_memory), range.first, range.second,
          format_bytes(need), params_.meta_stripes));
    }
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(lane_memory_, engine_.allocate(lanes + pivots, "the GPU lanes"));
  STRIPESOLVE_ASSIGN_OR_RETURN(pool_, engine_.allocate(pool_bytes_, "the GPU tier's pool"));
  const int64_t sm = std::max<int64_t>(1, params_.meta_stripes);
  block_bound_ = tier_->in_slots(u_block_bytes_bound(g.n, sm * s_max));
  overlap_ = pool_bytes_ >= 2 * block_bound_ + static_cast<uint64_t>(workers + sm) * slot;
  char* p = static_cast<char*>(lane_memory_);
  STRIPESOLVE_ASSIGN_OR_RETURN(lane_i_,
                               engine_.make_lane(true, s_max, g.n, params_.pivot, s_max, k_max, p));
  p += ws_i;
  for (int64_t w = share_.index; w < all_workers; w += share_.count) {
    STRIPESOLVE_ASSIGN_OR_RETURN(
        auto lane, engine_.make_lane(w < lookahead, 0, 0, params_.pivot, s_max, k_max, p));
    lanes_j_.push_back(std::move(lane));
    p += ws_j;
  }
  device_raw_ = reinterpret_cast<int32_t*>(p);
  device_perm_ = device_raw_ + g.n;
  // Pinned RAM: the cells' copies run at full PCIe speed. Registered once, by device 0, for
  // every device (the registration is portable), beside the load of A (arena_pinning.h);
  // begin() waits for it.
  if (share_.index == 0) {
    cache::Arena& arena = ctx_.cache.arena();
    pinning_ = ArenaPinning::start(engine_, arena.base(), arena.capacity());
  }
  static const auto log = logger("scheduler");
  log->info(
      "GPU tier on {}{}: pool {}, lanes {}, {} elim.J workers ({} look-ahead), S^m = {}, "
      "segments of {} columns{}{}",
      engine_.description(),
      share_.count > 1 ? fmt::format(" (device {} of {})", share_.index + 1, share_.count) : "",
      format_bytes(pool_bytes_), format_bytes(lanes), workers, lookahead, params_.meta_stripes,
      plan_.segment_columns, plan_.device_resident ? ", the whole matrix stays on the device" : "",
      overlap_ ? ", sweeps overlap" : "");
  return Status::ok();
}

GpuElimination::~GpuElimination() {
  // Copies into the pinned arena end before it is unpinned (lane destructors synchronise).
  lanes_j_.clear();
  lane_i_.reset();
  pinning_.reset();  // joined, the arena unpinned
  engine_.release(pool_);
  engine_.release(lane_memory_);
}

DeviceBlock GpuElimination::instance_block(const DeviceInstance& inst) const {
  const storage::StripeGeometry& g = geometry_;
  const int64_t rows = g.rows(inst.stripe);
  return DeviceBlock{device_at(inst.offset), rows, g.n - inst.i0_store, rows};
}

Result<DeviceInstance> GpuElimination::instance_for(const CellView& cell, int64_t from,
                                                    bool copy_in, backend::DeviceLane& lane,
                                                    bool* created) {
  const storage::StripeGeometry& g = geometry_;
  if (auto inst = tier_->find(cell.stripe)) {
    if (inst->i0_store < cell.i0_store) {
      return Status::internal(fmt::format(
          "GPU tier: stripe {} is on the device from column {} but in RAM from column {}",
          cell.stripe, inst->i0_store, cell.i0_store));
    }
    *created = false;
    return *inst;
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(
      DeviceInstance inst, tier_->allocate(cell.stripe, from, part_bytes(g, cell.stripe, from)));
  *created = true;
  if (copy_in) {
    const DeviceBlock b = instance_block(inst);
    const Status st = lane.upload(host_of(cell, inst), b, 0, b.cols);
    if (!st.is_ok()) {
      tier_->free(cell.stripe);
      return st;
    }
  }
  return inst;
}

double* GpuElimination::host_of(const CellView& cell, const DeviceInstance& inst) const {
  const stripe::StripePart part = cell_part(layout_, cell);
  return part.data + (inst.i0_store - cell.i0_store) * geometry_.rows(cell.stripe);
}

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

Status GpuElimination::eliminate(int64_t i, const CellView& cell, stripe::StripePivots* pivots) {
  Status st = eliminate_on_device(i, cell, pivots);
  if (!st.is_ok()) tier_->fail(st);  // wakes roles waiting on the tier
  return st;
}

Status GpuElimination::eliminate_on_device(int64_t i, const CellView& cell,
                                           stripe::StripePivots* pivots) {
  const storage::StripeGeometry& g = geometry_;
  TraceRecorder::Span span(ctx_.trace, "elim.I", "eliminate", {{"stripe", std::to_string(i)}});
  tier_->begin_work();
  struct EndWork {
    cache::DeviceTier* t;
    ~EndWork() { t->end_work(); }
  } end_work{tier_.get()};
  bool created = false;
  STRIPESOLVE_ASSIGN_OR_RETURN(DeviceInstance inst,
                               instance_for(cell, cell.i0_store, true, *lane_i_, &created));
  const bool was_newer = !created && inst.newer;
  double* const host = host_of(cell, inst);
  const DeviceBlock b = instance_block(inst);
  const int64_t h = g.rows(i);
  const int64_t r0 = g.row_begin(i);
  const int64_t block_col = r0 - inst.i0_store;
  std::vector<int64_t> local(static_cast<size_t>(h), 0);
  int64_t perm_count = 0;
  Status st =
      lane_i_->eliminate(b, block_col, params_.pivot, params_.substripe_rows, r0, local.data(),
                         device_raw_ + r0, device_perm_ + 4 * r0, &perm_count);
  if (st.is_ok()) {
    // The stripe's U is final on the device: its largest entry for the pivot growth, read there
    // (one pass over the instance, a small fraction of the panel's time).
    auto most = lane_i_->max_abs_upper(b, block_col);
    st = most.status();
    if (st.is_ok()) {
      stripe_max_abs_u_[static_cast<size_t>(i)] = *most;
      max_abs_u_ = std::max(max_abs_u_, *most);
    }
  }
  // The stripe is final: RAM gets it (from its diagonal on, or the whole instance if updates
  // left newer multipliers on the device; columns left of the instance are final in RAM). The copy
  // runs beside the next elimination; the cell stays stuck until its last update, which waits for
  // it (wait_download), as does freeing the instance. Nothing reads a stuck cell's RAM in the
  // meantime; a stripe no update reads waits now.
  const int64_t uses = stripe_uses_[static_cast<size_t>(i)];
  if (st.is_ok()) {
    auto ticket = lane_i_->download_later(b, host, was_newer ? 0 : block_col, b.cols);
    st = ticket.status();
    if (st.is_ok()) {
      MutexLock lock(downloads_mu_);
      download_ticket_[static_cast<size_t>(i)] = *ticket;
    }
    if (st.is_ok() && uses == 0) st = wait_download(i);
  }
  if (!st.is_ok()) {
    (void)lane_i_->synchronize();
    tier_->free(i);
    return st;
  }
  tier_->set_newer(i, false);
  {
    MutexLock lock(kept_->mu);  // its RAM cell is final now, no longer kept
    kept_->bytes -= kept_->of_stripe[static_cast<size_t>(i)];
    kept_->of_stripe[static_cast<size_t>(i)] = 0;
  }
  perm_count_[static_cast<size_t>(i)] = perm_count;
  pivots->mode = params_.pivot;
  pivots->row_begin = r0;
  pivots->swaps.clear();
  if (params_.pivot == stripe::PivotMode::kRow) {
    pivots->swaps.resize(static_cast<size_t>(h));
    for (int64_t k = 0; k < h; ++k) pivots->swaps[k] = inst.i0_store + local[k];
  } else if (params_.pivot == stripe::PivotMode::kLocal) {
    pivots->swaps.resize(static_cast<size_t>(h));
    for (int64_t k = 0; k < h; ++k) pivots->swaps[k] = r0 + local[k];
  }
  if (uses == 0) {
    drop_instance(i);
  } else {
    tier_->set_uses(i, uses);
  }
  return Status::ok();
}

Status GpuElimination::wait_download(int64_t stripe) {
  MutexLock waiting(download_wait_mu_[static_cast<size_t>(stripe)]);
  uint64_t ticket = 0;
  {
    MutexLock lock(downloads_mu_);
    ticket = download_ticket_[static_cast<size_t>(stripe)];
  }
  STRIPESOLVE_RETURN_IF_ERROR(lane_i_->wait(ticket));
  MutexLock lock(downloads_mu_);
  if (download_ticket_[static_cast<size_t>(stripe)] == ticket)
    download_ticket_[static_cast<size_t>(stripe)] = 0;
  return Status::ok();
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
// parts in flight and a U block, and RAM for the planner's working set.
bool GpuElimination::keep_j(const Task& t, const CellView& j) {
  const storage::StripeGeometry& g = geometry_;
  const uint64_t part = part_bytes(g, j.stripe, j.i0_store);
  MutexLock lock(kept_->mu);
  const uint64_t before = kept_->of_stripe[static_cast<size_t>(j.stripe)];
  const uint64_t kept_bytes = kept_->bytes;
  const bool keep = [&] {
    // A kept J's RAM cell stays reserved (kOnDevice). Unless RAM holds the whole matrix, it
    // keeps room beside the kept parts for the working set: 2 S^m + 2 stripes (002 Eq 17) and
    // a J per elim.J worker.
    const uint64_t matrix = 8ull * static_cast<uint64_t>(g.n) * static_cast<uint64_t>(g.n);
    if (plan_.ram_budget < matrix + plan_.stripe_bytes) {
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
  kept_->bytes = kept_->bytes - before + (keep ? part : 0);
  kept_->of_stripe[static_cast<size_t>(j.stripe)] = keep ? part : 0;
  return keep;
}

Status GpuElimination::update(int worker, const Task& t, const CellView& j,
                              const std::vector<CellView>& is,
                              const std::vector<stripe::StripePivots>& pivots,
                              bool* keep_on_device) {
  Status st = update_on_device(worker, t, j, is, pivots, keep_on_device);
  if (!st.is_ok()) tier_->fail(st);
  return st;
}

Status GpuElimination::update_on_device(int worker, const Task& t, const CellView& j,
                                        const std::vector<CellView>& is,
                                        const std::vector<stripe::StripePivots>&,
                                        bool* keep_on_device) {
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
  STRIPESOLVE_ASSIGN_OR_RETURN(RangeU u, range_block(lane, t));
  bool created = false;
  STRIPESOLVE_ASSIGN_OR_RETURN(DeviceInstance inst,
                               instance_for(j, first_device_column(t, j), false, lane, &created));
  double* const host = host_of(j, inst);
  const bool keep = keep_j(t, j);
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
  *keep_on_device = keep;
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

bool GpuElimination::factors_resident() const {
  const storage::StripeGeometry& g = geometry_;
  if (loaded_final_) return false;
  for (int64_t i = 0; i < g.stripes; ++i) {
    auto inst = tier_->find(i);
    if (!inst || inst->i0_store != 0 || inst->newer) return false;
  }
  return true;
}

Status GpuElimination::substitute(double* x, int64_t nrhs) {
  const storage::StripeGeometry& g = geometry_;
  const uint64_t bytes = 8ull * static_cast<uint64_t>(g.n) * static_cast<uint64_t>(nrhs);
  // The right-hand sides take the place of the first free piece of the pool.
  STRIPESOLVE_ASSIGN_OR_RETURN(DeviceInstance rhs_inst, tier_->allocate(-1, 0, bytes));
  const DeviceBlock rhs{device_at(rhs_inst.offset), g.n, nrhs, g.n};
  backend::DeviceLane& lane = *lane_i_;
  Status st = lane.upload(x, rhs, 0, nrhs);
  const bool local = params_.pivot == stripe::PivotMode::kLocal;
  const bool row = params_.pivot == stripe::PivotMode::kRow;
  std::vector<backend::DeviceLane::FactorStripe> forward, backward;
  for (int64_t i = 0; i < g.stripes; ++i) {
    const DeviceBlock part = instance_block(*tier_->find(i));
    const int32_t* raw = device_raw_ + g.row_begin(i);
    forward.push_back({part, g.row_begin(i), local ? raw : nullptr});
    backward.insert(backward.begin(), {part, g.row_begin(i), row ? raw : nullptr});
  }
  if (st.is_ok()) {
    TraceRecorder::Span span(ctx_.trace, "master", "forward (device)");
    st = lane.forward(forward, rhs);
  }
  if (st.is_ok()) {
    TraceRecorder::Span span(ctx_.trace, "master", "backward (device)");
    st = lane.backward(backward, rhs);
  }
  if (st.is_ok()) st = lane.download(rhs, x, 0, nrhs);
  tier_->free(-1);
  return st;
}

void GpuElimination::release_factors() {
  const storage::StripeGeometry& g = geometry_;
  for (int64_t i = 0; i < g.stripes; ++i) tier_->free(i);
}

}  // namespace stripesolve::scheduler
