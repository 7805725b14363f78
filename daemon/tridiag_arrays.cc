// The arrays of a tridiagonal job (tridiag_arrays.h).
#include "daemon/tridiag_arrays.h"

#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "protocol/npy.h"

namespace stripesolve::daemon {

// A passed little-endian float64 file in C order is mapped and used where it lies; anything else
// (float32, big-endian, Fortran order, an odd data offset, an upload, no mapping slot left) is
// converted into an array of the daemon's own.
Result<TridiagArray> load_array(TridiagSource& source, std::size_t count) {
  const protocol::NpyHeader& h = source.header;
  if (source.fd >= 0 && h.dtype == protocol::NpyDtype::kFloat64 && !h.big_endian &&
      (!h.fortran_order || h.shape.size() == 1) && h.data_offset % alignof(double) == 0) {
    auto mapping = ClientMapping::map(source.fd, h.data_offset + 8 * count, /*writable=*/false);
    if (mapping.is_ok()) {
      TridiagArray a;
      a.mapping = std::move(mapping).value();
      a.values = reinterpret_cast<double*>(a.mapping.data() + h.data_offset);
      a.size = count;
      return a;
    }
  }
  TridiagArray a = TridiagArray::own(count);
  if (source.fd >= 0) {
    STRIPESOLVE_RETURN_IF_ERROR(read_npy_floats(source.fd, h, a.data()));
    return a;
  }
  STRIPESOLVE_ASSIGN_OR_RETURN(std::vector<double> values,
                               protocol::npy_float_values(source.bytes, h));
  std::string().swap(source.bytes);
  std::copy(values.begin(), values.end(), a.data());
  return a;
}

Result<TridiagSolution> solution_array(int out_fd, const TridiagPlan& plan) {
  TridiagSolution s;
  if (out_fd >= 0) {
    auto out = NpyOutput::begin(out_fd, plan.array_shape);
    if (!out.is_ok()) return out.status().with_context("out");
    s.out = *out;
    auto mapping = ClientMapping::map(out_fd, out->file_bytes(), /*writable=*/true);
    if (mapping.is_ok()) {
      s.x.mapping = std::move(mapping).value();
      s.x.values = reinterpret_cast<double*>(s.x.mapping.data() + out->data_offset());
      s.x.size = plan.unknowns;
      return s;
    }
  }
  s.x = TridiagArray::own(plan.unknowns);
  return s;
}

// A client that truncated one of its files while the job ran gets an error, not what the
// daemon read or wrote past the new end.
Status check_not_truncated(const std::array<TridiagArray, 4>& a, const TridiagArray& x) {
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (a[k].truncated()) {
      return Status::invalid_argument(
          fmt::format("{}: the file was truncated while the daemon read it", kTridiagArrays[k]));
    }
  }
  if (x.truncated()) {
    return Status::invalid_argument("out: the file was truncated while the daemon wrote it");
  }
  return Status::ok();
}

}  // namespace stripesolve::daemon
