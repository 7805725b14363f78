// Where the daemon's socket lives, shared by daemon and client (docs/protocol.md).
//
// Resolution order: an explicit path (flag), then $STRIPESOLVE_SOCKET, then
// $XDG_RUNTIME_DIR/stripesolve/stripesolved.sock, else /tmp/stripesolve-$UID/stripesolved.sock.
// Pure except for reading the environment and the uid.
#pragma once

#include <string>
#include <string_view>

namespace stripesolve::protocol {

std::string default_socket_path();
// `explicit_path` if non-empty, else default_socket_path().
std::string resolve_socket_path(std::string_view explicit_path);

}  // namespace stripesolve::protocol
