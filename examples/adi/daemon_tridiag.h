// Solves a batch of tridiagonal systems through a running stripesolved: one tridiag_solve job
// per batch (docs/protocol.md "Tridiagonal batches"), on one connection.
//
// The four arrays travel as .npy images in anonymous files (memfd) whose descriptors go with the
// submit, and the daemon writes the solution into a fifth one (the `out` field): nothing touches
// the disk and the daemon never sees a path (docs/security.md). The job runs with wait, so a
// call returns when the solution is there.
//
// Threading: one thread (the connection is not shared).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "client/connection.h"
#include "examples/adi/adi.h"

namespace stripesolve::examples::adi {

struct BatchSolution {
  std::vector<double> x;      // the batch's layout, like rhs
  double daemon_seconds = 0;  // the solve as the daemon reports it ("seconds")
  double max_relative_residual = 0;
  std::string device, algorithm;  // what the daemon used
};

class DaemonTridiag {
 public:
  // `device`: auto, cpu or gpu; `algorithm`: as tridiag_solve takes it (unstable_ok is set: the
  // ADI systems are diagonally dominant, so auto may pick thomas).
  static Result<std::unique_ptr<DaemonTridiag>> connect(const std::string& socket_path,
                                                        std::string device, std::string algorithm);
  Result<BatchSolution> solve(const TridiagBatch& batch);
  const nlohmann::json& welcome() const { return conn_->welcome(); }

 private:
  DaemonTridiag(std::unique_ptr<client::Connection> conn, std::string device, std::string algorithm)
      : conn_(std::move(conn)), device_(std::move(device)), algorithm_(std::move(algorithm)) {}
  std::unique_ptr<client::Connection> conn_;
  std::string device_, algorithm_;
};

}  // namespace stripesolve::examples::adi
