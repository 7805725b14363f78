#include "bench/dense_gpu/trace_summary.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <vector>

namespace stripesolve::bench {

using nlohmann::json;

json summarize_trace(const std::string& chrome_trace_json) {
  const json trace = json::parse(chrome_trace_json);
  std::map<int, std::string> role_of;
  for (const json& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "M")
      role_of[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
  }
  int64_t t0 = 0, t1 = 0;
  for (const json& e : trace["traceEvents"]) {
    if (e.value("ph", "") == "X" && e["name"] == "triangulation") {
      t0 = e["ts"].get<int64_t>();
      t1 = t0 + e["dur"].get<int64_t>();
    }
  }
  struct Stat {
    double seconds = 0, max_seconds = 0;
    int64_t count = 0;
  };
  std::map<std::string, std::map<std::string, Stat>> stats;
  std::map<std::string, std::vector<std::pair<int64_t, int64_t>>> spans;  // inside [t0, t1]
  for (const json& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X" || e["name"] == "triangulation") continue;
    const std::string role = role_of[e["tid"].get<int>()];
    const int64_t ts = e["ts"].get<int64_t>(), dur = e["dur"].get<int64_t>();
    Stat& s = stats[role][e["name"].get<std::string>()];
    s.seconds += dur * 1e-6;
    s.max_seconds = std::max(s.max_seconds, dur * 1e-6);
    ++s.count;
    if (t1 > t0 && ts >= t0 && ts <= t1) spans[role].push_back({ts, ts + dur});
  }
  const double wall = (t1 - t0) * 1e-6;
  json out = {{"wall_seconds", wall}, {"roles", json::object()}};
  for (auto& [role, by_name] : stats) {
    // Busy time: the union of the role's spans (nested spans, e.g. "assemble U" inside
    // "update", count once).
    auto& v = spans[role];
    std::sort(v.begin(), v.end());
    int64_t busy = 0, end = INT64_MIN;
    std::vector<std::pair<int64_t, int64_t>> gaps;  // (length, start)
    int64_t last_end = t0;
    for (auto [a, b] : v) {
      if (a > last_end) gaps.push_back({a - last_end, last_end - t0});
      if (a >= end) {
        busy += b - a;
        end = b;
      } else if (b > end) {
        busy += b - end;
        end = b;
      }
      last_end = std::max(last_end, b);
    }
    json r = {{"busy_seconds", busy * 1e-6},
              {"busy_fraction", wall > 0 ? busy * 1e-6 / wall : 0.0},
              {"spans", json::object()}};
    for (auto& [name, s] : by_name) {
      r["spans"][name] = {
          {"seconds", s.seconds}, {"count", s.count}, {"max_seconds", s.max_seconds}};
    }
    if (role == "elim.I") {
      std::sort(gaps.rbegin(), gaps.rend());
      json g = json::array();
      for (size_t k = 0; k < gaps.size() && k < 8; ++k) {
        g.push_back({{"seconds", gaps[k].first * 1e-6}, {"at_seconds", gaps[k].second * 1e-6}});
      }
      r["longest_waits"] = g;
    }
    out["roles"][role] = r;
  }
  return out;
}

std::string format_trace_summary(const json& summary) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "    trace: factorization wall %.3f s\n",
                summary["wall_seconds"].get<double>());
  out += line;
  for (const auto& [role, r] : summary["roles"].items()) {
    std::snprintf(line, sizeof line, "    %-10s busy %.3f s (%4.1f%%):", role.c_str(),
                  r["busy_seconds"].get<double>(), 100 * r["busy_fraction"].get<double>());
    out += line;
    for (const auto& [name, s] : r["spans"].items()) {
      std::snprintf(line, sizeof line, " %s %.3f s / %lld (max %.4f)", name.c_str(),
                    s["seconds"].get<double>(), static_cast<long long>(s["count"].get<int64_t>()),
                    s["max_seconds"].get<double>());
      out += line;
    }
    out += "\n";
  }
  return out;
}

}  // namespace stripesolve::bench
