// Byte sizes as users write them ("64GiB", "512 MiB", "4096") and as logs print them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace stripesolve {

inline constexpr uint64_t kKiB = 1024;
inline constexpr uint64_t kMiB = 1024 * kKiB;
inline constexpr uint64_t kGiB = 1024 * kMiB;
inline constexpr uint64_t kTiB = 1024 * kGiB;

// Parses a non-negative integer with an optional unit: B, KiB, MiB, GiB, TiB (powers of 1024) or
// kB, MB, GB, TB (powers of 1000); case-insensitive, spaces allowed before the unit, a fractional
// number is accepted with a unit ("1.5GiB"). Returns nullopt on anything else or on overflow.
std::optional<uint64_t> parse_bytes(std::string_view text);

// "1.50 GiB", "512 B": binary units, two decimals above bytes.
std::string format_bytes(uint64_t bytes);

}  // namespace stripesolve
