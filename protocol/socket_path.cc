#include "protocol/socket_path.h"

#include <unistd.h>

#include <cstdlib>

namespace stripesolve::protocol {

std::string default_socket_path() {
  if (const char* env = std::getenv("STRIPESOLVE_SOCKET"); env != nullptr && *env != '\0') {
    return env;
  }
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && *xdg == '/') {
    return std::string(xdg) + "/stripesolve/stripesolved.sock";
  }
  return "/tmp/stripesolve-" + std::to_string(::getuid()) + "/stripesolved.sock";
}

std::string resolve_socket_path(std::string_view explicit_path) {
  return explicit_path.empty() ? default_socket_path() : std::string(explicit_path);
}

}  // namespace stripesolve::protocol
