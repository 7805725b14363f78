// A wall-clock time as the store's manifests and the daemon's replies write it:
// "2026-12-03T10:46:40Z" (UTC, whole seconds, truncated). Strings of this form sort as the
// times do.
//
// Thread-safety: a pure function (gmtime_r).
#pragma once

#include <chrono>
#include <string>

namespace stripesolve {

std::string utc_time(std::chrono::system_clock::time_point t);

}  // namespace stripesolve
