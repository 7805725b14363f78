#include "scheduler/factor_blobs.h"

#include <cstring>
#include <span>
#include <string_view>
#include <utility>

namespace stripesolve::scheduler {

namespace {

constexpr std::string_view kPivotsBlob = "pivots";
constexpr std::string_view kMaxAbsUBlob = "max_abs_u";

void put_u64(std::vector<std::byte>& out, uint64_t v) {
  for (int k = 0; k < 8; ++k) out.push_back(static_cast<std::byte>((v >> (8 * k)) & 0xff));
}

uint64_t get_u64(std::span<const std::byte> in, size_t pos) {
  uint64_t v = 0;
  for (int k = 0; k < 8; ++k) v |= static_cast<uint64_t>(in[pos + k]) << (8 * k);
  return v;
}

std::vector<std::byte> serialize_all(const std::vector<stripe::StripePivots>& pivots) {
  std::vector<std::byte> out;
  put_u64(out, pivots.size());
  for (const auto& p : pivots) {
    const auto bytes = stripe::serialize_pivots(p);
    put_u64(out, bytes.size());
    out.insert(out.end(), bytes.begin(), bytes.end());
  }
  return out;
}

Result<std::vector<stripe::StripePivots>> parse_all(std::span<const std::byte> in, int64_t stripes,
                                                    const std::string& name) {
  auto bad = [&](const std::string& what) {
    return Status::corruption("factor '" + name + "': pivots blob " + what);
  };
  if (in.size() < 8) return bad("is truncated");
  const uint64_t count = get_u64(in, 0);
  if (count != static_cast<uint64_t>(stripes)) {
    return bad("holds " + std::to_string(count) + " stripes, the factor has " +
               std::to_string(stripes));
  }
  std::vector<stripe::StripePivots> out;
  size_t pos = 8;
  for (uint64_t i = 0; i < count; ++i) {
    if (pos + 8 > in.size()) return bad("is truncated");
    const uint64_t len = get_u64(in, pos);
    pos += 8;
    if (len > in.size() - pos) return bad("is truncated");
    STRIPESOLVE_ASSIGN_OR_RETURN(auto p, stripe::parse_pivots(in.subspan(pos, len)));
    out.push_back(std::move(p));
    pos += len;
  }
  return out;
}

}  // namespace

Status write_pivots(storage::StripedMatrix& factor,
                    const std::vector<stripe::StripePivots>& pivots) {
  return factor.write_blob(kPivotsBlob, serialize_all(pivots));
}

Result<std::vector<stripe::StripePivots>> read_pivots(const storage::StripedMatrix& factor,
                                                      int64_t stripes, const std::string& name) {
  STRIPESOLVE_ASSIGN_OR_RETURN(auto blob, factor.read_blob(kPivotsBlob));
  return parse_all(blob, stripes, name);
}

Status write_max_abs_u(storage::StripedMatrix& factor, double max_abs_u) {
  if (max_abs_u < 0) return Status::ok();
  std::vector<std::byte> bytes(8);
  std::memcpy(bytes.data(), &max_abs_u, 8);
  return factor.write_blob(kMaxAbsUBlob, bytes);
}

double read_max_abs_u(const storage::StripedMatrix& factor) {
  double max_abs_u = -1;
  if (auto bytes = factor.read_blob(kMaxAbsUBlob); bytes.is_ok() && bytes->size() == 8) {
    std::memcpy(&max_abs_u, bytes->data(), 8);
  }
  return max_abs_u;
}

}  // namespace stripesolve::scheduler
