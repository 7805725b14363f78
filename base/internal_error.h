// The one way to report a broken invariant: log with context (file, line, function), flush the
// logs, then abort. Used for bugs, never for bad input (bad input is a Status).
#pragma once

#include <source_location>
#include <string>
#include <string_view>

namespace stripesolve {

[[noreturn]] void internal_error(std::string_view what,
                                 std::source_location where = std::source_location::current());

}  // namespace stripesolve

// Checks an invariant in every build type (unlike assert); `what` is any std::string expression.
#define STRIPESOLVE_CHECK(cond, what)                                                   \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      ::stripesolve::internal_error(std::string("check failed: " #cond ": ") + (what)); \
    }                                                                                   \
  } while (0)
