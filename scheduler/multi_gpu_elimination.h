// The GPU tier on every device of a dense solve (002 §8.2: one elim.I and k elim.J per device):
// one GpuElimination per device, stripe j belonging to device j mod D (DeviceShare::owner), so
// every sweep is shared evenly. (Dealing whole meta-stripes instead keeps the steps inside a
// meta-stripe on one device but leaves the last sweeps to one device: 1.18x one H200 against
// 1.28x for stripes, with adoptions through RAM.) elim.I
// eliminates each stripe on its device; the elim.J workers are dealt to the devices (worker w
// serves device w mod D, the first D are the look-ahead workers, one per device) and take only
// the updates of their device's J stripes (Elimination::accepts). Before an update reads an
// eliminated stripe of another device, the updating device adopts it (GpuElimination::adopt:
// copied from the owner's instance, peer to peer over NVLink where the devices have it; the
// owner keeps the instance until every adopter has copied it).
//
// With one device this is the single-GPU tier unchanged. With several, the device substitution
// (factors resident on one device) is off: the CPU substitution runs, reading the factors from
// RAM or the store.
//
// Thread-safety: as Elimination: eliminate() from the elim.I thread, update(w, ...) from worker w.
#pragma once

#include <memory>
#include <vector>

#include "scheduler/gpu_elimination.h"

namespace stripesolve::scheduler {

class MultiGpuElimination final : public Elimination {
 public:
  // One GpuElimination per engine (engines[d] is the solve's device d, whatever its CUDA ordinal:
  // engine.devices may name them in any order), each with `plan`'s per-device budget.
  static Result<std::unique_ptr<MultiGpuElimination>> create(
      EngineContext& ctx, const std::vector<backend::DeviceEngine*>& engines,
      const storage::StripedMatrix& layout, const FactorParams& params, const Plan& plan);
  ~MultiGpuElimination() override;

  Status eliminate(int64_t i, const cache::CellView& cell, stripe::StripePivots* pivots) override;
  Status update(int worker, const Task& t, const cache::CellView& j,
                const std::vector<cache::CellView>& is,
                const std::vector<stripe::StripePivots>& pivots, cache::UpdatedJ* where) override;
  Status begin(const ResumePlan& plan) override;
  Status load_final(int64_t i, const cache::CellView& cell,
                    const stripe::StripePivots& pivots) override;
  bool sweeps_may_overlap() const override;
  bool keeps_parts_on_device() const override;
  bool final_on_device_only() const override {
    return devices_.size() == 1 && devices_[0]->final_on_device_only();
  }
  // One device's lead (GpuElimination's: the whole matrix there); one meta-stripe on several.
  int64_t meta_stripes_ahead() const override {
    return devices_.size() == 1 ? devices_[0]->meta_stripes_ahead() : 1;
  }
  bool accepts(int64_t worker, const Task& t) const override;

  // The largest |U| entry over the devices' eliminations, and stripe i's from its device.
  double max_abs_u() const override;
  double stripe_max_abs_u(int64_t i) const override {
    return devices_[static_cast<size_t>(device_of(i))]->stripe_max_abs_u(i);
  }

  // Device substitution (one device, factors resident there).
  bool factors_resident() const;
  Status substitute(double* x, int64_t nrhs);
  Status substitute_transposed(double* x, int64_t nrhs);
  void release_factors();
  int devices() const { return static_cast<int>(devices_.size()); }
  uint64_t pinned_bytes() const { return devices_[0]->pinned_bytes(); }  // device 0 pins
  uint64_t device_bytes(int d) const { return devices_[static_cast<size_t>(d)]->device_bytes(); }

  // The copy of A for the residual on the device (one device; GpuElimination's of that name).
  bool keeps_original() const { return devices_.size() == 1 && devices_[0]->keeps_original(); }
  Status keep_original(int64_t i, const double* host) {
    return devices_[0]->keep_original(i, host);
  }
  void keep_read(const cache::CellView& cell, const storage::PartLayout& layout) {
    devices_[0]->keep_read(cell, layout);
  }
  bool original_complete() const {
    return devices_.size() == 1 && devices_[0]->original_complete();
  }
  void release_original_unless_complete() {
    if (devices_.size() == 1) devices_[0]->release_original_unless_complete();
  }
  Result<ResidualResult> residual(const double* b, const double* x, int64_t nrhs, double* r,
                                  bool transposed) {
    return devices_[0]->residual(b, x, nrhs, r, transposed);
  }

 private:
  MultiGpuElimination() = default;
  int device_of(int64_t stripe) const { return owner_[static_cast<size_t>(stripe)]; }
  GpuElimination& owner_of(int64_t stripe) {
    return *devices_[static_cast<size_t>(device_of(stripe))];
  }

  // Device d's; destroyed last to first, so device 0 (which pinned the RAM arena) goes last.
  std::vector<std::unique_ptr<GpuElimination>> devices_;
  std::vector<int> owner_;  // per stripe: its device
};

}  // namespace stripesolve::scheduler
