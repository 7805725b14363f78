// The RAM cache of stripe parts (002 §7.2 L_PC, Fig 15; §8.3 Fig 19).
//
// One Arena with a hard byte budget holds the values; a table of cells, one per cached stripe part,
// holds per cell: stripe index, the stored columns [i0_store, i1_store), extent, the elimination
// range it waits for, count (J stripes that still need this eliminated stripe; "stuck" while > 0),
// state, dirty bit and last use. Every state change goes through one transition function that
// checks the edge (cell_state.h; an illegal edge is a bug: internal_error), logs old -> new at
// trace level (logger "cache") and wakes every waiter.
//
// Memory: request() never allocates past the budget. A part that does not fit evicts idle cells,
// the longest idle first (clean ones are dropped, dirty ones go to kWaitUpload for the I/O role),
// and otherwise waits (backpressure) for in-flight work to free memory. Stuck cells are never
// evicted. If nothing is in flight and nothing is evictable the request fails with
// kResourceExhausted (the budget is too small for the working set; the planner prevents it).
//
// The cache does no I/O itself: the I/O role (scheduler/) takes work from next_io_work() or
// next_io_batch(), reads or writes the cell buffer, and reports each cell with finish_io(), exactly
// once. A batch is either one upload or up to `max` downloads, oldest first: the role may stream
// the downloads of a batch as one disk stream and report each as it arrives. Uploads are never
// batched with downloads, so a download is never started ahead of an upload the role has taken.
//
// Ownership of cell buffers follows the state: kDownloading/kUploading -> the I/O role (every cell
// of a batch, from next_io_batch() until its own finish_io());
// kElimI -> elim.I; kElimJ -> the elim.J worker that moved it there; kStuck -> read-only for all;
// other states -> nobody touches the values. The transitions (under the mutex) order the accesses.
//
// Thread-safety: all methods are thread-safe; one mutex `mu_` guards the arena, the cell table and
// the statistics; one condition variable `changed_` is notified on every change.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "base/mutex.h"
#include "base/status.h"
#include "cache/arena.h"
#include "cache/cell_state.h"

namespace stripesolve::cache {

// The end column of a part through column n (storage::kThroughN).
inline constexpr int64_t kThroughN = std::numeric_limits<int64_t>::max();

// What a role sees of a cell. i0_store, i1_store and bytes never change during the cell's life,
// nor does the buffer, but for a part whose values only the device holds (kOnDevice after
// UpdatedJ::kOnDeviceOnly): it has none (nullptr) until the master requests it for its
// elimination, which gives it a new one.
struct CellView {
  int64_t stripe = -1;
  int64_t i0_store = 0;         // the part holds columns [i0_store, i1_store) of the stripe
  std::byte* buffer = nullptr;  // 4 KiB aligned, `bytes` long
  uint64_t bytes = 0;
  int64_t elim_begin = 0;  // the elimination range the cell waits for
  int64_t elim_end = 0;
  bool dirty = false;
  int64_t i1_store = kThroughN;  // kThroughN: through column n (every part the elimination uses)
};

struct PartRequest {
  int64_t stripe = 0;
  // Columns [col_begin, col_end) are needed; a cell with i0_store <= col_begin and
  // i1_store >= col_end serves.
  int64_t col_begin = 0;
  uint64_t buffer_bytes = 0;  // I/O buffer size for those columns (storage part_layout)
  CellState target = CellState::kWaitElimJ;  // kWaitElimI, kWaitElimJ or kStuck (DSR)
  int64_t elim_begin = 0;
  int64_t elim_end = 0;
  int64_t count = 0;  // kWaitElimI: J stripes that will need it once eliminated
  int64_t col_end = kThroughN;
  // kWaitElimI: the elimination's final values stay on the device (the GPU tier's
  // final_on_device_only), so a part only the device holds needs no memory: the cell comes as
  // it is, without a buffer.
  bool final_on_device = false;
};

// Where a J stripe's values are after its update (StripeCache::finish_elim_j; the GPU tier
// decides, scheduler/gpu_elimination.h).
enum class UpdatedJ {
  kInRam,              // the cell holds them (kIdle)
  kOnDeviceBesideRam,  // newer on the device; the RAM extent stays reserved for them (kOnDevice)
  // Newer on the device, which holds every column of the cell: the RAM extent goes back to the
  // arena (kOnDevice without a buffer). A J update takes such a part as it is (it stays on the
  // device), an elimination with a new extent (request(): no download, the device's values come
  // back when the stripe is final). A RAM cache smaller than what the device keeps then still
  // holds the working set beside it.
  kOnDeviceOnly,
};

// Stripes [begin, end); empty when end <= begin.
struct StripeRange {
  int64_t begin = 0;
  int64_t end = 0;
  bool contains(int64_t stripe) const { return begin <= stripe && stripe < end; }
};

struct IoWork {
  enum class Kind { kDownload, kUpload };
  Kind kind = Kind::kDownload;
  CellView cell;
};

struct CacheStats {
  uint64_t budget = 0;  // arena capacity
  uint64_t bytes_in_use = 0;
  uint64_t peak_bytes = 0;  // never above budget
  uint64_t hits = 0;        // requests served by a cached cell
  uint64_t misses = 0;      // requests that created a cell to download
  uint64_t evictions = 0;
  uint64_t uploads = 0;           // evictions that wrote a dirty cell back
  uint64_t failed_transfers = 0;  // finish_io() reports with an error
  size_t cells = 0;
};

class StripeCache {
 public:
  explicit StripeCache(uint64_t budget_bytes, HugePages huge_pages = HugePages::kWhenLarge);
  StripeCache(const StripeCache&) = delete;
  StripeCache& operator=(const StripeCache&) = delete;

  // The arena, for pinned-memory registration by a GPU backend (before any request).
  Arena& arena() { return arena_; }

  // Master or DSR. Waits while the stripe's cell is busy with an earlier operation. A cell in
  // kIdle/kStuck that holds the columns asked for is a hit and moves to `target` (kStuck stays
  // kStuck); otherwise (absent, or holding other columns: evicted first) it is a miss: an extent is
  // allocated (evicting/waiting as above) and the cell starts in kWaitDownload.
  Result<CellView> request(const PartRequest& req);
  // request() that never waits: where request() would wait (the cell busy with an earlier
  // operation, or memory that in-flight work or uploads must return first) it returns nullopt,
  // having started the evictions it could. Called again after a change, it goes on from there.
  // The cells of the `spared` stripes are evicted only when nothing in flight could return
  // memory instead (the master's next elimination and the rest of its meta-stripe, whose
  // updates inside the meta-stripe come next), the one of the latest stripe first.
  Result<std::optional<CellView>> try_request(const PartRequest& req, StripeRange spared = {});
  // Whether a part of `bytes` would find room once every cell but `kept_stripe`'s that is
  // evictable, being written back, or busy with a J update already handed out (or its download)
  // has given its memory back: the master's test before it pins `kept_stripe` (an elimination
  // handed out early) while a miss waits for memory. Fragmentation included; a snapshot.
  bool fits_beside(uint64_t bytes, int64_t kept_stripe) const;
  // request() restricted to an immediate hit: the part is cached in a usable state and holds the
  // columns asked for. Never waits, never allocates; nullopt otherwise (or after a failure), and
  // for the elimination of a part whose values only the device holds (it needs memory: request()
  // or try_request()) unless they stay there (PartRequest::final_on_device).
  std::optional<CellView> try_hit(const PartRequest& req);
  // A download started before a task needs the part (the master's read-ahead where the cache
  // holds every part at once): where the stripe has no cell and free memory holds the part now
  // (nothing evicted, nothing waited for), a cell is made whose download ends kIdle and clean,
  // a hit for the task's request later. req.target is ignored. False: not started.
  bool read_ahead(const PartRequest& req);

  // Waits until the stripe's cell is in `state`. Returns the cache's failure if it failed.
  Result<CellView> wait_for(int64_t stripe, CellState state);

  // How many times any cell changed state (or the cache failed): a master that tried parts with
  // try_hit() after reading it waits for the next change with wait_change(seen) instead of
  // blocking on one part (no change between the read and the wait is lost).
  uint64_t changes() const;
  // Waits until changes() != seen. Returns the cache's failure if it failed.
  Status wait_change(uint64_t seen);

  // Moves the stripe's cell along a legal edge (internal error otherwise, or if it has no cell).
  void transition(int64_t stripe, CellState to);
  // elim.I finished: kElimI -> kStuck if count > 0, else kIdle. modified = false: elim.I left
  // the values as they were (a stripe loaded final from a resumed factor), so the cell stays as
  // clean as it came.
  void finish_elim_i(int64_t stripe, bool modified = true);
  // elim.I finished and the stripe's final values stay on the GPU tier's device only (nothing on
  // the host will read or store them): its memory goes back now, and the cell stays kStuck for
  // the updates that read it (count > 0), then leaves the cache, never written.
  void finish_elim_i_on_device(int64_t stripe);
  // One J stripe no longer needs eliminated stripe `stripe`: count -= 1; at 0 kStuck -> kIdle
  // (002 §8.3 path 1: the elim.J thread that finishes the last update unsticks it).
  void release_use(int64_t stripe);
  // elim.J finished updating `stripe` by [i_begin, i_end): releases each I (as release_use) and
  // moves the J cell kElimJ -> kIdle, atomically, so that nobody sees J idle while the I stripes
  // it no longer needs still look stuck.
  // Where the GPU tier kept J's newer values on the device J moves to kOnDevice, its extent
  // given back with UpdatedJ::kOnDeviceOnly.
  void finish_elim_j(int64_t stripe, int64_t i_begin, int64_t i_end,
                     UpdatedJ where = UpdatedJ::kInRam);
  // RAM bytes of cells in kOnDevice (not evictable while there; none for those whose extent went
  // back).
  uint64_t on_device_bytes() const;
  // The master has read a DSR part: kStuck -> kAbsent without write-back.
  void remove(int64_t stripe);
  // The master has read a DSR part and keeps it cached (clean, evictable): kStuck -> kIdle.
  void release_read(int64_t stripe);

  // I/O role: blocks until a cell waits for upload (served first: they free memory) or download,
  // moves it to kUploading/kDownloading and returns it; nullopt after shutdown() or fail().
  std::optional<IoWork> next_io_work();
  // I/O role: blocks like next_io_work(), then returns one upload if any waits (alone: uploads
  // free memory and keep their queue position ahead of later downloads), else every waiting
  // download up to `max`, oldest first, all moved to kDownloading. Empty after shutdown() or
  // fail(). The caller owns every returned cell until it reports that cell with finish_io().
  std::vector<IoWork> next_io_batch(size_t max);
  // I/O role, once per cell taken: a download moves the cell to its target state, an upload
  // removes the cell (or idles it after write_back()). A failed transfer fails the whole cache with
  // that status (first failure wins) and leaves the cell in its transfer state.
  void finish_io(const IoWork& work, const Status& result);

  // Evicts every idle cell (dirty ones through the I/O role) and waits until the table is empty.
  // Fails if a cell is stuck or busy for good, or the cache failed.
  Status flush();
  // Writes every dirty idle cell back through the I/O role and keeps it cached, clean; waits for
  // the uploads. Fails if a dirty cell is stuck or busy for good, or the cache failed.
  Status write_back();

  // Drops every idle cell without writing it back, dirty or not (values no longer wanted: the
  // factors of a solve that does not persist them). Cells in other states stay.
  void discard_idle();

  // Wakes every waiter; from now on every wait returns `status` (first failure wins).
  void fail(Status status);
  // Stops the I/O role (next_io_work returns nullopt, next_io_batch an empty batch).
  void shutdown();
  Status failure() const;

  CacheStats stats() const;
  CellState state_of(int64_t stripe) const;  // kAbsent when it has no cell

  // A block of `bytes` (4 KiB aligned) outside the cells, from the top of the arena
  // (Arena::allocate_high), held until unreserve(): the copy of A that the residual reads where
  // the budget holds A twice (scheduler/ram_original.h). Counted in bytes_in_use, never evicted;
  // the cells have what is left. Never waits: nullptr when no hole holds it now (the caller
  // does without). Every reserved block must be given back before the cache is destroyed.
  std::byte* reserve(uint64_t bytes);
  void unreserve(std::byte* block);
  uint64_t reserved_bytes() const;
  // The arena's bytes below its reserved blocks where those run to its end (its capacity where
  // none is reserved, or a hole lies above one): the span every cell lies in while they are held.
  // The GPU tier pins only this span (the copy of A above it is read on the host's cores, never
  // copied to a device).
  uint64_t cells_span() const;

 private:
  struct Cell {
    CellView view;
    CellState state = CellState::kAbsent;
    CellState target = CellState::kAbsent;  // where a download leads
    int64_t count = 0;
    uint64_t last_use = 0;
    uint64_t created = 0;             // download order
    bool read_once = false;           // a DSR part: its reader will remove it
    bool keep_after_upload = false;   // write_back(): kUploading -> kIdle
    bool drop_when_released = false;  // finish_elim_i_on_device(): kStuck -> kAbsent, not kIdle
    Extent extent;                    // none (0 bytes) while only the device holds the values
  };
  // The one place where a state changes. Deletes the cell (and frees its extent) on kAbsent.
  void transition_locked(int64_t stripe, CellState to) REQUIRES(mu_);
  Cell& cell_locked(int64_t stripe) REQUIRES(mu_);
  void release_use_locked(int64_t stripe) REQUIRES(mu_);
  // A new cell of req's stripe in `extent`, waiting for its download, which leads to `target`
  // (request()'s, or kIdle for a read-ahead); a miss.
  Cell& start_download_locked(const PartRequest& req, const Extent& extent, CellState target)
      REQUIRES(mu_);
  // The cell's extent back to the arena (its values live on the device only); none: nothing.
  void give_back_memory_locked(Cell& c) REQUIRES(mu_);
  CellView take_hit_locked(Cell& c, const PartRequest& req) REQUIRES(mu_);
  // Whether a request finds the cell without its values' memory: the device alone holds them
  // and an elimination asks for them that brings its final values back to RAM (it needs an
  // extent for them).
  static bool needs_extent(const Cell& c, const PartRequest& req) {
    return c.state == CellState::kOnDevice && c.view.buffer == nullptr &&
           req.target == CellState::kWaitElimI && !req.final_on_device;
  }
  // request() and try_request(); nullopt only when !may_wait.
  Result<std::optional<CellView>> request_locked(MutexLock& lock, const PartRequest& req,
                                                 bool may_wait, StripeRange spared) REQUIRES(mu_);
  // nullopt only when !may_wait and the memory must come back first. `spared`: see
  // try_request().
  Result<std::optional<Extent>> allocate_locked(MutexLock& lock, int64_t stripe, uint64_t bytes,
                                                bool may_wait, StripeRange spared) REQUIRES(mu_);
  // Eviction policy, in one place: the longest idle evictable cell outside `spared`; with
  // `from_spared`, the evictable cell of the latest spared stripe. nullptr if none.
  Cell* choose_victim_locked(StripeRange spared, bool from_spared) REQUIRES(mu_);
  void evict_locked(Cell& cell) REQUIRES(mu_);
  uint64_t reserved_bytes_locked() const REQUIRES(mu_);

  mutable Mutex mu_;
  CondVar changed_;
  Arena arena_ GUARDED_BY(mu_);
  std::map<int64_t, Cell> cells_ GUARDED_BY(mu_);
  std::map<std::byte*, Extent> reserved_ GUARDED_BY(mu_);  // reserve()'s blocks
  uint64_t clock_ GUARDED_BY(mu_) = 0;                     // logical time for last_use
  uint64_t changes_ GUARDED_BY(mu_) = 0;                   // see changes()
  CacheStats stats_ GUARDED_BY(mu_);
  Status failure_ GUARDED_BY(mu_);
  bool shut_down_ GUARDED_BY(mu_) = false;
};

}  // namespace stripesolve::cache
