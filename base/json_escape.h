// JSON string escaping for log lines and hand-built JSON (RFC 8259 §7).
#pragma once

#include <string>
#include <string_view>

namespace stripesolve {

// Appends `text` to `out` as the body of a JSON string (without the surrounding quotes):
// '"' and '\\' are escaped, control characters become \n, \t, ... or \u00XX, and bytes that are
// not valid UTF-8 are replaced by U+FFFD so that the output is always valid JSON.
void append_json_escaped(std::string& out, std::string_view text);

// The same, returned as a new string.
std::string json_escape(std::string_view text);

}  // namespace stripesolve
