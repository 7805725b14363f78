// The CPU backend: OpenBLAS (cblas) + LAPACKE, always built; the reference for every other backend.
//
// Operations run synchronously in the calling thread (OpenBLAS may fan each call out over its own
// thread pool). Mapping (002 §6 used CUBLAS the same way):
//   PanelFactor  kRow:   the panel is transposed into the workspace and factored by dgetrf
//                        (GEPP on the transposed panel = column interchanges on the panel), then
//                        written back with the diagonal moved from L to U (Doolittle form) and
//                        the column swaps applied to the part's other rows.
//                kLocal: dgetrf on the panel's diagonal block in place (row search inside the
//                        substripe, 002 §5), its swaps and a dtrsm carried over the panel's right
//                        part, dlaswp on the substripe's earlier multipliers (002 Fig 11).
//                kNone:  unblocked LU of the panel's diagonal block, dtrsm for its right part.
//   BlockUpdate  dtrsm (multipliers) + dgemm (trailing update).
//   Substitution dgemm + dtrsm per stripe.
// Workspace: PanelFactor kRow needs 8 * panel_rows * (cols - dc + 1) host bytes, kLocal
// 8 * panel_rows; nothing else needs any.
//
// Threading: stateless. Calls from several threads at once are safe when their outputs are
// disjoint (OpenBLAS >= 0.3.7 built with pthreads, Debian 12 ships 0.3.21, serialises its own
// buffer management for concurrent callers).
#pragma once

#include <memory>

#include "backend/backend.h"

namespace stripesolve::backend {

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }

  Status can_implement(const PanelFactor& op) const override;
  WorkspaceSize workspace_size(const PanelFactor& op) const override;
  Status run(const PanelFactor& op, const Workspace& workspace) override;

  Status can_implement(const BlockUpdate& op) const override;
  WorkspaceSize workspace_size(const BlockUpdate& op) const override;
  Status run(const BlockUpdate& op, const Workspace& workspace) override;

  Status can_implement(const LowerSubstitution& op) const override;
  WorkspaceSize workspace_size(const LowerSubstitution& op) const override;
  Status run(const LowerSubstitution& op, const Workspace& workspace) override;

  Status can_implement(const UpperSubstitution& op) const override;
  WorkspaceSize workspace_size(const UpperSubstitution& op) const override;
  Status run(const UpperSubstitution& op, const Workspace& workspace) override;
};

std::unique_ptr<Backend> make_cpu_backend();

// OpenBLAS's threads per call, for a scope: the CPU tier's factorization runs its k elim.J
// workers' GEMMs (and elim.I's panels) on cores / k threads each. Left at OpenBLAS's default (all
// cores per call, as the daemon did), 16 workers on 16 cores factored 27% slower (n = 16384,
// 268 against 367 GFLOP/s): the pool serves one caller at a time. The setting is the process's:
// the scope restores what it found, and solves that overlap in one process may see each other's
// (only their speed depends on it).
class BlasThreadsScope {
 public:
  explicit BlasThreadsScope(int threads);
  ~BlasThreadsScope();
  BlasThreadsScope(const BlasThreadsScope&) = delete;
  BlasThreadsScope& operator=(const BlasThreadsScope&) = delete;

 private:
  int before_;
};
// OpenBLAS's current threads per call.
int blas_threads();

}  // namespace stripesolve::backend
