// Where a traced solve spent its time: per role and span name, the summed span time, the
// number of spans and the role's busy fraction of the factorization's wall time (the master's
// "triangulation" span). Read from TraceRecorder::to_json(), so it sees what the Chrome trace
// shows. Lane operations finish before they return (backend/device_engine.h), so a GPU role's
// span time is its device time, overlap with other lanes included.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace stripesolve::bench {

// {"wall_seconds", "roles": {role: {"busy_seconds", "busy_fraction", "spans": {name: {"seconds",
// "count", "max_seconds"}}}}}, and an "idle_gaps" list: elim.I's longest waits between spans.
nlohmann::json summarize_trace(const std::string& chrome_trace_json);

// One line per role for stderr.
std::string format_trace_summary(const nlohmann::json& summary);

}  // namespace stripesolve::bench
