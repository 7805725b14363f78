#include "cache/stripe_cache.h"

#include <algorithm>
#include <string>

#include "base/internal_error.h"
#include "base/logging.h"

namespace stripesolve::cache {

namespace {

// Whether a cell in `state` serves a request for `target` without a download: idle parts
// always, eliminated (stuck) parts for everything but a J update, and parts whose values are on
// the device for the elim roles (which use the device instance).
bool usable_for(CellState state, CellState target) {
  return state == CellState::kIdle ||
         (state == CellState::kStuck && target != CellState::kWaitElimJ) ||
         (state == CellState::kOnDevice && target != CellState::kStuck);
}
// Whether a cell's columns include those a request asks for.
bool holds(const CellView& cell, const PartRequest& req) {
  return cell.i0_store <= req.col_begin && cell.i1_store >= req.col_end;
}
std::string part_name(int64_t stripe) {
  return "stripe " + std::to_string(stripe);
}
}  // namespace

StripeCache::StripeCache(uint64_t budget_bytes, HugePages huge_pages)
    : arena_(budget_bytes, huge_pages) {
  stats_.budget = arena_.capacity();
}

StripeCache::Cell& StripeCache::cell_locked(int64_t stripe) {
  auto it = cells_.find(stripe);
  if (it == cells_.end()) internal_error("cache: " + part_name(stripe) + " has no cell");
  return it->second;
}

void StripeCache::transition_locked(int64_t stripe, CellState to) {
  auto it = cells_.find(stripe);
  const CellState from = it == cells_.end() ? CellState::kAbsent : it->second.state;
  if (!is_legal_transition(from, to)) {
    internal_error("cache: illegal transition of " + part_name(stripe) + " from " +
                   std::string(cell_state_name(from)) + " to " + std::string(cell_state_name(to)));
  }
  static const auto log = logger("cache");
  log->trace("stripe {}: {} -> {}", stripe, cell_state_name(from), cell_state_name(to));
  Cell& c = it->second;  // kAbsent is only a source for creation, where request() made the cell
  if (from == CellState::kElimI || from == CellState::kElimJ) c.view.dirty = true;
  if (from == CellState::kUploading) {
    c.view.dirty = false;
    c.keep_after_upload = false;
  }
  if (from == CellState::kStuck && to == CellState::kIdle) c.read_once = false;
  if (to == CellState::kIdle || to == CellState::kStuck) c.last_use = ++clock_;
  if (to == CellState::kAbsent) {
    if (c.extent.bytes > 0) arena_.release(c.extent);  // none: its values were on the device
    stats_.bytes_in_use = arena_.used();
    cells_.erase(it);
  } else {
    c.state = to;
  }
  ++changes_;
  changed_.notify_all();
}

StripeCache::Cell* StripeCache::choose_victim_locked(StripeRange spared, bool from_spared) {
  Cell* victim = nullptr;
  for (auto& [stripe, c] : cells_) {
    if (!is_evictable(c.state) || spared.contains(stripe) != from_spared) continue;
    // cells_ is ordered by stripe: among the spared the latest evictable one wins.
    if (from_spared || victim == nullptr || c.last_use < victim->last_use) victim = &c;
  }
  return victim;
}

void StripeCache::evict_locked(Cell& c) {
  ++stats_.evictions;
  if (c.view.dirty) {
    ++stats_.uploads;
    transition_locked(c.view.stripe, CellState::kWaitUpload);
  } else {
    transition_locked(c.view.stripe, CellState::kAbsent);
  }
}

Result<std::optional<Extent>> StripeCache::allocate_locked(MutexLock& lock, int64_t stripe,
                                                           uint64_t bytes, bool may_wait,
                                                           StripeRange spared) {
  const uint64_t want = Arena::round_up(bytes);
  if (want > arena_.capacity()) {
    return Status::resource_exhausted("cache: " + part_name(stripe) + " needs " +
                                      std::to_string(want) + " bytes, more than the budget of " +
                                      std::to_string(arena_.capacity()) + " bytes");
  }
  for (;;) {
    if (!failure_.is_ok()) return failure_;
    if (auto e = arena_.allocate(want)) {
      stats_.bytes_in_use = arena_.used();
      if (stats_.bytes_in_use > stats_.peak_bytes) stats_.peak_bytes = stats_.bytes_in_use;
      return e;
    }
    uint64_t uploading = 0;
    bool in_flight = false;
    for (const auto& [s, c] : cells_) {
      if (c.state == CellState::kWaitUpload || c.state == CellState::kUploading) {
        uploading += c.extent.bytes;
      }
      // A DSR part is stuck only until its reader removes it: memory will come back.
      in_flight =
          in_flight || is_in_flight(c.state) || (c.state == CellState::kStuck && c.read_once);
    }
    // Enough memory is on its way back: wait for it before evicting more.
    if (uploading > 0 && arena_.free_bytes() + uploading >= want) {
      if (!may_wait) return std::optional<Extent>();
      changed_.wait(lock);
      continue;
    }
    // The spared stripes go last: only when nothing in flight could return memory instead.
    Cell* victim = choose_victim_locked(spared, /*from_spared=*/false);
    if (victim == nullptr && !in_flight) victim = choose_victim_locked(spared, true);
    if (victim != nullptr) {
      evict_locked(*victim);
      continue;
    }
    if (!in_flight) {
      std::string held;
      for (const auto& [s, c] : cells_) {
        held += (held.empty() ? "" : ", ") + std::to_string(s) + " " +
                std::string(cell_state_name(c.state));
      }
      const uint64_t reserved = reserved_bytes_locked();
      return Status::resource_exhausted(
          "cache: " + part_name(stripe) + " needs " + std::to_string(want) +
          " bytes but the budget of " + std::to_string(arena_.capacity()) + " bytes holds " +
          std::to_string(arena_.used() - reserved) + " bytes of parts none of which can be " +
          "evicted (" + held + ")" +
          (reserved > 0 ? " and " + std::to_string(reserved) + " bytes reserved" : ""));
    }
    if (!may_wait) return std::optional<Extent>();
    changed_.wait(lock);  // backpressure: in-flight work will return memory
  }
}

CellView StripeCache::take_hit_locked(Cell& c, const PartRequest& req) {
  ++stats_.hits;
  c.view.elim_begin = req.elim_begin;
  c.view.elim_end = req.elim_end;
  if (req.target == CellState::kWaitElimI) c.count = req.count;
  if (req.target == CellState::kStuck) c.read_once = true;
  if (c.state != req.target) transition_locked(req.stripe, req.target);
  return c.view;
}

std::optional<CellView> StripeCache::try_hit(const PartRequest& req) {
  MutexLock lock(mu_);
  if (!failure_.is_ok()) return std::nullopt;
  auto it = cells_.find(req.stripe);
  if (it == cells_.end()) return std::nullopt;
  Cell& c = it->second;
  if (!usable_for(c.state, req.target) || !holds(c.view, req) || needs_extent(c, req)) {
    return std::nullopt;
  }
  return take_hit_locked(c, req);
}

bool StripeCache::read_ahead(const PartRequest& req) {
  MutexLock lock(mu_);
  if (!failure_.is_ok() || cells_.find(req.stripe) != cells_.end()) return false;
  const std::optional<Extent> e = arena_.allocate(Arena::round_up(req.buffer_bytes));
  if (!e) return false;
  stats_.bytes_in_use = arena_.used();
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes_in_use);
  start_download_locked(req, *e, CellState::kIdle);
  return true;
}

Result<CellView> StripeCache::request(const PartRequest& req) {
  MutexLock lock(mu_);
  STRIPESOLVE_ASSIGN_OR_RETURN(std::optional<CellView> cell,
                               request_locked(lock, req, /*may_wait=*/true, /*spared=*/{}));
  return *cell;  // request_locked returns a cell or an error when it may wait
}

Result<std::optional<CellView>> StripeCache::try_request(const PartRequest& req,
                                                         StripeRange spared) {
  MutexLock lock(mu_);
  return request_locked(lock, req, /*may_wait=*/false, spared);
}

Result<std::optional<CellView>> StripeCache::request_locked(MutexLock& lock, const PartRequest& req,
                                                            bool may_wait, StripeRange spared) {
  STRIPESOLVE_CHECK(req.target == CellState::kWaitElimI || req.target == CellState::kWaitElimJ ||
                        req.target == CellState::kStuck,
                    "cache: bad request target " + std::string(cell_state_name(req.target)));
  for (;;) {
    if (!failure_.is_ok()) return failure_;
    auto it = cells_.find(req.stripe);
    if (it == cells_.end()) break;
    Cell& c = it->second;
    if (usable_for(c.state, req.target) && holds(c.view, req)) {
      if (needs_extent(c, req)) {
        // Memory for the values the device gives back when the stripe is final; no download.
        // Only the master moves a kOnDevice cell, so it is still here after a wait.
        STRIPESOLVE_ASSIGN_OR_RETURN(
            std::optional<Extent> e,
            allocate_locked(lock, req.stripe, c.view.bytes, may_wait, spared));
        if (!e) return std::optional<CellView>();
        Cell& back = cell_locked(req.stripe);
        back.extent = *e;
        back.view.buffer = arena_.base() + e->offset;
        return std::optional<CellView>(take_hit_locked(back, req));
      }
      return std::optional<CellView>(take_hit_locked(c, req));
    }
    if (c.state == CellState::kIdle) {  // holds other columns than needed: drop it
      evict_locked(c);
      continue;
    }
    if (!may_wait) return std::optional<CellView>();
    changed_.wait(lock);  // busy with an earlier operation
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(
      std::optional<Extent> e,
      allocate_locked(lock, req.stripe, req.buffer_bytes, may_wait, spared));
  if (!e) return std::optional<CellView>();
  // allocate_locked may have waited; nobody else creates this stripe's cell (one requester per
  // stripe at a time: the master walks tasks in order, DSR runs in other phases).
  STRIPESOLVE_CHECK(cells_.find(req.stripe) == cells_.end(),
                    "cache: two requesters raced for " + part_name(req.stripe));
  return std::optional<CellView>(start_download_locked(req, *e, req.target).view);
}

StripeCache::Cell& StripeCache::start_download_locked(const PartRequest& req, const Extent& e,
                                                      CellState target) {
  ++stats_.misses;
  Cell& c = cells_[req.stripe];
  c.view = CellView{req.stripe, req.col_begin,  arena_.base() + e.offset,
                    e.bytes,    req.elim_begin, req.elim_end,
                    false,      req.col_end};
  c.extent = e;
  c.target = target;
  c.count = target == CellState::kIdle ? 0 : req.count;
  c.created = ++clock_;
  c.read_once = target == CellState::kStuck;
  c.state = CellState::kAbsent;
  transition_locked(req.stripe, CellState::kWaitDownload);
  return c;
}

bool StripeCache::fits_beside(uint64_t bytes, int64_t kept_stripe) const {
  MutexLock lock(mu_);
  std::vector<Extent> returning;
  for (const auto& [stripe, c] : cells_) {
    if (stripe == kept_stripe) continue;
    // Evictable now, on its way out, or busy with work already handed out that ends in kIdle
    // (a J update; a download for one). kOnDevice and stuck cells stay put.
    const bool comes_back =
        is_evictable(c.state) || c.state == CellState::kWaitUpload ||
        c.state == CellState::kUploading || c.state == CellState::kWaitElimJ ||
        c.state == CellState::kElimJ ||
        ((c.state == CellState::kWaitDownload || c.state == CellState::kDownloading) &&
         c.target == CellState::kWaitElimJ);
    if (comes_back) returning.push_back(c.extent);
  }
  return arena_.largest_hole_with(std::move(returning)) >= Arena::round_up(bytes);
}

Result<CellView> StripeCache::wait_for(int64_t stripe, CellState state) {
  MutexLock lock(mu_);
  for (;;) {
    if (!failure_.is_ok()) return failure_;
    auto it = cells_.find(stripe);
    if (it != cells_.end() && it->second.state == state) return it->second.view;
    changed_.wait(lock);
  }
}

void StripeCache::transition(int64_t stripe, CellState to) {
  MutexLock lock(mu_);
  cell_locked(stripe);
  transition_locked(stripe, to);
}

void StripeCache::finish_elim_i(int64_t stripe, bool modified) {
  MutexLock lock(mu_);
  Cell& c = cell_locked(stripe);
  const bool was_dirty = c.view.dirty;
  transition_locked(stripe, c.count > 0 ? CellState::kStuck : CellState::kIdle);
  if (!modified) c.view.dirty = was_dirty;
}

void StripeCache::give_back_memory_locked(Cell& c) {
  if (c.view.buffer == nullptr) return;
  arena_.release(c.extent);  // before the caller's transition, which wakes those waiting for it
  stats_.bytes_in_use = arena_.used();
  c.extent = Extent{};
  c.view.buffer = nullptr;
}

void StripeCache::finish_elim_i_on_device(int64_t stripe) {
  MutexLock lock(mu_);
  Cell& c = cell_locked(stripe);
  give_back_memory_locked(c);
  if (c.count > 0) {
    transition_locked(stripe, CellState::kStuck);
    c.view.dirty = false;
    c.drop_when_released = true;
  } else {
    transition_locked(stripe, CellState::kIdle);
    transition_locked(stripe, CellState::kAbsent);
  }
}

void StripeCache::release_use(int64_t stripe) {
  MutexLock lock(mu_);
  release_use_locked(stripe);
}

void StripeCache::finish_elim_j(int64_t stripe, int64_t i_begin, int64_t i_end, UpdatedJ where) {
  MutexLock lock(mu_);
  Cell& c = cell_locked(stripe);
  for (int64_t i = i_begin; i < i_end; ++i) release_use_locked(i);
  if (where == UpdatedJ::kOnDeviceOnly) give_back_memory_locked(c);
  STRIPESOLVE_CHECK(where == UpdatedJ::kOnDeviceOnly || c.view.buffer != nullptr,
                    "cache: " + part_name(stripe) + " has no memory for values kept in RAM");
  transition_locked(stripe, where == UpdatedJ::kInRam ? CellState::kIdle : CellState::kOnDevice);
}

void StripeCache::discard_idle() {
  MutexLock lock(mu_);
  std::vector<int64_t> idle;
  for (const auto& [stripe, c] : cells_) {
    if (c.state == CellState::kIdle) idle.push_back(stripe);
  }
  for (int64_t stripe : idle) transition_locked(stripe, CellState::kAbsent);
}

uint64_t StripeCache::on_device_bytes() const {
  MutexLock lock(mu_);
  uint64_t bytes = 0;
  for (const auto& [stripe, c] : cells_) {
    if (c.state == CellState::kOnDevice) bytes += c.extent.bytes;
  }
  return bytes;
}

void StripeCache::release_use_locked(int64_t stripe) {
  Cell& c = cell_locked(stripe);
  STRIPESOLVE_CHECK(c.state == CellState::kStuck && c.count > 0,
                    "cache: release of " + part_name(stripe) + " in state " +
                        std::string(cell_state_name(c.state)) + " with count " +
                        std::to_string(c.count));
  if (--c.count == 0) {
    transition_locked(stripe, c.drop_when_released ? CellState::kAbsent : CellState::kIdle);
  }
}

void StripeCache::remove(int64_t stripe) {
  MutexLock lock(mu_);
  cell_locked(stripe);
  transition_locked(stripe, CellState::kAbsent);
}

std::optional<IoWork> StripeCache::next_io_work() {
  std::vector<IoWork> batch = next_io_batch(1);
  if (batch.empty()) return std::nullopt;
  return batch.front();
}

std::vector<IoWork> StripeCache::next_io_batch(size_t max) {
  STRIPESOLVE_CHECK(max > 0, "cache: next_io_batch of no cells");
  MutexLock lock(mu_);
  for (;;) {
    if (shut_down_ || !failure_.is_ok()) return {};
    std::vector<Cell*> downloads;
    for (auto& [s, c] : cells_) {
      if (c.state == CellState::kWaitUpload) {
        transition_locked(s, CellState::kUploading);
        return {IoWork{IoWork::Kind::kUpload, c.view}};
      }
      if (c.state == CellState::kWaitDownload) downloads.push_back(&c);
    }
    if (!downloads.empty()) {
      // In request order: the master needs them in that order (and the disk streams them so).
      std::sort(downloads.begin(), downloads.end(),
                [](const Cell* a, const Cell* b) { return a->created < b->created; });
      if (downloads.size() > max) downloads.resize(max);
      std::vector<IoWork> batch;
      batch.reserve(downloads.size());
      for (Cell* c : downloads) {
        transition_locked(c->view.stripe, CellState::kDownloading);
        batch.push_back(IoWork{IoWork::Kind::kDownload, c->view});
      }
      return batch;
    }
    changed_.wait(lock);
  }
}

void StripeCache::finish_io(const IoWork& work, const Status& result) {
  MutexLock lock(mu_);
  if (!result.is_ok()) {
    ++stats_.failed_transfers;
    if (failure_.is_ok()) failure_ = result;
    changed_.notify_all();
    return;  // the cell stays in its transfer state; the job is over
  }
  Cell& c = cell_locked(work.cell.stripe);
  if (work.kind == IoWork::Kind::kDownload) {
    transition_locked(work.cell.stripe, c.target);
  } else {
    transition_locked(work.cell.stripe,
                      c.keep_after_upload ? CellState::kIdle : CellState::kAbsent);
  }
}

Status StripeCache::flush() {
  MutexLock lock(mu_);
  for (;;) {
    if (!failure_.is_ok()) return failure_;
    if (cells_.empty()) return Status::ok();
    bool in_flight = false;
    bool evicted = false;
    for (auto it = cells_.begin(); it != cells_.end();) {
      auto next = std::next(it);
      if (is_evictable(it->second.state)) {
        evict_locked(it->second);
        evicted = true;
      } else {
        in_flight = in_flight || is_in_flight(it->second.state);
      }
      it = next;
    }
    if (evicted) continue;
    if (!in_flight) {
      return Status::failed_precondition("cache: flush with " + std::to_string(cells_.size()) +
                                         " stuck stripe parts (first: stripe " +
                                         std::to_string(cells_.begin()->first) + ")");
    }
    changed_.wait(lock);
  }
}

Status StripeCache::write_back() {
  MutexLock lock(mu_);
  for (;;) {
    if (!failure_.is_ok()) return failure_;
    bool pending = false;
    bool stuck_dirty = false;
    for (auto& [s, c] : cells_) {
      if (c.state == CellState::kIdle && c.view.dirty) {
        c.keep_after_upload = true;
        ++stats_.uploads;
        transition_locked(s, CellState::kWaitUpload);
        pending = true;
      } else if (c.state == CellState::kWaitUpload || c.state == CellState::kUploading ||
                 is_in_flight(c.state)) {
        pending = true;  // an upload, or an operation whose cell may become dirty, still runs
      } else if (c.view.dirty) {
        stuck_dirty = true;
      }
    }
    if (!pending) {
      if (stuck_dirty) {
        return Status::failed_precondition("cache: write-back with dirty stuck stripe parts");
      }
      return Status::ok();
    }
    changed_.wait(lock);
  }
}

void StripeCache::release_read(int64_t stripe) {
  MutexLock lock(mu_);
  cell_locked(stripe);
  transition_locked(stripe, CellState::kIdle);
}

void StripeCache::fail(Status status) {
  MutexLock lock(mu_);
  if (failure_.is_ok() && !status.is_ok()) failure_ = std::move(status);
  ++changes_;
  changed_.notify_all();
}

uint64_t StripeCache::changes() const {
  MutexLock lock(mu_);
  return changes_;
}

Status StripeCache::wait_change(uint64_t seen) {
  MutexLock lock(mu_);
  while (changes_ == seen && failure_.is_ok()) changed_.wait(lock);
  return failure_;
}

void StripeCache::shutdown() {
  MutexLock lock(mu_);
  shut_down_ = true;
  changed_.notify_all();
}

Status StripeCache::failure() const {
  MutexLock lock(mu_);
  return failure_;
}

CacheStats StripeCache::stats() const {
  MutexLock lock(mu_);
  CacheStats s = stats_;
  s.cells = cells_.size();
  return s;
}

std::byte* StripeCache::reserve(uint64_t bytes) {
  MutexLock lock(mu_);
  auto e = arena_.allocate_high(Arena::round_up(bytes));
  if (!e) return nullptr;
  stats_.bytes_in_use = arena_.used();
  stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes_in_use);
  std::byte* block = arena_.base() + e->offset;
  reserved_[block] = *e;
  return block;
}

void StripeCache::unreserve(std::byte* block) {
  MutexLock lock(mu_);
  auto it = reserved_.find(block);
  if (it == reserved_.end()) internal_error("cache: unreserve of a block it did not reserve");
  arena_.release(it->second);
  reserved_.erase(it);
  stats_.bytes_in_use = arena_.used();
  ++changes_;
  changed_.notify_all();  // requests waiting for memory may find it now
}

uint64_t StripeCache::reserved_bytes() const {
  MutexLock lock(mu_);
  return reserved_bytes_locked();
}

uint64_t StripeCache::reserved_bytes_locked() const {
  uint64_t total = 0;
  for (const auto& [block, e] : reserved_) total += e.bytes;
  return total;
}

uint64_t StripeCache::cells_span() const {
  MutexLock lock(mu_);
  if (reserved_.empty()) return arena_.capacity();
  const uint64_t lowest = reserved_.begin()->second.offset;  // keyed by address: lowest first
  return lowest + reserved_bytes_locked() == arena_.capacity() ? lowest : arena_.capacity();
}

CellState StripeCache::state_of(int64_t stripe) const {
  MutexLock lock(mu_);
  auto it = cells_.find(stripe);
  return it == cells_.end() ? CellState::kAbsent : it->second.state;
}

}  // namespace stripesolve::cache
