#include "client/preflight.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "client/local_files.h"

namespace stripesolve::client {

using protocol::format_shape;

Result<protocol::NpyHeader> read_npy_header(const std::string& path, std::string_view option) {
  STRIPESOLVE_ASSIGN_OR_RETURN(UniqueFd fd, open_input(path, option));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return Status::from_errno(errno, fmt::format("{} file '{}'", option, path));
  std::string prefix(static_cast<size_t>(std::min<off_t>(st.st_size, 64 * 1024)), '\0');
  const ssize_t got = ::pread(fd.get(), prefix.data(), prefix.size(), 0);
  if (got < 0)
    return Status::from_errno(errno, fmt::format("cannot read {} file '{}'", option, path));
  prefix.resize(static_cast<size_t>(got));
  auto header = protocol::inspect_npy_header(prefix, static_cast<uint64_t>(st.st_size));
  if (!header.is_ok()) {
    return Status(header.status().code(),
                  fmt::format("{} file '{}': {}", option, path, header.status().message()));
  }
  return header;
}

Status check_tridiag_files(const TridiagRequest& r) {
  const std::pair<const char*, const std::string*> arrays[] = {
      {"--dl", &r.dl_path}, {"--d", &r.d_path}, {"--du", &r.du_path}, {"--rhs", &r.rhs_path}};
  std::vector<int64_t> shape;
  const char* first = nullptr;
  for (const auto& [option, path] : arrays) {
    STRIPESOLVE_ASSIGN_OR_RETURN(protocol::NpyHeader h, read_npy_header(*path, option));
    if (!protocol::is_float(h.dtype)) {
      return Status::invalid_argument(
          fmt::format("{} '{}' holds {}: the arrays must be float64 or float32", option, *path,
                      protocol::npy_dtype_name(h.dtype)));
    }
    if (first == nullptr) {
      first = option;
      shape = h.shape;
    } else if (h.shape != shape) {
      return Status::invalid_argument(
          fmt::format("{} has shape {} but {} has {}: the four arrays must have one shape", option,
                      format_shape(h.shape), first, format_shape(shape)));
    }
  }
  if (!r.sizes.empty() && !shape.empty()) {
    auto list = parse_sizes_list(r.sizes);
    if (list.is_ok()) {  // a list (a file of sizes is the daemon's to check)
      const int64_t total = std::accumulate(list->begin(), list->end(), int64_t{0});
      if (shape.size() != 1 || shape[0] != total) {
        return Status::invalid_argument(
            fmt::format("--sizes adds up to {} rows, but the arrays have shape {}: a ragged batch "
                        "takes 1-D arrays of ({},)",
                        total, format_shape(shape), total));
      }
    }
  }
  return Status::ok();
}

Status check_solve(Connection& c, const SolveRequest& r) {
  STRIPESOLVE_ASSIGN_OR_RETURN(nlohmann::json info, show_matrix(c, r.matrix));
  const int64_t n = info.value("n", int64_t{0});
  if (r.rhs_path.empty() || n <= 0) return Status::ok();
  STRIPESOLVE_ASSIGN_OR_RETURN(protocol::NpyHeader h, read_npy_header(r.rhs_path, "--rhs"));
  if (!protocol::is_float(h.dtype)) {
    return Status::invalid_argument(
        fmt::format("--rhs '{}' holds {}: right-hand sides are float64 or float32", r.rhs_path,
                    protocol::npy_dtype_name(h.dtype)));
  }
  if (h.rows() != n) {
    return Status::invalid_argument(
        fmt::format("--rhs '{}' has shape {} but matrix '{}' has order {}: right-hand sides are "
                    "({},) or ({}, k)",
                    r.rhs_path, format_shape(h.shape), r.matrix, n, n, n));
  }
  return Status::ok();
}

Status check_import_file(const std::string& path) {
  STRIPESOLVE_ASSIGN_OR_RETURN(protocol::NpyHeader h, read_npy_header(path, "matrix"));
  if (!protocol::is_float(h.dtype)) {
    return Status::invalid_argument(
        fmt::format("matrix file '{}' holds {}: a matrix is float64 or float32", path,
                    protocol::npy_dtype_name(h.dtype)));
  }
  if (h.shape.size() != 2 || h.shape[0] != h.shape[1]) {
    return Status::invalid_argument(
        fmt::format("matrix file '{}' has shape {}: a matrix is a square array (n, n)", path,
                    format_shape(h.shape)));
  }
  return Status::ok();
}

Status check_gpu_requested(Connection& c, std::string_view device) {
  if (device != "gpu") return Status::ok();
  STRIPESOLVE_ASSIGN_OR_RETURN(nlohmann::json status,
                               c.call(protocol::MessageType::kDaemonStatus, {}));
  if (status.value("devices", nlohmann::json::array()).empty()) {
    return Status::failed_precondition(
        "--device gpu: the daemon has no GPU ('stripesolve daemon status' lists its devices); use "
        "--device "
        "auto or cpu");
  }
  return Status::ok();
}

}  // namespace stripesolve::client
