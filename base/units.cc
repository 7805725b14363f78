#include "base/units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace stripesolve {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

std::optional<uint64_t> unit_multiplier(std::string_view unit) {
  struct Unit {
    std::string_view name;
    uint64_t mult;
  };
  static constexpr Unit kUnits[] = {{"", 1},
                                    {"b", 1},
                                    {"kib", kKiB},
                                    {"mib", kMiB},
                                    {"gib", kGiB},
                                    {"tib", kTiB},
                                    {"kb", 1000},
                                    {"mb", 1000'000},
                                    {"gb", 1000'000'000},
                                    {"tb", 1000'000'000'000}};
  for (const Unit& u : kUnits) {
    if (iequals(unit, u.name)) return u.mult;
  }
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> parse_bytes(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
    ++i;
  const std::string_view number = text.substr(0, i);
  std::string_view unit = text.substr(i);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  if (number.empty()) return std::nullopt;
  const auto mult = unit_multiplier(unit);
  if (!mult) return std::nullopt;
  if (number.find('.') == std::string_view::npos) {
    uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (ec != std::errc() || ptr != number.data() + number.size()) return std::nullopt;
    if (value != 0 && *mult > UINT64_MAX / value) return std::nullopt;
    return value * *mult;
  }
  if (unit.empty()) return std::nullopt;  // "1.5" bytes makes no sense
  double value = 0;
  auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || ptr != number.data() + number.size()) return std::nullopt;
  const double bytes = std::round(value * static_cast<double>(*mult));
  if (!(bytes >= 0) || bytes >= 18446744073709551615.0) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

std::string format_bytes(uint64_t bytes) {
  static constexpr const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < kKiB) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int k = 0;
  while (v >= 1024.0 && k < 6) {
    v /= 1024.0;
    ++k;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, kNames[k]);
  return buf;
}

}  // namespace stripesolve
