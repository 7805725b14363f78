#include "client/human_output.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include <fmt/format.h>

#include "base/units.h"
#include "client/progress.h"

namespace stripesolve::client {
namespace {

// A JSON value as a cell: strings without quotes, numbers as JSON writes them, "-" when absent.
std::string cell(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return "-";
  const auto& v = j[key];
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Whether `value` is one of the comma-separated `list` (without case); an empty list takes all.
bool in_list(const std::string& value, const std::string& list) {
  if (list.empty()) return true;
  size_t begin = 0;
  while (begin <= list.size()) {
    size_t end = list.find(',', begin);
    if (end == std::string::npos) end = list.size();
    if (lower(list.substr(begin, end - begin)) == lower(value)) return true;
    begin = end + 1;
  }
  return false;
}

void flatten(const nlohmann::json& j, const std::string& prefix,
             std::vector<std::pair<std::string, std::string>>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object() && !it->empty()) {
      flatten(*it, key, out);
    } else if (it->is_string()) {
      out.emplace_back(key, it->get<std::string>());
    } else if (it->is_number_float()) {
      out.emplace_back(key, fmt::format("{:.6g}", it->get<double>()));
    } else {
      out.emplace_back(key, it->dump());
    }
  }
}

}  // namespace

std::string format_table(const std::vector<std::string>& header,
                         const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c)
      width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (size_t c = 0; c < width.size(); ++c) {
      const std::string& v = c < cells.size() ? cells[c] : std::string();
      text += v;
      if (c + 1 < width.size()) text.append(width[c] - v.size() + 2, ' ');
    }
    while (!text.empty() && text.back() == ' ') text.pop_back();
    out += text + "\n";
  };
  line(header);
  for (const auto& row : rows) line(row);
  return out;
}

std::string format_fields(const std::vector<std::pair<std::string, std::string>>& fields) {
  size_t width = 0;
  for (const auto& [key, value] : fields) width = std::max(width, key.size());
  std::string out;
  for (const auto& [key, value] : fields) {
    out += fmt::format("  {}:{}{}\n", key, std::string(width - key.size() + 1, ' '), value);
  }
  return out;
}

std::string matrices_table(const nlohmann::json& matrices) {
  if (!matrices.is_array() || matrices.empty()) return "no matrices in the store\n";
  std::vector<std::vector<std::string>> rows;
  std::string notes;  // below the table, so one long problem does not widen a column
  for (const auto& m : matrices) {
    std::string kind = cell(m, "kind");
    const std::string state = m.value("state", std::string("complete"));
    if (state == "corrupt") {
      kind = "CORRUPT";
      notes += fmt::format("{} is corrupt: {}; 'stripesolve matrix rm {}' removes it\n",
                           cell(m, "name"), cell(m, "problem"), cell(m, "name"));
    } else if (state != "complete") {
      kind += " (" + state + ")";
    }
    rows.push_back(
        {cell(m, "name"), cell(m, "n"), cell(m, "stripe_rows"), cell(m, "stripes"),
         m.contains("stored_bytes") ? format_bytes(m.value("stored_bytes", uint64_t{0})) : "-",
         kind, cell(m, "created")});
  }
  return format_table({"NAME", "ORDER", "STRIPE ROWS", "STRIPES", "SIZE", "KIND", "CREATED"},
                      rows) +
         notes;
}

std::string matrix_details(const nlohmann::json& info) {
  std::vector<std::pair<std::string, std::string>> f;
  f.emplace_back("name", cell(info, "name"));
  if (info.value("state", std::string()) == "corrupt") {
    f.emplace_back("state", "corrupt");
    f.emplace_back("problem", cell(info, "problem"));
    f.emplace_back("remedy",
                   fmt::format("'stripesolve matrix rm {}' removes it", cell(info, "name")));
    return format_fields(f);
  }
  f.emplace_back("kind", cell(info, "kind"));
  if (info.contains("factor_of")) {
    f.emplace_back(cell(info, "kind") == "transpose" ? "transpose of" : "factors of",
                   fmt::format("matrix id {} (order {})", cell(info["factor_of"], "id"),
                               cell(info["factor_of"], "n")));
  }
  f.emplace_back("state", cell(info, "state"));
  f.emplace_back("order", cell(info, "n"));
  f.emplace_back("stripes",
                 fmt::format("{} of {} rows", cell(info, "stripes"), cell(info, "stripe_rows")));
  f.emplace_back("element type", cell(info, "dtype"));
  f.emplace_back("stored", info.contains("stored_bytes")
                               ? fmt::format("{} over {} path(s)",
                                             format_bytes(info.value("stored_bytes", uint64_t{0})),
                                             cell(info, "paths"))
                               : "-");
  f.emplace_back("created", cell(info, "created"));
  f.emplace_back("source", cell(info, "source"));
  f.emplace_back("id", cell(info, "id"));
  return format_fields(f);
}

std::string job_counts(const nlohmann::json& counts) {
  std::string out;
  for (const char* state :
       {"running", "pending", "completed", "completed_with_warning", "failed", "cancelled"}) {
    const int64_t k = counts.value(state, int64_t{0});
    if (k == 0) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format(
        "{} {}", k,
        std::string_view(state) == "completed_with_warning" ? "completed with a warning" : state);
  }
  if (out.empty()) out = "none";
  return out +
         fmt::format(" ({} submitted since start)", counts.value("submitted_total", int64_t{0}));
}

std::string jobs_table(const nlohmann::json& jobs) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& j : jobs) {
    const auto& p = j.value("progress", nlohmann::json::object());
    rows.push_back({cell(j, "id"), cell(j, "type"), cell(j, "state"), cell(j, "owner_uid"),
                    cell(j, "created"), p.empty() ? "" : format_progress(p, 0)});
  }
  return format_table({"ID", "TYPE", "STATE", "UID", "CREATED", "PROGRESS"}, rows);
}

std::string result_details(const nlohmann::json& result) {
  std::vector<std::pair<std::string, std::string>> f;
  if (result.is_object()) flatten(result, "", f);
  return format_fields(f);
}

std::string job_details(const nlohmann::json& job) {
  std::string out =
      fmt::format("job {} ({}): {}\n", cell(job, "id"), cell(job, "type"), cell(job, "state"));
  std::vector<std::pair<std::string, std::string>> f;
  f.emplace_back("owner uid", cell(job, "owner_uid"));
  for (const char* when : {"created", "started", "finished"}) {
    if (job.contains(when) && !job[when].is_null() && job[when] != "")
      f.emplace_back(when, cell(job, when));
  }
  const auto& p = job.value("progress", nlohmann::json::object());
  if (!p.empty()) f.emplace_back("progress", format_progress(p, 0));
  if (job.contains("error")) {
    f.emplace_back(
        "error", fmt::format("{}: {}", cell(job["error"], "code"), cell(job["error"], "message")));
  }
  if (job.contains("warning")) f.emplace_back("warning", cell(job, "warning"));
  out += format_fields(f);
  if (job.contains("result") && job["result"].is_object() && !job["result"].empty()) {
    out += "result:\n" + result_details(job["result"]);
  }
  return out;
}

bool job_matches(const nlohmann::json& job, const JobFilter& filter) {
  return in_list(job.value("state", std::string()), filter.states) &&
         in_list(job.value("type", std::string()), filter.types);
}

}  // namespace stripesolve::client
