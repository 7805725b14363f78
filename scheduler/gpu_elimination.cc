// GpuElimination's set-up (the device budget split into lanes and the tier's pool), elim.I's
// elimination on the device and the substitution there (scheduler/gpu_elimination.h; its J
// updates are in gpu_updates.cc, its sharing of stripes in gpu_sharing.cc).
#include "scheduler/gpu_elimination.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/logging.h"
#include "base/units.h"
#include "scheduler/roles.h"

namespace stripesolve::scheduler {

using backend::DeviceBlock;
using cache::CellView;
using cache::DeviceInstance;

uint64_t GpuElimination::part_bytes(const storage::StripeGeometry& g, int64_t stripe,
                                    int64_t i0_store) {
  return 8ull * static_cast<uint64_t>(g.rows(stripe)) * static_cast<uint64_t>(g.n - i0_store);
}

int64_t GpuElimination::inverse_columns(const storage::StripeGeometry& g, int64_t k) {
  return std::min<int64_t>({kInverseBlockRows, k, 2 * ((g.n + g.stripes - 1) / g.stripes)});
}

uint64_t GpuElimination::block_bytes(const storage::StripeGeometry& g, int64_t i0, int64_t i1) {
  const int64_t k = g.row_end(i1 - 1) - g.row_begin(i0);
  return 8ull * static_cast<uint64_t>(k) *
         static_cast<uint64_t>(g.n - g.row_begin(i0) + inverse_columns(g, k));
}

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
  // The copy of A for the residual, where the factorization's reads fill it, has a lane of
  // its own (keep_read: the I/O threads).
  const bool may_copy = plan_.device_keeps_original && share_.count == 1;
  STRIPESOLVE_ASSIGN_OR_RETURN(uint64_t ws_copy,
                               engine_.lane_workspace_bytes(0, 0, params_.pivot, 0, 0));
  if (!may_copy) ws_copy = 0;
  const uint64_t lanes = ws_i + ws_j * static_cast<uint64_t>(workers) + ws_copy;
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
  const uint64_t room = plan_.gpu_memory - lanes - pivots - slack;
  pool_bytes_ = room / slot * slot;
  // What keeps the whole matrix on the device: every stripe, two U blocks, a stripe per worker
  // and per stripe of a meta-stripe, and the planner's three more (device_bytes_needed).
  const int64_t sm = std::max<int64_t>(1, params_.meta_stripes);
  const uint64_t resident = static_cast<uint64_t>(g.stripes + workers + sm + 3) * slot +
                            2 * ((u_block_bytes_bound(g.n, sm * s_max) + slot - 1) / slot * slot);
  // A copy of A for the residual (Plan::device_keeps_original), where the pool beside it still
  // holds all that.
  const uint64_t original = 8ull * static_cast<uint64_t>(g.n) * static_cast<uint64_t>(g.n);
  if (may_copy && room > original && (room - original) / slot * slot >= resident) {
    pool_bytes_ = (room - original) / slot * slot;
    original_bytes_ = original;
  }
  // No larger than twice that (the rest for the holes between kept parts and U blocks) and the
  // right-hand sides' room beside the factors (residual(): x, r and A's sums): the pool is never
  // filled beyond it, and a solve of n = 1000 under the default budget took 0.35 s of cudaMalloc
  // for a 125 GiB pool on the H200 (60-70 ms more to free it), where its own work took 0.1 s.
  const uint64_t rhs =
      8ull * static_cast<uint64_t>(g.n) *
          (2 * static_cast<uint64_t>(std::max<int64_t>(1, params_.rhs_columns)) + 2) +
      8;
  pool_bytes_ = std::min(pool_bytes_, 2 * resident + (rhs + slot - 1) / slot * slot);
  holds_matrix_ = plan_.device_resident && pool_bytes_ >= resident;
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
  lane_bytes_ = lanes + pivots;
  STRIPESOLVE_ASSIGN_OR_RETURN(pool_, engine_.allocate(pool_bytes_, "the GPU tier's pool"));
  if (original_bytes_ > 0) {
    STRIPESOLVE_ASSIGN_OR_RETURN(
        original_, engine_.allocate(original_bytes_, "the copy of A for the residual"));
    MutexLock lock(original_mu_);
    original_loaded_.assign(static_cast<size_t>(g.stripes), false);
  }
  block_bound_ = tier_->in_slots(u_block_bytes_bound(g.n, sm * s_max));
  overlap_ = pool_bytes_ >= 2 * block_bound_ + static_cast<uint64_t>(workers + sm) * slot;
  // Where the device keeps the whole matrix, the pool's room beyond it holds U blocks of more
  // meta-stripes at once. RAM must not bound them either: the stripes eliminated ahead stay
  // kStuck in RAM until their sweeps end, unless their final values stay here only or the RAM
  // cache holds every part (the master's all_fit).
  const bool ram_holds_a = whole_parts_fit(layout_, ctx_.cache.stats().budget);
  if (holds_matrix_ && share_.count == 1 && (ram_holds_a || final_on_device_only())) {
    meta_ahead_ = 1 + static_cast<int64_t>((pool_bytes_ - resident) / block_bound_);
  }
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
  if (original_ != nullptr) {
    MutexLock lock(original_mu_);
    STRIPESOLVE_ASSIGN_OR_RETURN(lane_copy_,
                                 engine_.make_lane(false, 0, 0, params_.pivot, 0, 0, p));
  }
  p += ws_copy;
  device_raw_ = reinterpret_cast<int32_t*>(p);
  device_perm_ = device_raw_ + g.n;
  // Pinned RAM: the cells' copies run at full PCIe speed. Registered once, by device 0, for
  // every device (the registration is portable), beside the load of A (arena_pinning.h);
  // begin() waits for it. Only the cells' span: a copy of A reserved above it for the host's
  // residual is never copied to a device, and pinning it took the load of A at n = 57344 from
  // 17.9 to 19.7 s on the H200 host (52 GiB pinned in 19.6 s, against 6.2 s for 31 GiB). The
  // copy's pages are faulted in after the registration, ahead of the load's copies into them.
  if (share_.index == 0) {
    pinning_ = ArenaPinning::start(engine_, ctx_.cache.arena().base(), ctx_.cache.cells_span(),
                                   ctx_.cache.arena().capacity(), ctx_.trace);
  }
  static const auto log = logger("scheduler");
  log->info(
      "GPU tier on {}{}: pool {}, lanes {}, {} elim.J workers ({} look-ahead), S^m = {}, "
      "segments of {} columns{}{}{}{}",
      engine_.description(),
      share_.count > 1 ? fmt::format(" (device {} of {})", share_.index + 1, share_.count) : "",
      format_bytes(pool_bytes_), format_bytes(lanes), workers, lookahead, params_.meta_stripes,
      plan_.segment_columns, plan_.device_resident ? ", the whole matrix stays on the device" : "",
      overlap_ ? ", sweeps overlap" : "",
      meta_ahead_ > 1 ? fmt::format(", elim.I up to {} meta-stripes ahead", meta_ahead_) : "",
      original_ != nullptr
          ? fmt::format(", a copy of A for the residual ({})", format_bytes(original_bytes_))
          : "");
  return Status::ok();
}

GpuElimination::~GpuElimination() {
  // Copies into the pinned arena end before it is unpinned (lane destructors synchronise).
  lanes_j_.clear();
  lane_i_.reset();
  {
    MutexLock lock(original_mu_);
    lane_copy_.reset();
  }
  pinning_.reset();  // joined, the arena unpinned
  engine_.release(pool_);
  engine_.release(lane_memory_);
  release_original();
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
  // A part only the device holds comes without RAM where the final values stay here
  // (PartRequest::final_on_device).
  if (cell.buffer == nullptr && (!final_on_device_only() || !tier_->find(i))) {
    return Status::internal(
        fmt::format("GPU tier: stripe {} has neither a RAM cell nor a device instance to "
                    "eliminate",
                    i));
  }
  bool created = false;
  STRIPESOLVE_ASSIGN_OR_RETURN(DeviceInstance inst,
                               instance_for(cell, cell.i0_store, true, *lane_i_, &created));
  const bool was_newer = !created && inst.newer;
  double* const host = cell.buffer == nullptr ? nullptr : host_of(cell, inst);
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
  // meantime; a stripe no update reads waits now. Not where the factors stay on the device only.
  const int64_t uses = stripe_uses_[static_cast<size_t>(i)];
  if (st.is_ok() && !final_on_device_only()) {
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
  return solve_on_device(x, nrhs, false);
}

Status GpuElimination::substitute_transposed(double* x, int64_t nrhs) {
  return solve_on_device(x, nrhs, true);
}

Status GpuElimination::solve_on_device(double* x, int64_t nrhs, bool transposed) {
  const storage::StripeGeometry& g = geometry_;
  const uint64_t bytes = 8ull * static_cast<uint64_t>(g.n) * static_cast<uint64_t>(nrhs);
  // The right-hand sides take the place of the first free piece of the pool.
  STRIPESOLVE_ASSIGN_OR_RETURN(DeviceInstance rhs_inst, tier_->allocate(-1, 0, bytes));
  const DeviceBlock rhs{device_at(rhs_inst.offset), g.n, nrhs, g.n};
  backend::DeviceLane& lane = *lane_i_;
  Status st = lane.upload(x, rhs, 0, nrhs);
  // The swaps each pass reads: kLocal's row swaps in the passes over L, kRow's column swaps in
  // those over U.
  const bool local = params_.pivot == stripe::PivotMode::kLocal;
  const bool row = params_.pivot == stripe::PivotMode::kRow;
  std::vector<backend::DeviceLane::FactorStripe> l, u;  // first stripe first
  for (int64_t i = 0; i < g.stripes; ++i) {
    const DeviceBlock part = instance_block(*tier_->find(i));
    const int32_t* raw = device_raw_ + g.row_begin(i);
    l.push_back({part, g.row_begin(i), local ? raw : nullptr});
    u.push_back({part, g.row_begin(i), row ? raw : nullptr});
  }
  // A x = b: L first to last, then U last to first; A^T x = b: U first to last, then L back.
  if (st.is_ok() && !transposed) {
    TraceRecorder::Span span(ctx_.trace, "master", "forward (device)");
    st = lane.forward(l, rhs);
  }
  if (st.is_ok() && !transposed) {
    TraceRecorder::Span span(ctx_.trace, "master", "backward (device)");
    std::reverse(u.begin(), u.end());
    st = lane.backward(u, rhs);
  }
  if (st.is_ok() && transposed) {
    TraceRecorder::Span span(ctx_.trace, "master", "transposed (device)");
    st = lane.transposed_upper(u, rhs);
    std::reverse(l.begin(), l.end());
    if (st.is_ok()) st = lane.transposed_lower(l, rhs);
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
