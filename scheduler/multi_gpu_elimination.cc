#include "scheduler/multi_gpu_elimination.h"

#include <algorithm>

namespace stripesolve::scheduler {

Result<std::unique_ptr<MultiGpuElimination>> MultiGpuElimination::create(
    EngineContext& ctx, const std::vector<backend::DeviceEngine*>& engines,
    const storage::StripedMatrix& layout, const FactorParams& params, const Plan& plan) {
  if (engines.empty()) return Status::invalid_argument("GPU tier: no device");
  std::unique_ptr<MultiGpuElimination> m(new MultiGpuElimination());
  const int count = static_cast<int>(engines.size());
  for (int64_t j = 0; j < layout.geometry().stripes; ++j)
    m->owner_.push_back(static_cast<int>(j % count));
  for (int d = 0; d < count; ++d) {
    for (int e = 0; e < count; ++e) {
      if (e != d)
        STRIPESOLVE_RETURN_IF_ERROR(engines[static_cast<size_t>(d)]->enable_peer_access(
            engines[static_cast<size_t>(e)]->device()));
    }
  }
  auto kept = std::make_shared<KeepLedger>();  // one RAM cache for all devices
  for (int d = 0; d < count; ++d) {
    DeviceShare share{d, count, count > 1 ? m->owner_ : std::vector<int>{}};
    STRIPESOLVE_ASSIGN_OR_RETURN(
        auto e, GpuElimination::create(ctx, *engines[static_cast<size_t>(d)], layout, params, plan,
                                       std::move(share), kept));
    m->devices_.push_back(std::move(e));
  }
  return m;
}

MultiGpuElimination::~MultiGpuElimination() {
  while (!devices_.empty()) devices_.pop_back();
}

Status MultiGpuElimination::eliminate(int64_t i, const cache::CellView& cell,
                                      stripe::StripePivots* pivots) {
  return owner_of(i).eliminate(i, cell, pivots);
}

double MultiGpuElimination::max_abs_u() const {
  double most = 0;
  for (const auto& d : devices_) most = std::max(most, d->max_abs_u());
  return most;
}

Status MultiGpuElimination::update(int worker, const Task& t, const cache::CellView& j,
                                   const std::vector<cache::CellView>& is,
                                   const std::vector<stripe::StripePivots>& pivots,
                                   cache::UpdatedJ* where) {
  GpuElimination& here = owner_of(t.stripe);
  for (const cache::CellView& ci : is) {
    GpuElimination& owner = owner_of(ci.stripe);
    if (&owner == &here) continue;
    STRIPESOLVE_RETURN_IF_ERROR(
        here.adopt(worker, ci, pivots[static_cast<size_t>(ci.stripe)], owner));
  }
  return here.update(worker, t, j, is, pivots, where);
}

Status MultiGpuElimination::begin(const ResumePlan& plan) {
  for (auto& d : devices_) STRIPESOLVE_RETURN_IF_ERROR(d->begin(plan));
  return Status::ok();
}

Status MultiGpuElimination::load_final(int64_t i, const cache::CellView& cell,
                                       const stripe::StripePivots& pivots) {
  return owner_of(i).load_final(i, cell, pivots);  // the others adopt it from there
}

bool MultiGpuElimination::sweeps_may_overlap() const {
  for (const auto& d : devices_) {
    if (!d->sweeps_may_overlap()) return false;
  }
  return true;
}

bool MultiGpuElimination::keeps_parts_on_device() const {
  for (const auto& d : devices_) {
    if (d->keeps_parts_on_device()) return true;
  }
  return false;
}

bool MultiGpuElimination::accepts(int64_t worker, const Task& t) const {
  return devices_.size() == 1 || worker % devices() == device_of(t.stripe);
}

bool MultiGpuElimination::factors_resident() const {
  return devices_.size() == 1 && devices_[0]->factors_resident();
}

Status MultiGpuElimination::substitute(double* x, int64_t nrhs) {
  return devices_[0]->substitute(x, nrhs);
}

Status MultiGpuElimination::substitute_transposed(double* x, int64_t nrhs) {
  return devices_[0]->substitute_transposed(x, nrhs);
}

void MultiGpuElimination::release_factors() {
  for (auto& d : devices_) d->release_factors();
}

}  // namespace stripesolve::scheduler
