#include "storage/manifest.h"

#include <algorithm>
#include <chrono>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/utc_time.h"
#include "storage/checksum.h"

namespace stripesolve::storage {
namespace {

using nlohmann::json;

constexpr int kVersion = 1;

uint32_t text_crc(const json& j) {
  const std::string text = j.dump();
  return crc32c_extend(0, text.data(), text.size());
}

bool is_object_id(const std::string& id) {
  return id.size() == 32 && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::optional<ObjectState> state_from_name(const std::string& s) {
  if (s == "incomplete") return ObjectState::kIncomplete;
  if (s == "complete") return ObjectState::kComplete;
  if (s == "being_factored") return ObjectState::kBeingFactored;
  return std::nullopt;
}

}  // namespace

std::string_view object_state_name(ObjectState state) {
  switch (state) {
    case ObjectState::kIncomplete:
      return "incomplete";
    case ObjectState::kComplete:
      return "complete";
    case ObjectState::kBeingFactored:
      return "being_factored";
    case ObjectState::kCorrupt:
      return "corrupt";
  }
  return "?";
}

std::string utc_now() {
  return utc_time(std::chrono::system_clock::now());
}

std::string new_object_id() {
  std::random_device rd;
  std::string out;
  for (int k = 0; k < 4; ++k) out += fmt::format("{:08x}", static_cast<uint32_t>(rd()));
  return out;
}

uint32_t checksum_summary(const std::vector<std::optional<uint32_t>>& checksums) {
  uint32_t crc = 0;
  for (const auto& c : checksums) {
    const uint32_t v = c.value_or(0);
    const unsigned char bytes[4] = {
        static_cast<unsigned char>(v), static_cast<unsigned char>(v >> 8),
        static_cast<unsigned char>(v >> 16), static_cast<unsigned char>(v >> 24)};
    crc = crc32c_extend(crc, bytes, sizeof bytes);
  }
  return crc;
}

bool is_factor_of(const MatrixInfo& factor, const MatrixInfo& matrix) {
  return !matrix.id.empty() && factor.factor_of.has_value() &&
         *factor.factor_of == FactorOf{matrix.id, matrix.geometry.n, matrix.checksum_summary};
}

std::string manifest_to_json(const Manifest& m) {
  const MatrixInfo& i = m.info;
  json j;
  j["format"] = "stripesolve-object";
  j["version"] = kVersion;
  j["name"] = i.name;
  if (!i.id.empty()) j["id"] = i.id;
  j["kind"] = i.kind;
  j["state"] = std::string(object_state_name(i.state));
  j["dtype"] = i.dtype;
  j["n"] = i.geometry.n;
  j["stripe_rows"] = i.geometry.stripe_rows;
  j["stripes"] = i.geometry.stripes;
  j["layout"] = "row-stripes-column-major";
  j["store_id"] = m.store_id;
  j["created"] = {{"time", i.created}, {"source", i.source}};
  if (i.factor_of) {
    j["factor_of"] = {{"id", i.factor_of->matrix_id},
                      {"n", i.factor_of->n},
                      {"checksum_summary", i.factor_of->checksum_summary}};
  }
  j["placement"] = {{"paths", i.placement.path_count},
                    {"levels", i.placement.levels},
                    {"segment_bytes", i.placement.segment_bytes},
                    {"min_segment_bytes", i.placement.min_segment_bytes},
                    {"rotation", "stripe"},
                    {"file_bytes", m.file_bytes}};
  json sums = json::array();
  for (const auto& c : m.checksums) sums.push_back(c ? json(*c) : json(nullptr));
  j["checksum"] = "crc32c";
  j["segment_checksums"] = std::move(sums);
  json blobs = json::object();
  for (const auto& [key, b] : m.blobs) blobs[key] = {{"bytes", b.bytes}, {"crc32c", b.crc32c}};
  j["blobs"] = std::move(blobs);
  j["manifest_crc32c"] = text_crc(j);
  return j.dump(1) + "\n";
}

Result<Manifest> manifest_from_json(std::string_view text, const std::string& where) {
  const auto bad = [&where](const std::string& what) {
    return Status::corruption("manifest " + where + ": " + what);
  };
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad("not valid JSON");
  try {
    if (j.value("format", "") != "stripesolve-object") return bad("not a stripesolve manifest");
    if (j.at("version").get<int>() != kVersion) {
      return bad("unsupported version " + j.at("version").dump());
    }
    const auto stored_crc = j.at("manifest_crc32c").get<uint32_t>();
    j.erase("manifest_crc32c");
    if (text_crc(j) != stored_crc) return bad("checksum mismatch (the file was altered)");

    Manifest m;
    MatrixInfo& i = m.info;
    i.name = j.at("name").get<std::string>();
    if (j.contains("id")) {
      i.id = j.at("id").get<std::string>();
      if (!is_object_id(i.id)) return bad("malformed id '" + i.id + "'");
    }
    i.kind = j.at("kind").get<std::string>();
    if (i.kind != "matrix" && i.kind != "factor" && i.kind != "transpose") {
      return bad("unknown kind '" + i.kind + "'");
    }
    const auto state = state_from_name(j.at("state").get<std::string>());
    if (!state) return bad("unknown state " + j.at("state").dump());
    i.state = *state;
    i.dtype = j.at("dtype").get<std::string>();
    if (i.dtype != "float64") return bad("unsupported dtype '" + i.dtype + "'");
    auto g = make_geometry(j.at("n").get<int64_t>(), j.at("stripe_rows").get<int64_t>());
    if (!g.is_ok()) return bad(g.status().message());
    if (g->stripes != j.at("stripes").get<int64_t>())
      return bad("stripe count does not match n and S");
    i.geometry = *g;
    m.store_id = j.at("store_id").get<std::string>();
    i.created = j.at("created").at("time").get<std::string>();
    i.source = j.at("created").at("source").get<std::string>();
    if (j.contains("factor_of")) {
      const json& f = j.at("factor_of");
      i.factor_of = FactorOf{f.at("id").get<std::string>(), f.at("n").get<int64_t>(),
                             f.at("checksum_summary").get<uint32_t>()};
      if (!is_object_id(i.factor_of->matrix_id)) return bad("malformed factor_of.id");
    }
    const json& p = j.at("placement");
    i.placement.path_count = p.at("paths").get<int>();
    i.placement.levels = p.at("levels").get<int64_t>();
    i.placement.segment_bytes = p.at("segment_bytes").get<uint64_t>();
    i.placement.min_segment_bytes = p.at("min_segment_bytes").get<uint64_t>();
    i.path_count = i.placement.path_count;
    m.file_bytes = p.at("file_bytes").get<std::vector<uint64_t>>();
    auto placement = Placement::make(i.geometry, i.placement);
    if (!placement.is_ok()) return bad(placement.status().message());
    if (m.file_bytes != placement->file_bytes())
      return bad("file sizes do not match the placement");
    for (uint64_t b : m.file_bytes) i.stored_bytes += b;
    const json& sums = j.at("segment_checksums");
    if (!sums.is_array() || static_cast<int64_t>(sums.size()) != placement->segment_count()) {
      return bad("expected " + std::to_string(placement->segment_count()) + " segment checksums");
    }
    for (const json& c : sums) {
      m.checksums.push_back(c.is_null() ? std::nullopt
                                        : std::optional<uint32_t>(c.get<uint32_t>()));
    }
    i.checksum_summary = checksum_summary(m.checksums);
    for (const auto& [key, b] : j.at("blobs").items()) {
      m.blobs[key] = BlobEntry{b.at("bytes").get<uint64_t>(), b.at("crc32c").get<uint32_t>()};
    }
    return m;
  } catch (const json::exception& e) {
    return bad(std::string("malformed field: ") + e.what());
  }
}

}  // namespace stripesolve::storage
