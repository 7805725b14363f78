#include "storage/manifest.h"

#include <gtest/gtest.h>

namespace stripesolve::storage {
namespace {

Manifest sample() {
  Manifest m;
  m.info.name = std::string("A");
  m.info.kind = "matrix";
  m.info.state = ObjectState::kComplete;
  m.info.geometry = *make_geometry(1000, 300);
  m.info.placement = PlacementParams{2, 3, 0, 4096};
  m.info.path_count = 2;
  m.info.created = "2026-11-22T05:00:00Z";
  m.info.source = "generator uniform seed 1";
  m.store_id = "0123";
  auto p = Placement::make(m.info.geometry, m.info.placement);
  m.file_bytes = p->file_bytes();
  for (auto b : m.file_bytes) m.info.stored_bytes += b;
  for (int64_t s = 0; s < p->segment_count(); ++s) {
    m.checksums.push_back(s == 1 ? std::nullopt : std::optional<uint32_t>(0xdeadbeefu + s));
  }
  m.blobs["pivots"] = BlobEntry{80, 42};
  return m;
}

TEST(Manifest, RoundTrips) {
  const Manifest m = sample();
  auto back = manifest_from_json(manifest_to_json(m), "m.json");
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->info.name, "A");
  EXPECT_EQ(back->info.geometry, m.info.geometry);
  EXPECT_EQ(back->info.placement, m.info.placement);
  EXPECT_EQ(back->info.stored_bytes, m.info.stored_bytes);
  EXPECT_EQ(back->checksums, m.checksums);
  EXPECT_EQ(back->blobs, m.blobs);
  EXPECT_EQ(back->info.state, ObjectState::kComplete);
}

TEST(Manifest, DetectsDamage) {
  std::string text = manifest_to_json(sample());
  // Still valid JSON, different value: the self-checksum catches it.
  const auto pos = text.find("\"n\": 1000");
  ASSERT_NE(pos, std::string::npos);
  const std::string altered = text.substr(0, pos) + "\"n\": 1001" + text.substr(pos + 9);
  EXPECT_EQ(manifest_from_json(altered, "m.json").status().message(),
            "manifest m.json: checksum mismatch (the file was altered)");
  EXPECT_EQ(manifest_from_json(text.substr(0, text.size() / 2), "m.json").status().message(),
            "manifest m.json: not valid JSON");
  EXPECT_EQ(manifest_from_json("{\"format\":\"x\"}", "m.json").status().code(),
            StatusCode::kCorruption);
}

}  // namespace
}  // namespace stripesolve::storage
