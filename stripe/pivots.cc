// Serialisation of StripePivots (stripe_ops.h): the blob stored beside a factor's stripe.
#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "stripe/stripe_ops.h"

namespace stripesolve::stripe {
namespace {

static_assert(std::endian::native == std::endian::little, "pivot records are little-endian");

constexpr uint32_t kMagic = 0x31565053;  // "SPV1"
constexpr size_t kHeaderBytes = 24;

template <typename T>
void put(std::vector<std::byte>& out, size_t offset, T value) {
  std::memcpy(out.data() + offset, &value, sizeof(T));
}

template <typename T>
T get(std::span<const std::byte> bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

}  // namespace

std::vector<std::byte> serialize_pivots(const StripePivots& pivots) {
  std::vector<std::byte> out(kHeaderBytes + 8 * pivots.swaps.size());
  put<uint32_t>(out, 0, kMagic);
  put<uint32_t>(out, 4, static_cast<uint32_t>(pivots.mode));
  put<int64_t>(out, 8, pivots.row_begin);
  put<int64_t>(out, 16, static_cast<int64_t>(pivots.swaps.size()));
  for (size_t k = 0; k < pivots.swaps.size(); ++k)
    put<int64_t>(out, kHeaderBytes + 8 * k, pivots.swaps[k]);
  return out;
}

Result<StripePivots> parse_pivots(std::span<const std::byte> bytes) {
  if (bytes.size() < kHeaderBytes) {
    return Status::corruption(fmt::format(
        "pivot record of {} bytes is shorter than its {}-byte header", bytes.size(), kHeaderBytes));
  }
  if (get<uint32_t>(bytes, 0) != kMagic) return Status::corruption("pivot record: bad magic");
  const auto mode = get<uint32_t>(bytes, 4);
  if (mode > static_cast<uint32_t>(PivotMode::kNone)) {
    return Status::corruption(fmt::format("pivot record: unknown pivot mode {}", mode));
  }
  StripePivots pivots;
  pivots.mode = static_cast<PivotMode>(mode);
  pivots.row_begin = get<int64_t>(bytes, 8);
  const auto count = get<int64_t>(bytes, 16);
  if (pivots.row_begin < 0 || count < 0 ||
      static_cast<uint64_t>(count) != (bytes.size() - kHeaderBytes) / 8 ||
      (bytes.size() - kHeaderBytes) % 8 != 0) {
    return Status::corruption(
        fmt::format("pivot record: row_begin {} and count {} do not match its {} bytes",
                    pivots.row_begin, count, bytes.size()));
  }
  pivots.swaps.resize(static_cast<size_t>(count));
  for (int64_t k = 0; k < count; ++k) {
    const auto s = get<int64_t>(bytes, kHeaderBytes + 8 * static_cast<size_t>(k));
    if (s < pivots.row_begin + k) {
      return Status::corruption(
          fmt::format("pivot record: swap {} of row {} points backwards", s, pivots.row_begin + k));
    }
    pivots.swaps[static_cast<size_t>(k)] = s;
  }
  return pivots;
}

}  // namespace stripesolve::stripe
