#include "storage/placement.h"

#include <algorithm>
#include <map>
#include <vector>

#include <gtest/gtest.h>

namespace stripesolve::storage {
namespace {

Placement must_place(int64_t n, int64_t s, PlacementParams params) {
  auto g = make_geometry(n, s);
  EXPECT_TRUE(g.is_ok());
  auto p = Placement::make(*g, params);
  EXPECT_TRUE(p.is_ok()) << p.status().to_string();
  return std::move(p).value();
}

// Every stored byte of every stripe maps to exactly one (path, file byte), files are fully used,
// and everything is 4 KiB aligned.
void check_exact_cover(const Placement& p) {
  const auto& g = p.geometry();
  const int paths = p.params().path_count;
  std::vector<std::map<uint64_t, uint64_t>> used(paths);  // file offset -> length
  for (int64_t I = 0; I < g.stripes; ++I) {
    uint64_t next = 0;
    for (const Segment& s : p.segments(I)) {
      ASSERT_EQ(s.stripe_offset, next);
      ASSERT_GT(s.length, 0u);
      ASSERT_EQ(s.length % kAlignment, 0u);
      ASSERT_EQ(s.file_offset % kAlignment, 0u);
      ASSERT_TRUE(used[s.path].emplace(s.file_offset, s.length).second);
      next += s.length;
    }
    ASSERT_EQ(next, p.stored_bytes(I));
    ASSERT_GE(next, g.stripe_bytes(I));
    ASSERT_LT(next - g.stripe_bytes(I), kAlignment);
  }
  for (int path = 0; path < paths; ++path) {
    uint64_t end = 0;
    for (auto [off, len] : used[path]) {
      ASSERT_EQ(off, end) << "gap or overlap on path " << path;
      end = off + len;
    }
    ASSERT_EQ(end, p.file_bytes()[path]);
  }
}

TEST(Placement, ExactCoverAndAlignment) {
  for (int paths : {1, 2, 3, 6}) {
    for (int64_t levels : {1, 3, 8}) {
      for (auto [n, s] : std::vector<std::pair<int64_t, int64_t>>{
               {1, 1}, {7, 3}, {257, 64}, {1000, 300}, {3001, 2000}, {5, 64}}) {
        PlacementParams params{paths, levels, 0, kAlignment};
        check_exact_cover(must_place(n, s, params));
      }
    }
    check_exact_cover(must_place(1001, 100, PlacementParams{paths, 0, 3 * kAlignment, kAlignment}));
  }
}

TEST(Placement, LevelsGiveLevelsTimesPathsSegments) {
  // 002 Fig 16: 8 levels over 6 paths -> 48 segments per stripe, each path holds 8 of them.
  Placement p = must_place(48 * 512, 512, PlacementParams{6, 8, 0, kAlignment});
  for (int64_t I = 0; I < p.geometry().stripes; ++I) {
    ASSERT_EQ(p.segments(I).size(), 48u);
    std::vector<int> per_path(6, 0);
    for (const Segment& s : p.segments(I)) ++per_path[s.path];
    for (int c : per_path) EXPECT_EQ(c, 8);
  }
}

TEST(Placement, BalancedAcrossPaths) {
  // Per stripe the paths differ by at most one segment; over the matrix the rotation spreads the
  // shorter tails, so the totals differ by less than one segment length.
  Placement p = must_place(10007, 997, PlacementParams{3, 4, 0, kAlignment});
  uint64_t max_seg = 0;
  for (int64_t I = 0; I < p.geometry().stripes; ++I) {
    std::vector<uint64_t> bytes(3, 0);
    for (const Segment& s : p.segments(I)) {
      bytes[s.path] += s.length;
      max_seg = std::max(max_seg, s.length);
    }
    auto [lo, hi] = std::minmax_element(bytes.begin(), bytes.end());
    EXPECT_LE(*hi - *lo, p.segments(I).front().length);
  }
  auto [lo, hi] = std::minmax_element(p.file_bytes().begin(), p.file_bytes().end());
  EXPECT_LE(*hi - *lo, 2 * max_seg);
  EXPECT_LT(static_cast<double>(*hi - *lo) / static_cast<double>(*hi), 0.05);
}

TEST(Placement, PiecesCoverRangeInOrder) {
  Placement p = must_place(3001, 700, PlacementParams{4, 3, 0, kAlignment});
  for (int64_t I = 0; I < p.geometry().stripes; ++I) {
    const uint64_t stored = p.stored_bytes(I);
    for (uint64_t begin : {uint64_t{0}, kAlignment, align_down(stored / 3), stored - kAlignment}) {
      std::vector<IoPiece> pieces;
      p.pieces(I, begin, stored, pieces);
      uint64_t next = 0;
      for (const IoPiece& piece : pieces) {
        ASSERT_EQ(piece.buffer_offset, next);
        const Segment& s = p.segment(piece.segment);
        ASSERT_EQ(p.stripe_of_segment(piece.segment), I);
        ASSERT_EQ(piece.path, s.path);
        ASSERT_EQ(piece.file_offset - s.file_offset, begin + piece.buffer_offset - s.stripe_offset);
        ASSERT_EQ(piece.whole_segment, piece.length == s.length);
        next += piece.length;
      }
      ASSERT_EQ(next, stored - begin);
    }
  }
}

TEST(Placement, RoundRobinLevelsEq20) {
  // n = 400,000 with 2.5e9 values of cache (002 §7.3): n/sqrt(NV) = 8, so Q = 1 gives 8 levels.
  EXPECT_EQ(round_robin_levels(400000, 20000000000ull, 1.0), 8);
  EXPECT_EQ(round_robin_levels(400000, 20000000000ull, 4.0), 32);
  EXPECT_EQ(round_robin_levels(10, 20000000000ull, 4.0), 1);
}

TEST(Placement, RejectsBadParams) {
  auto g = make_geometry(10, 4);
  EXPECT_EQ(Placement::make(*g, PlacementParams{0, 8, 0, kAlignment}).status().message(),
            "placement needs at least one path, got 0");
  EXPECT_EQ(Placement::make(*g, PlacementParams{1, 8, 1000, kAlignment}).status().message(),
            "segment sizes must be multiples of 4096 bytes, got 1000 and 4096");
  EXPECT_EQ(Placement::make(*g, PlacementParams{1, 0, 0, kAlignment}).status().message(),
            "round-robin levels must be at least 1, got 0");
}

TEST(Placement, FileBytesWithoutSegmentsMatchTheFullPlacement) {
  for (int paths : {1, 2, 3, 5}) {
    for (auto [n, s] :
         {std::pair<int64_t, int64_t>{1, 1}, {100, 7}, {1000, 64}, {3000, 1000}, {4097, 513}}) {
      for (PlacementParams params :
           {PlacementParams{paths, 8, 0, 4096}, PlacementParams{paths, 3, 0, 1 << 20},
            PlacementParams{paths, 1, 8192, 4096}}) {
        const Placement p = must_place(n, s, params);
        auto bytes = placement_file_bytes(p.geometry(), params);
        ASSERT_TRUE(bytes.is_ok()) << bytes.status().to_string();
        EXPECT_EQ(*bytes, p.file_bytes()) << "n=" << n << " S=" << s << " P=" << paths;
      }
    }
  }
  auto g = make_geometry(10, 3);
  EXPECT_EQ(placement_file_bytes(*g, PlacementParams{0, 8, 0, 4096}).status().message(),
            "placement needs at least one path, got 0");
}

}  // namespace
}  // namespace stripesolve::storage
