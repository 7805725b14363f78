#include "examples/adi/daemon_tridiag.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "client/commands.h"
#include "protocol/npy.h"

namespace stripesolve::examples::adi {
namespace {

Status write_all(int fd, const char* data, size_t size, const char* what) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::from_errno(errno, fmt::format("write {}", what));
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

// An anonymous file holding `values` as a float64 .npy of `shape`.
Result<UniqueFd> npy_memfd(const char* name, const std::vector<int64_t>& shape,
                           const std::vector<double>& values) {
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC));
  if (!fd.valid()) return Status::from_errno(errno, fmt::format("memfd_create for {}", name));
  std::string image = protocol::make_npy_header(shape, false);
  image.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
  STRIPESOLVE_RETURN_IF_ERROR(write_all(fd.get(), image.data(), image.size(), name));
  return fd;
}

// The float64 values of the .npy the daemon wrote into `fd`.
Result<std::vector<double>> read_npy_memfd(int fd, size_t expected) {
  std::string image;
  char buf[1 << 16];
  for (off_t off = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::from_errno(errno, "read the solution");
    if (n == 0) break;
    image.append(buf, static_cast<size_t>(n));
    off += n;
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(protocol::NpyHeader header, protocol::inspect_npy(image));
  if (static_cast<size_t>(header.elements()) != expected) {
    return Status::internal(
        fmt::format("the solution has {} values, expected {}", header.elements(), expected));
  }
  return protocol::npy_float_values(image, header);
}

}  // namespace

Result<std::unique_ptr<DaemonTridiag>> DaemonTridiag::connect(const std::string& socket_path,
                                                              std::string device,
                                                              std::string algorithm) {
  STRIPESOLVE_ASSIGN_OR_RETURN(std::optional<uid_t> daemon_uid,
                               client::daemon_uid_from_environment());
  STRIPESOLVE_ASSIGN_OR_RETURN(
      std::unique_ptr<client::Connection> conn,
      client::Connection::connect(socket_path, "stripesolve-adi", daemon_uid));
  return std::unique_ptr<DaemonTridiag>(
      new DaemonTridiag(std::move(conn), std::move(device), std::move(algorithm)));
}

Result<BatchSolution> DaemonTridiag::solve(const TridiagBatch& b) {
  // strided: (systems, n); interleaved: (n, systems).
  const std::vector<int64_t> shape =
      b.interleaved ? std::vector<int64_t>{b.n, b.systems} : std::vector<int64_t>{b.systems, b.n};
  client::JobRequest req;
  req.job = {{"type", "tridiag_solve"},
             {"layout", b.interleaved ? "interleaved" : "strided"},
             {"algorithm", algorithm_},
             {"unstable_ok", true},
             {"device", device_}};
  const std::pair<const char*, const std::vector<double>*> arrays[] = {
      {"dl", &b.dl}, {"d", &b.d}, {"du", &b.du}, {"rhs", &b.rhs}};
  for (const auto& [name, values] : arrays) {
    STRIPESOLVE_ASSIGN_OR_RETURN(UniqueFd fd, npy_memfd(name, shape, *values));
    req.job[name] = req.pass(std::move(fd));
  }
  UniqueFd out(::memfd_create("x", MFD_CLOEXEC));
  if (!out.valid()) return Status::from_errno(errno, "memfd_create for the solution");
  const int out_fd = out.get();
  // The daemon gets its own descriptor of the same file; ours stays open to read it back.
  UniqueFd out_for_daemon(::dup(out_fd));
  if (!out_for_daemon.valid()) return Status::from_errno(errno, "dup the solution's descriptor");
  req.job["out"] = req.pass(std::move(out_for_daemon));

  STRIPESOLVE_ASSIGN_OR_RETURN(nlohmann::json job, client::wait_request(*conn_, req));
  const std::string state = job.value("state", std::string());
  if (state != "COMPLETED" && state != "COMPLETED_WITH_WARNING") {
    const auto& err = job.value("error", nlohmann::json::object());
    return Status::internal(fmt::format("tridiag_solve job {}: {} ({}: {})", job.value("id", 0),
                                        state, err.value("code", std::string("?")),
                                        err.value("message", std::string())));
  }
  const nlohmann::json& r = job.at("result");
  BatchSolution s;
  STRIPESOLVE_ASSIGN_OR_RETURN(s.x, read_npy_memfd(out_fd, b.rhs.size()));
  s.daemon_seconds = r.value("seconds", 0.0);
  s.max_relative_residual = r.value("max_relative_residual", 0.0);
  s.device = r.value("device", std::string());
  s.algorithm = r.value("algorithm", std::string());
  return s;
}

}  // namespace stripesolve::examples::adi
