#include "base/internal_error.h"

#include <cstdio>
#include <cstdlib>

#include <spdlog/spdlog.h>

namespace stripesolve {

void internal_error(std::string_view what, SourceLocation where) {
  // Write to stderr directly as well: the logger may not be set up, or may be what broke.
  std::fprintf(stderr, "stripesolve internal error at %s:%u (%s): %.*s\n", where.file_name(),
               static_cast<unsigned>(where.line()), where.function_name(),
               static_cast<int>(what.size()), what.data());
  std::fflush(stderr);
  if (auto logger = spdlog::default_logger_raw(); logger != nullptr) {
    logger->critical("internal error at {}:{} ({}): {}", where.file_name(), where.line(),
                     where.function_name(), what);
    logger->flush();
  }
  std::abort();
}

}  // namespace stripesolve
