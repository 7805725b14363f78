#include "scheduler/strategy.h"

#include <gtest/gtest.h>

namespace stripesolve::scheduler {
namespace {

TEST(StrategyTest, BasicOrderMatchesFig20) {
  EXPECT_EQ(to_string(make_tasks(Strategy::kBasic, 3, 1)), "E0 U1<[0,1) U2<[0,1) E1 U2<[1,2) E2");
}

TEST(StrategyTest, ZigzagScansUpwardOnOddI) {
  EXPECT_EQ(to_string(make_tasks(Strategy::kZigzag, 4, 1)),
            "E0 U1<[0,1) U2<[0,1) U3<[0,1) E1 U3<[1,2) U2<[1,2) E2 U3<[2,3) E3");
}

TEST(StrategyTest, MetaZigzagGroupsUpdatesByMetaStripe) {
  EXPECT_EQ(to_string(make_tasks(Strategy::kMetaZigzag, 4, 2)),
            "E0 U1<[0,1) E1 U2<[0,2) U3<[0,2) E2 U3<[2,3) E3");
  // N = 5, S^m = 2: N^m = 3 meta-stripes [0,1) [1,3) [3,5) (002 Eq 9 and I0 = I^m N / N^m).
  EXPECT_EQ(to_string(make_tasks(Strategy::kMetaZigzag, 5, 2)),
            "E0 U1<[0,1) U2<[0,1) U3<[0,1) U4<[0,1) E1 U2<[1,2) E2 U4<[1,3) U3<[1,3) E3 "
            "U4<[3,4) E4");
  EXPECT_EQ(meta_stripe_count(5, 2), 3);
  EXPECT_EQ(meta_stripe_count(4, 2), 2);
}

TEST(StrategyTest, AnUpwardLeadTakesTheNextMetaStripeAfterTheLeadingStripes) {
  // N = 8, S^m = 2: meta-stripes [0,2) [2,4) [4,6) [6,8). The sweep by [2,4) is upward; with a
  // lead of 1 it takes stripe 7, then the next meta-stripe [4,6) top to bottom, then 6.
  const std::string m0 = "E0 U1<[0,1) E1 U2<[0,2) U3<[0,2) U4<[0,2) U5<[0,2) U6<[0,2) U7<[0,2) ";
  const std::string m2 = " E4 U5<[4,5) E5 U6<[4,6) U7<[4,6) E6 U7<[6,7) E7";
  EXPECT_EQ(to_string(make_tasks(Strategy::kMetaZigzag, 8, 2, 1)),
            m0 + "E2 U3<[2,3) E3 U7<[2,4) U4<[2,4) U5<[2,4) U6<[2,4)" + m2);
  EXPECT_EQ(to_string(make_tasks(Strategy::kMetaZigzag, 8, 2, 0)),
            m0 + "E2 U3<[2,3) E3 U4<[2,4) U5<[2,4) U7<[2,4) U6<[2,4)" + m2);
  // A lead that reaches the next meta-stripe, and -1: 002's order.
  const std::string fig20 = m0 + "E2 U3<[2,3) E3 U7<[2,4) U6<[2,4) U5<[2,4) U4<[2,4)" + m2;
  EXPECT_EQ(to_string(make_tasks(Strategy::kMetaZigzag, 8, 2, 2)),
            m0 + "E2 U3<[2,3) E3 U7<[2,4) U6<[2,4) U4<[2,4) U5<[2,4)" + m2);
  EXPECT_EQ(to_string(make_tasks(Strategy::kMetaZigzag, 8, 2, 4)),
            m0 + "E2 U3<[2,3) E3 U7<[2,4) U6<[2,4) U5<[2,4) U4<[2,4)" + m2);
  EXPECT_EQ(to_string(make_tasks(Strategy::kMetaZigzag, 8, 2, -1)), fig20);
  EXPECT_EQ(to_string(make_tasks(Strategy::kMetaZigzag, 8, 2, 100)), fig20);
  // The lead leaves the other strategies alone.
  EXPECT_EQ(make_tasks(Strategy::kZigzag, 8, 1, 0), make_tasks(Strategy::kZigzag, 8, 1));
}

TEST(StrategyTest, TheNextMetaStripesFirstStripesCanBeUpdatedInsideTheChain) {
  // N = 6, S^m = 2: meta-stripes [0,2) [2,4) [4,6). Stripe 2 is updated by 0 and by 1 right after
  // their eliminations, and the sweeps by [0,2) (downward) and [2,4) (upward) start after it.
  EXPECT_EQ(to_string(make_tasks(Strategy::kMetaZigzag, 6, 2, -1, 1)),
            "E0 U1<[0,1) U2<[0,1) E1 U2<[1,2) U3<[0,2) U4<[0,2) U5<[0,2) "
            "E2 U3<[2,3) U4<[2,3) E3 U4<[3,4) U5<[2,4) E4 U5<[4,5) E5");
  // With an upward lead the next meta-stripe still comes first but for its first stripe.
  EXPECT_EQ(to_string(make_tasks(Strategy::kMetaZigzag, 8, 2, 0, 1)),
            "E0 U1<[0,1) U2<[0,1) E1 U2<[1,2) U3<[0,2) U4<[0,2) U5<[0,2) U6<[0,2) U7<[0,2) "
            "E2 U3<[2,3) U4<[2,3) E3 U4<[3,4) U5<[2,4) U7<[2,4) U6<[2,4) "
            "E4 U5<[4,5) U6<[4,5) E5 U6<[5,6) U7<[4,6) E6 U7<[6,7) E7");
  // Two stripes early: the sweep by [0,3) starts at 5, the next meta-stripe's [3,6) third.
  EXPECT_EQ(to_string(make_tasks(Strategy::kMetaZigzag, 6, 3, -1, 2)),
            "E0 U1<[0,1) U2<[0,1) U3<[0,1) U4<[0,1) E1 U2<[1,2) U3<[1,2) U4<[1,2) "
            "E2 U3<[2,3) U4<[2,3) U5<[0,3) E3 U4<[3,4) U5<[3,4) E4 U5<[4,5) E5");
  // More than the next meta-stripe holds: all of it, and the sweep goes on from the one after.
  EXPECT_EQ(make_tasks(Strategy::kMetaZigzag, 6, 2, -1, 5),
            make_tasks(Strategy::kMetaZigzag, 6, 2, -1, 2));
  // The other strategies have no meta-stripes to lead into.
  EXPECT_EQ(make_tasks(Strategy::kZigzag, 8, 1, -1, 1), make_tasks(Strategy::kZigzag, 8, 1));
  EXPECT_EQ(make_tasks(Strategy::kBasic, 8, 3, -1, 1), make_tasks(Strategy::kBasic, 8, 3));
}

TEST(StrategyTest, UpdatesOfTheNextMetaStripeByOneStripeAreOnTheCriticalPath) {
  const std::vector<int64_t> meta_of = meta_stripe_of(Strategy::kMetaZigzag, 8, 2);  // 0 0 1 1 ..
  EXPECT_TRUE(updates_next_meta_stripe(meta_of, Task::update(2, 0, 1)));   // first of next, by 0
  EXPECT_TRUE(updates_next_meta_stripe(meta_of, Task::update(2, 1, 2)));   // and by 1
  EXPECT_TRUE(updates_next_meta_stripe(meta_of, Task::update(3, 0, 2)));   // the next, by the range
  EXPECT_FALSE(updates_next_meta_stripe(meta_of, Task::update(4, 0, 2)));  // two meta-stripes on
  EXPECT_TRUE(updates_next_meta_stripe(meta_of, Task::update(1, 0, 1)));   // inside the meta-stripe
  EXPECT_FALSE(updates_next_meta_stripe(meta_of, Task::update(6, 2, 4)));  // the sweep beyond
  EXPECT_TRUE(updates_next_meta_stripe(meta_of, Task::update(3, 0, 1)));   // early, the second
  EXPECT_FALSE(updates_next_meta_stripe(meta_of, Task::update(4, 0, 1)));  // two meta-stripes on
}

TEST(StrategyTest, MetaZigzagWithOneStripePerMetaIsZigzag) {
  for (int64_t n = 1; n < 9; ++n) {
    EXPECT_EQ(make_tasks(Strategy::kMetaZigzag, n, 1), make_tasks(Strategy::kZigzag, n, 1)) << n;
  }
}

TEST(StrategyTest, SingleStripe) {
  for (Strategy s : {Strategy::kBasic, Strategy::kZigzag, Strategy::kMetaZigzag}) {
    EXPECT_EQ(to_string(make_tasks(s, 1, 4)), "E0");
  }
}

TEST(StrategyTest, EveryListHasTheDependencyProperties) {
  for (Strategy s : {Strategy::kBasic, Strategy::kZigzag, Strategy::kMetaZigzag}) {
    for (int64_t n = 1; n <= 24; ++n) {
      for (int64_t sm = 1; sm <= 6; ++sm) {
        for (int64_t lead : {-1, 0, 1, 3, 7}) {
          for (int64_t early : {0, 1, 2, 5}) {
            const auto tasks = make_tasks(s, n, sm, lead, early);
            Status st = check_tasks(tasks, n);
            EXPECT_TRUE(st.is_ok())
                << strategy_name(s) << " N=" << n << " Sm=" << sm << " lead=" << lead
                << " early=" << early << ": " << st.to_string();
            // Every (J, I < J) pair exactly once.
            std::vector<int> seen(n * n, 0);
            for (const Task& t : tasks) {
              if (t.kind != Task::Kind::kUpdate) continue;
              for (int64_t i = t.i_begin; i < t.i_end; ++i) ++seen[t.stripe * n + i];
            }
            for (int64_t j = 0; j < n; ++j)
              for (int64_t i = 0; i < j; ++i) EXPECT_EQ(seen[j * n + i], 1) << j << "," << i;
          }
        }
      }
    }
  }
}

TEST(StrategyTest, CheckRejectsBrokenLists) {
  EXPECT_EQ(check_tasks({Task::eliminate(0), Task::eliminate(1)}, 2).message(),
            "task 1 (E1): eliminated before all its updates");
  EXPECT_EQ(check_tasks({Task::update(1, 0, 1), Task::eliminate(0)}, 2).message(),
            "task 0 (U1<[0,1)): uses stripe 0 before its elimination");
  EXPECT_EQ(check_tasks({Task::eliminate(0), Task::update(2, 1, 2)}, 3).message(),
            "task 1 (U2<[1,2)): update out of order (J updated through 0)");
  EXPECT_EQ(check_tasks({Task::eliminate(0)}, 2).message(), "stripe 1 never eliminated");
}

TEST(StrategyTest, ParseNames) {
  EXPECT_EQ(parse_strategy("zigzag").value(), Strategy::kZigzag);
  EXPECT_EQ(parse_strategy("meta_zigzag").value(), Strategy::kMetaZigzag);
  EXPECT_EQ(parse_strategy("lru").status().message(),
            "unknown strategy 'lru' (expected basic, zigzag or meta_zigzag)");
}

TEST(TrafficTest, WholeMatrixCacheReadsAndWritesEachStripeOnce) {
  const TrafficModel m{1000, 10, 8ull * 1000 * 1000};
  for (Strategy s : {Strategy::kBasic, Strategy::kZigzag, Strategy::kMetaZigzag}) {
    Traffic t = predict_traffic(make_tasks(s, 10, 3), m).value();
    EXPECT_EQ(t.bytes_read, t.matrix_bytes) << strategy_name(s);
    EXPECT_EQ(t.bytes_written, t.matrix_bytes) << strategy_name(s);
    EXPECT_EQ(t.misses, 10u);
  }
}

TEST(TrafficTest, MetaZigzagMovesLessThanBasicWithASmallCache) {
  const int64_t n = 4000, stripes = 40;
  const uint64_t stripe = 8ull * 100 * n;
  const TrafficModel m{n, stripes, 6 * stripe};  // 2 S^m + 2 stripes for S^m = 2
  Traffic basic = predict_traffic(make_tasks(Strategy::kBasic, stripes, 1), m).value();
  Traffic zigzag = predict_traffic(make_tasks(Strategy::kZigzag, stripes, 1), m).value();
  Traffic meta = predict_traffic(make_tasks(Strategy::kMetaZigzag, stripes, 4), m).value();
  EXPECT_GT(basic.bytes_read, 5 * basic.matrix_bytes);
  EXPECT_LT(zigzag.bytes_read, basic.bytes_read);
  EXPECT_LT(meta.bytes_read * 3, zigzag.bytes_read);
  EXPECT_GE(meta.bytes_read, meta.matrix_bytes);
}

// The planner's lead for the CPU tier out of core (the cache's full stripes less 2 S^m, plus one)
// moves the next meta-stripe up without more SSD bytes than 002's order: n = 16384, S = 512, a
// quarter of A cached (8 stripes, S^m = 3) as bench_dense_ooc runs it, and larger caches. The
// model spares the next meta-stripe as the CPU tier's master does (with a lead one shorter the
// quarter-cached run reads 0.9% more).
TEST(TrafficTest, ThePlannersUpwardLeadCostsNoSsdBytes) {
  const int64_t n = 16384, stripes = 32;
  const uint64_t stripe = 8ull * 512 * n;
  for (uint64_t cached : {8, 9, 12}) {
    const int64_t sm = static_cast<int64_t>(cached - 2) / 2;
    const TrafficModel m{n, stripes, cached * stripe, true};
    Traffic last = predict_traffic(Strategy::kMetaZigzag, sm, m).value();
    Traffic lead =
        predict_traffic(Strategy::kMetaZigzag, sm, m, static_cast<int64_t>(cached) - 2 * sm + 1)
            .value();
    EXPECT_LE(lead.bytes_read, last.bytes_read) << cached;
    EXPECT_LE(lead.bytes_written, last.bytes_written) << cached;
  }
}

TEST(TrafficTest, BudgetTooSmallForTheMetaStripeIsAnError) {
  const TrafficModel m{1000, 10, 8ull * 100 * 1000 * 2};  // two stripes, S^m = 3 needs four
  auto r = predict_traffic(make_tasks(Strategy::kMetaZigzag, 10, 3), m);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted);
}

TEST(StrategyTest, CountTasksIsTheListsLengthAndStopsPastTheLimit) {
  for (Strategy s : {Strategy::kBasic, Strategy::kZigzag, Strategy::kMetaZigzag}) {
    for (int64_t stripes : {1, 2, 7, 30}) {
      for (int64_t early : {0, 2}) {
        const auto n = static_cast<int64_t>(make_tasks(s, stripes, 4, 1, early).size());
        EXPECT_EQ(count_tasks(s, stripes, 4, 1 << 20, 1, early), n) << strategy_name(s);
        EXPECT_EQ(count_tasks(s, stripes, 4, n - 1, 1, early), n) << "the limit reached";
        EXPECT_EQ(count_tasks(s, stripes, 4, n / 2, 1, early), n / 2 + 1) << "stopped past it";
      }
    }
  }
}

}  // namespace
}  // namespace stripesolve::scheduler
