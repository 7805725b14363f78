#include "cache/cell_state.h"

#include <set>
#include <string>
#include <utility>

#include <gtest/gtest.h>

namespace stripesolve::cache {
namespace {

constexpr CellState kAll[] = {
    CellState::kAbsent, CellState::kWaitDownload, CellState::kDownloading, CellState::kWaitElimI,
    CellState::kElimI,  CellState::kWaitElimJ,    CellState::kElimJ,       CellState::kStuck,
    CellState::kIdle,   CellState::kWaitUpload,   CellState::kUploading};

TEST(CellStateTest, ExactlyTheEdgesOfFig19) {
  using S = CellState;
  const std::set<std::pair<S, S>> legal = {{S::kAbsent, S::kWaitDownload},
                                           {S::kWaitDownload, S::kDownloading},
                                           {S::kDownloading, S::kWaitElimI},
                                           {S::kDownloading, S::kWaitElimJ},
                                           {S::kDownloading, S::kStuck},
                                           {S::kDownloading, S::kIdle},
                                           {S::kWaitElimI, S::kElimI},
                                           {S::kElimI, S::kStuck},
                                           {S::kElimI, S::kIdle},
                                           {S::kWaitElimJ, S::kElimJ},
                                           {S::kElimJ, S::kIdle},
                                           {S::kStuck, S::kIdle},
                                           {S::kStuck, S::kWaitElimI},
                                           {S::kStuck, S::kAbsent},
                                           {S::kIdle, S::kWaitElimI},
                                           {S::kIdle, S::kWaitElimJ},
                                           {S::kIdle, S::kStuck},
                                           {S::kIdle, S::kWaitUpload},
                                           {S::kIdle, S::kAbsent},
                                           {S::kWaitUpload, S::kUploading},
                                           {S::kUploading, S::kAbsent},
                                           {S::kUploading, S::kIdle}};
  for (S from : kAll) {
    for (S to : kAll) {
      EXPECT_EQ(is_legal_transition(from, to), legal.count({from, to}) == 1)
          << cell_state_name(from) << " -> " << cell_state_name(to);
    }
  }
}

TEST(CellStateTest, OnlyIdleCellsAreEvictable) {
  for (CellState s : kAll) EXPECT_EQ(is_evictable(s), s == CellState::kIdle) << cell_state_name(s);
  EXPECT_FALSE(is_in_flight(CellState::kStuck));
  EXPECT_FALSE(is_in_flight(CellState::kIdle));
  EXPECT_TRUE(is_in_flight(CellState::kUploading));
}

TEST(CellStateTest, NamesAreDistinct) {
  std::set<std::string> names;
  for (CellState s : kAll) names.insert(std::string(cell_state_name(s)));
  EXPECT_EQ(names.size(), std::size(kAll));
}

}  // namespace
}  // namespace stripesolve::cache
