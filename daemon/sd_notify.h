// systemd readiness notification without libsystemd: one datagram to $NOTIFY_SOCKET
// (sd_notify(3) protocol: "READY=1", "STOPPING=1", "STATUS=...", "RELOADING=1"; an address
// starting with '@' is in the abstract namespace). No-op (OK) when $NOTIFY_SOCKET is unset.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace stripesolve::daemon {

Status sd_notify(std::string_view state);
// Same, to an explicit socket address (tests).
Status sd_notify_to(const std::string& address, std::string_view state);

}  // namespace stripesolve::daemon
