#include "storage/generators.h"

#include <cmath>
#include <numbers>
#include <vector>

namespace stripesolve::storage {
namespace {

enum class Kind {
  kUniform,
  kDiagDominant,
  kNormal,
  kIdentity,
  kHilbert,
  kGeppGrowth,
  kWilkinsonT,
  kGraded,
  kNearSingular,
  kUnknown
};

// graded: the leading block's rows and columns, and their scale.
constexpr int64_t kGradedBlock = 64;
constexpr double kGradedScale = 1e-14;

Kind kind_of(const std::string& name) {
  if (name == "uniform") return Kind::kUniform;
  if (name == "diag_dominant") return Kind::kDiagDominant;
  if (name == "normal") return Kind::kNormal;
  if (name == "identity") return Kind::kIdentity;
  if (name == "hilbert") return Kind::kHilbert;
  if (name == "gepp_growth" || name == "wilkinson") return Kind::kGeppGrowth;
  if (name == "wilkinson_t") return Kind::kWilkinsonT;
  if (name == "graded") return Kind::kGraded;
  if (name == "near_singular") return Kind::kNearSingular;
  return Kind::kUnknown;
}

// SplitMix64 finaliser: a counter-based generator, so each element is independent of the others.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

uint64_t element_bits(uint64_t seed, int64_t row, int64_t col, uint64_t stream) {
  return mix(mix(mix(seed ^ (stream * 0xD1B54A32D192ED03ull)) ^ static_cast<uint64_t>(row)) ^
             static_cast<uint64_t>(col));
}

// [0, 1) with 53 random bits.
double unit(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

double value_of(Kind kind, uint64_t seed, int64_t n, int64_t row, int64_t col) {
  switch (kind) {
    case Kind::kUniform:
      return unit(element_bits(seed, row, col, 0)) - 0.5;
    case Kind::kDiagDominant: {
      const double v = unit(element_bits(seed, row, col, 0)) - 0.5;
      return row == col ? v + static_cast<double>(n) : v;
    }
    case Kind::kNormal: {
      const double u1 = 1.0 - unit(element_bits(seed, row, col, 1));  // (0, 1]
      const double u2 = unit(element_bits(seed, row, col, 2));
      return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    }
    case Kind::kIdentity:
      return row == col ? 1.0 : 0.0;
    case Kind::kHilbert:
      return 1.0 / static_cast<double>(row + col + 1);
    case Kind::kGeppGrowth:
      if (row == col || col == n - 1) return 1.0;
      return row > col ? -1.0 : 0.0;
    case Kind::kWilkinsonT:
      if (row == col || row == n - 1) return 1.0;
      return col > row ? -1.0 : 0.0;
    case Kind::kGraded: {
      const double v = unit(element_bits(seed, row, col, 0)) - 0.5;
      return row < kGradedBlock && col < kGradedBlock ? kGradedScale * v : v;
    }
    case Kind::kNearSingular: {
      // The last row repeats the first, perturbed far below the rounding of its values: singular
      // to working precision (rcond at rounding level or below), though no pivot need be zero.
      const int64_t r = n > 1 && row == n - 1 ? 0 : row;
      const double v = unit(element_bits(seed, r, col, 0)) - 0.5;
      return r == row ? v : v + 1e-20 * (unit(element_bits(seed, row, col, 3)) - 0.5);
    }
    case Kind::kUnknown:
      break;
  }
  return 0.0;
}

}  // namespace

const std::vector<std::string>& generator_names() {
  static const std::vector<std::string> names = {
      "uniform",     "diag_dominant", "normal",      "identity", "hilbert",
      "gepp_growth", "wilkinson",     "wilkinson_t", "graded",   "near_singular"};
  return names;
}

Status check_generator(const GeneratorSpec& spec) {
  if (kind_of(spec.name) != Kind::kUnknown) return Status::ok();
  std::string known;
  for (const auto& n : generator_names()) known += (known.empty() ? "" : ", ") + n;
  return Status::invalid_argument("unknown generator '" + spec.name +
                                  "' (expected one of: " + known + ")");
}

double generated_value(const GeneratorSpec& spec, int64_t n, int64_t row, int64_t col) {
  return value_of(kind_of(spec.name), spec.seed, n, row, col);
}

void fill_generated(const GeneratorSpec& spec, int64_t n, int64_t row0, int64_t rows, int64_t e0,
                    int64_t count, double* out) {
  const Kind kind = kind_of(spec.name);
  int64_t r = e0 % rows;
  int64_t c = e0 / rows;
  if (kind == Kind::kUniform) {
    // element_bits with the two inner mixes (seed, row) hoisted out of the loop: one per row.
    std::vector<uint64_t> row_bits(static_cast<size_t>(rows));
    const uint64_t s0 = mix(spec.seed);
    for (int64_t i = 0; i < rows; ++i) row_bits[i] = mix(s0 ^ static_cast<uint64_t>(row0 + i));
    for (int64_t k = 0; k < count; ++k) {
      out[k] = unit(mix(row_bits[r] ^ static_cast<uint64_t>(c))) - 0.5;
      if (++r == rows) {
        r = 0;
        ++c;
      }
    }
    return;
  }
  for (int64_t k = 0; k < count; ++k) {
    out[k] = value_of(kind, spec.seed, n, row0 + r, c);
    if (++r == rows) {
      r = 0;
      ++c;
    }
  }
}

Result<std::vector<double>> generate_rhs(const std::string& kind, int64_t n, int64_t nrhs,
                                         uint64_t seed) {
  if (kind != "ones" && kind != "uniform") {
    return Status::invalid_argument("rhs.generate must be 'ones' or 'uniform', got '" + kind + "'");
  }
  std::vector<double> b(static_cast<size_t>(n * nrhs), 1.0);
  if (kind == "uniform") {
    for (int64_t j = 0; j < nrhs; ++j) {
      for (int64_t i = 0; i < n; ++i) {
        const uint64_t h =
            mix(seed ^ mix(static_cast<uint64_t>(j) * 0x100000001b3ull + static_cast<uint64_t>(i)));
        b[j * n + i] = static_cast<double>(h >> 11) * 0x1.0p-53 - 0.5;
      }
    }
  }
  return b;
}

}  // namespace stripesolve::storage
