#include "scheduler/work_queue.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace stripesolve::scheduler {
namespace {

auto all = [](int) { return true; };

TEST(WorkQueue, LowestRankFirstOldestOnTies) {
  WorkQueue<int> q;
  for (int v : {30, 11, 20, 12, 31}) q.push(v);
  auto tens = [](int v) { return v / 10; };  // 11 and 12 rank 1, 20 rank 2, 30 and 31 rank 3
  std::vector<int> got;
  while (got.size() < 5) got.push_back(*q.pop(all, tens));
  EXPECT_EQ(got, (std::vector<int>{11, 12, 20, 30, 31}));
}

TEST(WorkQueue, AConsumerWaitsForAnItemItMayTake) {
  WorkQueue<int> q;
  q.push(1);  // odd: not for the even consumer
  std::atomic<int> taken{-1};
  std::thread even([&] {
    auto v = q.pop([](int x) { return x % 2 == 0; }, [](int) { return 0; });
    taken = v ? *v : -2;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(taken.load(), -1) << "took an item it may not";
  q.push(4);
  even.join();
  EXPECT_EQ(taken.load(), 4);
  EXPECT_EQ(*q.pop(), 1);  // the odd one is still there for others
}

TEST(WorkQueue, CloseEndsConsumersWithNothingLeftForThem) {
  WorkQueue<int> q;
  q.push(3);
  std::thread even([&] {
    EXPECT_FALSE(q.pop([](int x) { return x % 2 == 0; }, [](int) { return 0; }).has_value());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  q.close();
  even.join();
  EXPECT_EQ(*q.pop(), 3);  // closed queues still drain
  EXPECT_FALSE(q.pop().has_value());
}

}  // namespace
}  // namespace stripesolve::scheduler
