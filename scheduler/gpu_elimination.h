// The GPU tier's elim.I and elim.J (8b of ../shared/design/ARCHITECTURE.md; 002 §7-9 with L_GPU):
// the arithmetic of the triangulation on one device, behind run_factorization's roles.
//
//   elim.I (a high-priority lane): the stripe's device instance (copied in from its pinned RAM
//     cell unless J's newer values are already there), eliminated on the device (cuSOLVER dgetrf
//     on the transposed stripe for `row` pivoting, backend/device_engine.h), copied back to RAM
//     (final), and kept on the device while updates still read it.
//   elim.J worker w (its own lane: copy-in, compute and copy-out streams): J copied in by column
//     segments unless resident, permuted by the range's column swaps (kRow), updated by the
//     range's U in one dtrsm + segment GEMMs with K = all rows of the range (a meta-stripe of
//     S^m stripes: the K/4 flops per byte of 8b), and copied back segment by segment, or kept on
//     the device (its RAM cell goes to kOnDevice) when the plan keeps the whole matrix there or J
//     is an I stripe soon (keep_j). Where the device keeps the whole matrix and RAM cannot, a J
//     kept whole on the device gives its RAM back until its elimination
//     (cache::UpdatedJ::kOnDeviceOnly): the device is a tier of its own, not a copy of what RAM
//     holds.
//   The U block of a range of several stripes is assembled once on the device from the
//     stripes' instances (with the later stripes' column swaps applied to the earlier ones, so
//     that one update by the whole range equals the updates by each stripe in turn) and freed
//     after the range's last update.
// Device memory: one pool of the planner's device budget (cache/device_tier.h carves it), plus
// the lanes' workspaces, reserved from gpu::DeviceBudget for the job.
//
// After the factorization, substitute() runs the forward and backward substitution on the
// device when every factor stripe is still resident from column 0 (the whole-matrix case),
// which is where it is fastest, and substitute_transposed() the condition estimate's solves
// with A^T; otherwise the host's substitutions run on the factors in RAM or the store.
//
// Several devices (scheduler/multi_gpu_elimination.h): each has a GpuElimination with its share
// (device d of D). Each stripe belongs to one device (DeviceShare::owner): its J updates and its
// elimination run there, so a J kept on a device is eliminated where it is. An eliminated stripe
// that updates on another device need is adopted there: uploaded from its RAM cell once the
// owner's copy to RAM has landed, with its column permutation.
//
// Thread-safety: eliminate() from the one elim.I thread, update(w, ...) and adopt() from worker
// w only (each worker has its lane on one device), keep_read() from the I/O threads (its own
// lane, under original_mu_).
//
// Files: gpu_elimination.cc (the budget, lanes and pool; elimination; substitution),
// gpu_updates.cc (the J updates), gpu_sharing.cc (use counts, adoption, resumed runs),
// gpu_residual.cc (the copy of A and the residual on it).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/device_engine.h"
#include "base/mutex.h"
#include "cache/device_tier.h"
#include "scheduler/arena_pinning.h"
#include "scheduler/factor_run.h"
#include "scheduler/planner.h"
#include "scheduler/substitution.h"

namespace stripesolve::scheduler {

// Which of several devices an elimination runs on (device `index` of `count`), and which
// device each stripe belongs to (`owner`; empty with one device).
struct DeviceShare {
  int index = 0;
  int count = 1;
  std::vector<int> owner;
  bool owns(int64_t stripe) const {
    return count == 1 || owner[static_cast<size_t>(stripe)] == index;
  }
  // Workers w with w mod count == index serve this device, on its lane w / count.
  bool serves(int64_t worker) const { return worker % count == index; }
};

// The RAM bytes of the cells whose J values are kept on a device beside their reserved RAM
// (kOnDevice with an extent), shared by the devices of a solve (they share the RAM cache).
// Thread-safe through `mu`.
struct KeepLedger {
  Mutex mu;
  uint64_t bytes GUARDED_BY(mu) = 0;
  std::vector<uint64_t> of_stripe GUARDED_BY(mu);  // per stripe
};

class GpuElimination final : public Elimination {
 public:
  // Opens the device tier for a factorization of `layout` with `plan` (pool of plan.gpu_memory
  // minus the lanes' workspaces) and pins the RAM cache's arena. `tasks`: the strategy's list
  // (the use counts of stripes and ranges come from it).
  static Result<std::unique_ptr<GpuElimination>> create(EngineContext& ctx,
                                                        backend::DeviceEngine& engine,
                                                        const storage::StripedMatrix& layout,
                                                        const FactorParams& params,
                                                        const Plan& plan, DeviceShare share = {},
                                                        std::shared_ptr<KeepLedger> kept = nullptr);
  ~GpuElimination() override;

  Status eliminate(int64_t i, const cache::CellView& cell, stripe::StripePivots* pivots) override;
  Status update(int worker, const Task& t, const cache::CellView& j,
                const std::vector<cache::CellView>& is,
                const std::vector<stripe::StripePivots>& pivots, cache::UpdatedJ* where) override;
  // A resumed run: the use counts from the tasks it does not skip.
  Status begin(const ResumePlan& plan) override;
  // Stripe i loaded final from the factor object (a resumed run; its cell in RAM, this device's
  // stripe): put on the device, with its column permutation, for the updates here and the
  // adoptions by other devices that read it. The device substitution is then off (the swaps the
  // substitution reads on the device are left by eliminate() only).
  Status load_final(int64_t i, const cache::CellView& cell,
                    const stripe::StripePivots& pivots) override;
  // Another device's eliminated stripe `i` (its cell kStuck, final in RAM once `owner` has
  // copied it back) on this device, for the updates here that read it; once (later calls
  // return at once), and not at all when none do. From the worker `worker` of this device.
  Status adopt(int worker, const cache::CellView& cell, const stripe::StripePivots& pivots,
               GpuElimination& owner);
  // Waits for the copy to RAM of eliminated stripe `stripe` (if one is pending); from any thread.
  Status wait_download(int64_t stripe);
  // For a device adopting eliminated stripe `i` (this device's): its values on this device from
  // column `from` on, and the release once copied (the instance stays until every adopter has
  // copied it).
  Result<const double*> peer_source(int64_t i, int64_t from) const;
  void release_peer_use(int64_t i);
  int device() const { return engine_.device(); }
  const DeviceShare& share() const { return share_; }

  // The largest |U| entry of the stripes eliminated here so far (the pivot growth's numerator,
  // read on the device), and a stripe's; -1 for a stripe eliminated elsewhere or not yet.
  double max_abs_u() const override { return max_abs_u_; }
  double stripe_max_abs_u(int64_t i) const override {
    return stripe_max_abs_u_[static_cast<size_t>(i)];
  }

  // When the pool holds two ranges' U blocks beside a stripe per elim.J lane and a meta-stripe's
  // stripes for elim.I (the working set of two sweeps, the master's gates bound it so).
  bool sweeps_may_overlap() const override { return overlap_; }
  bool keeps_parts_on_device() const override { return true; }
  // The whole matrix on this one device, where RAM bounds nothing (it holds A, or no factors are
  // wanted on the host): one more than the U blocks the pool holds beside the resident set.
  int64_t meta_stripes_ahead() const override { return meta_ahead_; }
  // The whole matrix on this one device and no factors wanted on the host: an eliminated
  // stripe is not copied back to RAM (nor then written to the store).
  bool final_on_device_only() const override {
    return holds_matrix_ && share_.count == 1 && !params_.factors_on_host;
  }

  // Whether every stripe's factor is resident from column 0 (device substitution possible).
  bool factors_resident() const;
  // x (n x nrhs, ld n, host) <- A^-1 x with the resident factors (forward, backward, kRow swaps).
  Status substitute(double* x, int64_t nrhs);
  // x <- A^-T x with the same factors (the transposed passes, upper then lower): the condition
  // estimate's second operator, on the device where the factors are.
  Status substitute_transposed(double* x, int64_t nrhs);
  // Frees every device instance (the factors) once the caller is done with them.
  void release_factors();

  // The copy of A kept on the device for the residual (Plan::device_keeps_original; one device,
  // a budget that holds A twice beside the working set), gpu_residual.cc. keeps_original():
  // room for it was set aside. keep_original(i, host): stripe i of A (h x n from column 0,
  // ld h, in the RAM cache) copied there, once the arena is pinned; from the solve's thread
  // during the load, before the factorization. residual(): r = b - A x and A's norms from the
  // copy, when every stripe is in it (original_complete()); from the solve's thread after the
  // factorization. A copy that fails is given up (a warning), and the store's pass runs.
  bool keeps_original() const { return original_ != nullptr; }
  // The RAM cache's bytes pinned for the devices once begin() has waited for them (device 0's;
  // 0 where pinning failed and the copies are staged).
  uint64_t pinned_bytes() const { return pinned_bytes_; }
  Status keep_original(int64_t i, const double* host);
  // The I/O role's read hook where no load fills the copy (a RAM cache smaller than A): a part
  // of A read from column 0 through n goes to the copy as the factorization first reads it,
  // from the I/O threads (several at once, for different stripes) on a lane of the copy's own.
  // Other parts, parts read before begin() has waited for the arena's pinning, and a failed
  // copy (the residual then reads the store, with a warning) are left out.
  void keep_read(const cache::CellView& cell, const storage::PartLayout& layout);
  bool original_complete() const;
  // Gives the copy's device memory back (after a load that did not fill it: in place, a RAM
  // cache too small for A, a failed copy).
  void release_original();
  void release_original_unless_complete();
  // transposed: the factored object is A^T (--pivot gepp), the copy holds its stripes.
  Result<ResidualResult> residual(const double* b, const double* x, int64_t nrhs, double* r,
                                  bool transposed);

  uint64_t pool_bytes() const { return pool_bytes_; }
  uint64_t peak_bytes() const { return tier_->usage().peak; }
  // The device memory this device's tier allocated: lanes, pivots, pool and the copy of A.
  uint64_t device_bytes() const { return lane_bytes_ + pool_bytes_ + original_bytes_; }

 private:
  GpuElimination(EngineContext& ctx, backend::DeviceEngine& engine,
                 const storage::StripedMatrix& layout, const FactorParams& params, const Plan& plan,
                 DeviceShare share, std::shared_ptr<KeepLedger> kept);
  Status open();
  // Bytes of a stripe's part from column i0_store on; the columns of a U block's inverted
  // diagonal blocks (k rows of U); the U block of stripes [i0, i1) (their rows from the range's
  // first row on, and the inverses).
  static uint64_t part_bytes(const storage::StripeGeometry& g, int64_t stripe, int64_t i0_store);
  static int64_t inverse_columns(const storage::StripeGeometry& g, int64_t k);
  static uint64_t block_bytes(const storage::StripeGeometry& g, int64_t i0, int64_t i1);
  // stripe_uses_, range_uses_ and peer_uses_ from the strategy's tasks but those skipped
  // (skip[k] for task k; empty: none). Before the roles start.
  void count_uses(const std::vector<bool>& skip);
  // The column permutation of final stripe i on this device, from its swaps.
  Status upload_permutation(backend::DeviceLane& lane, int64_t i,
                            const stripe::StripePivots& pivots);
  Status eliminate_on_device(int64_t i, const cache::CellView& cell, stripe::StripePivots* pivots);
  Status update_on_device(int worker, const Task& t, const cache::CellView& j,
                          const std::vector<cache::CellView>& is,
                          const std::vector<stripe::StripePivots>& pivots, cache::UpdatedJ* where);
  backend::DeviceBlock instance_block(const cache::DeviceInstance& inst) const;
  // The passes of substitute() or substitute_transposed() on x, uploaded to the pool and back.
  Status solve_on_device(double* x, int64_t nrhs, bool transposed);
  double* device_at(uint64_t offset) const {
    return reinterpret_cast<double*>(static_cast<char*>(pool_) + offset);
  }
  // The instance of the cell's stripe on the device: the existing one or a new one holding
  // columns [from, n) (at or right of the cell's first column; copied in when copy_in).
  // *created tells which.
  Result<cache::DeviceInstance> instance_for(const cache::CellView& cell, int64_t from,
                                             bool copy_in, backend::DeviceLane& lane,
                                             bool* created);
  // Where the instance's first column lives in the cell's RAM.
  double* host_of(const cache::CellView& cell, const cache::DeviceInstance& inst) const;
  // The first column a J update must put on the device: the update's own, or the first of J's
  // meta-stripe when J is in the range's meta-stripe (its later elimination and the range blocks
  // it joins read from there on). Columns left of it are final in RAM.
  int64_t first_device_column(const Task& t, const cache::CellView& j) const;
  struct RangeU {
    backend::DeviceBlock u;
    backend::DeviceBlock inverse;  // empty for a single stripe (its updates use dtrsm)
  };
  // Frees stripe i's instance, unless it stays to the end (keeps) or other devices still have
  // to copy it (then the last of them frees it).
  void drop_instance(int64_t i);
  // The U of range [t.i_begin, t.i_end): a stripe's instance, or the range's block assembled on
  // first use (with its inverted diagonal blocks).
  Result<RangeU> range_block(backend::DeviceLane& lane, const Task& t);
  backend::ColumnPermutation permutation_of(int64_t i, int64_t first) const;
  // Decides whether J stays on the device after this update (its instance `inst`) and whether
  // its RAM cell goes back meanwhile, and accounts the cells kept beside.
  cache::UpdatedJ keep_j(const Task& t, const cache::CellView& j,
                         const cache::DeviceInstance& inst);
  // Whether stripe i's instance stays on this device to the end (the whole matrix resident,
  // and i this device's own).
  bool keeps(int64_t i) const { return plan_.device_resident && share_.owns(i); }
  backend::DeviceLane& lane_of(int worker) {
    return *lanes_j_[static_cast<size_t>(worker / share_.count)];
  }

  EngineContext& ctx_;
  backend::DeviceEngine& engine_;
  // The factor object: its part layouts are read during the factorization only (the solve may
  // close it afterwards); the geometry is kept by value for the substitution.
  const storage::StripedMatrix& layout_;
  const storage::StripeGeometry geometry_;
  FactorParams params_;
  Plan plan_;
  DeviceShare share_;
  std::vector<int64_t> stripe_uses_;  // update tasks reading each eliminated stripe
  std::vector<std::pair<std::pair<int64_t, int64_t>, int64_t>> range_uses_;  // tasks per range
  std::unique_ptr<cache::DeviceTier> tier_;
  void* pool_ = nullptr;
  uint64_t pool_bytes_ = 0;
  void* lane_memory_ = nullptr;
  uint64_t lane_bytes_ = 0;          // lane_memory_'s: the lanes' workspaces and the pivots
  int32_t* device_raw_ = nullptr;    // n entries: stripe I's raw swaps at row_begin(I)
  int32_t* device_perm_ = nullptr;   // 4n entries: stripe I's pairs at 4 row_begin(I)
  std::vector<int64_t> perm_count_;  // per stripe
  std::unique_ptr<backend::DeviceLane> lane_i_;
  std::vector<std::unique_ptr<backend::DeviceLane>> lanes_j_;
  std::unique_ptr<ArenaPinning> pinning_;  // device 0's: the RAM arena, pinned meanwhile
  uint64_t pinned_bytes_ = 0;              // what pinning_ pinned, set by begin()
  // The copy of A for the residual (stripe i at 8 n row_begin(i) bytes, h x n, ld h), and which
  // stripes it holds. Filled by the load (the solve's thread) or by keep_read (the I/O threads,
  // on lane_copy_, once copies_ready_); original_ is set by open() before any other thread and
  // cleared under original_mu_, read without it by the solve's thread (the only one that
  // clears it).
  mutable Mutex original_mu_;
  void* original_ = nullptr;
  uint64_t original_bytes_ = 0;
  std::vector<bool> original_loaded_ GUARDED_BY(original_mu_);
  std::unique_ptr<backend::DeviceLane> lane_copy_ GUARDED_BY(original_mu_);
  std::atomic<bool> copies_ready_{false};  // set by begin() once the arena is pinned
  bool overlap_ = false;
  int64_t meta_ahead_ = 1;        // meta_stripes_ahead(), set by open()
  bool holds_matrix_ = false;     // the plan keeps the whole matrix here and the pool holds it
  uint64_t block_bound_ = 0;      // the pool's bytes for the largest U block, S^m stripes (open())
  bool loaded_final_ = false;     // some stripe came final from the factor object (load_final)
  std::vector<int64_t> meta_of_;  // meta-stripe index of each stripe
  Mutex downloads_mu_;
  // Per stripe: its copy to RAM not yet waited for.
  std::vector<uint64_t> download_ticket_ GUARDED_BY(downloads_mu_);
  // Per stripe: held while a thread waits for its copy to RAM, so a second waiter returns only
  // once the copy has landed.
  std::unique_ptr<Mutex[]> download_wait_mu_;
  std::shared_ptr<KeepLedger> kept_;
  double max_abs_u_ = 0;                  // written by elim.I only, read after it is joined
  std::vector<double> stripe_max_abs_u_;  // per stripe; written and read by elim.I only
  // Per eliminated stripe: this device's updates by it alone still to finish (the next
  // meta-stripe's first stripes, FactorParams::early_next): its instance outlives the
  // assembly of its range's U block until they have.
  Mutex single_mu_;
  std::vector<int64_t> single_uses_ GUARDED_BY(single_mu_);
  Mutex peer_mu_;
  std::vector<int> peer_uses_ GUARDED_BY(peer_mu_);      // per own stripe: devices yet to adopt it
  std::vector<bool> free_pending_ GUARDED_BY(peer_mu_);  // per own stripe: dropped while peers
                                                         // had to copy it
  Mutex adopt_mu_;                                       // held during an adoption
  std::vector<bool> adopted_ GUARDED_BY(adopt_mu_);
};

}  // namespace stripesolve::scheduler
