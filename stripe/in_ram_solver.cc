#include "stripe/in_ram_solver.h"

#include <cstdlib>
#include <memory>

#include <fmt/format.h>

namespace stripesolve::stripe {
StripePart InRamSolver::part(int64_t stripe) const {
  // Substitution only reads the part; elimination runs before the solver is handed out.
  auto& data = const_cast<std::vector<double>&>(data_[stripe]);
  return {data.data(), stripes_.begin(stripe), stripes_.size(stripe), 0, n_};
}

Result<InRamSolver> InRamSolver::factor(backend::Backend& backend, const double* a, int64_t lda,
                                        int64_t n, const InRamOptions& options) {
  if (n < 1 || lda < n || options.stripe_rows < 1 || options.substripe_rows < 1) {
    return Status::invalid_argument(
        fmt::format("in-RAM factor: bad sizes n={} lda={} stripe_rows={} substripe_rows={}", n, lda,
                    options.stripe_rows, options.substripe_rows));
  }
  InRamSolver solver;
  solver.n_ = n;
  solver.stripes_ = EvenPartition::with_max_part(n, options.stripe_rows);
  const int64_t count = solver.stripes_.count;
  solver.data_.resize(static_cast<size_t>(count));
  solver.pivots_.resize(static_cast<size_t>(count));
  for (int64_t I = 0; I < count; ++I) {
    const int64_t r0 = solver.stripes_.begin(I);
    const int64_t h = solver.stripes_.size(I);
    auto& d = solver.data_[I];
    d.resize(static_cast<size_t>(h * n));
    for (int64_t c = 0; c < n; ++c) {
      for (int64_t r = 0; r < h; ++r) d[r + c * h] = a[(r0 + r) + c * lda];
    }
  }
  // One workspace for every op, sized for the largest part each will see.
  backend::WorkspaceSize need;
  for (int64_t I = 0; I < count; ++I) {
    need = larger(need, eliminate_workspace_size(backend, solver.part(I), options.pivot,
                                                 options.substripe_rows));
    if (I > 0)
      need = larger(need, update_workspace_size(backend, solver.part(I - 1), solver.part(I)));
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(HostWorkspace workspace,
                               HostWorkspace::allocate(need, "in-RAM factor"));
  // 002 Fig 5: sequential order.
  for (int64_t I = 0; I < count; ++I) {
    StripePart pi = solver.part(I);
    STRIPESOLVE_RETURN_IF_ERROR(eliminate_stripe(backend, pi, options.pivot, options.substripe_rows,
                                                 workspace.view(), &solver.pivots_[I]));
    for (int64_t J = I + 1; J < count; ++J) {
      STRIPESOLVE_RETURN_IF_ERROR(
          update_stripe(backend, pi, solver.pivots_[I], solver.part(J), workspace.view()));
    }
  }
  return solver;
}

Status InRamSolver::solve(backend::Backend& backend, double* b, int64_t ldb, int64_t nrhs) const {
  if (nrhs < 0 || ldb < n_ || (nrhs > 0 && b == nullptr)) {
    return Status::invalid_argument(
        fmt::format("in-RAM solve: bad right-hand side ldb={} nrhs={} for n={}", ldb, nrhs, n_));
  }
  const int64_t count = stripes_.count;
  backend::WorkspaceSize need;
  for (int64_t I = 0; I < count; ++I)
    need = larger(need, substitution_workspace_size(backend, part(I), nrhs));
  STRIPESOLVE_ASSIGN_OR_RETURN(HostWorkspace workspace,
                               HostWorkspace::allocate(need, "in-RAM solve"));
  for (int64_t I = 0; I < count; ++I) {
    STRIPESOLVE_RETURN_IF_ERROR(
        forward_substitute_stripe(backend, part(I), pivots_[I], b, ldb, nrhs, workspace.view()));
  }
  for (int64_t I = count - 1; I >= 0; --I) {
    STRIPESOLVE_RETURN_IF_ERROR(
        backward_substitute_stripe(backend, part(I), b, ldb, nrhs, workspace.view()));
    apply_solution_swaps(pivots_[I], b, ldb, nrhs);
  }
  return Status::ok();
}

}  // namespace stripesolve::stripe
