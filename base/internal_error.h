// The one way to report a broken invariant: log with context (file, line, function), flush the
// logs, then abort. Used for bugs, never for bad input (bad input is a Status).
#pragma once

#include <cstdint>
#include <source_location>
#include <string>
#include <string_view>

namespace stripesolve {

#if defined(__cpp_lib_source_location)
using SourceLocation = std::source_location;
#else
// Clang 14 with libstdc++ 12 (the thread-safety analysis build, scripts/check-threads.sh) lacks
// __builtin_source_location, so <source_location> declares nothing; the older builtins give the
// same three fields.
class SourceLocation {
 public:
  static constexpr SourceLocation current(const char* file = __builtin_FILE(),
                                          uint_least32_t line = __builtin_LINE(),
                                          const char* function = __builtin_FUNCTION()) {
    return SourceLocation(file, line, function);
  }
  constexpr const char* file_name() const { return file_; }
  constexpr uint_least32_t line() const { return line_; }
  constexpr const char* function_name() const { return function_; }

 private:
  constexpr SourceLocation(const char* file, uint_least32_t line, const char* function)
      : file_(file), line_(line), function_(function) {}
  const char* file_;
  uint_least32_t line_;
  const char* function_;
};
#endif

[[noreturn]] void internal_error(std::string_view what,
                                 SourceLocation where = SourceLocation::current());

}  // namespace stripesolve

// Checks an invariant in every build type (unlike assert); `what` is any std::string expression.
#define STRIPESOLVE_CHECK(cond, what)                                                   \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      ::stripesolve::internal_error(std::string("check failed: " #cond ": ") + (what)); \
    }                                                                                   \
  } while (0)
