// Elimination strategies of the out-of-core stripe Gauss algorithm (002 §8.4, Fig 20) as pure
// functions: (N stripes, meta-stripe size S^m) -> the ordered list of tasks the master role walks.
//
// A task is either "eliminate stripe I by itself" (<II>, <IK>) or "update stripe J by the
// eliminated stripes [I0, I1)" (<JI>, <JK> for each I in order). Every list produced here has the
// properties the scheduler relies on (tested in strategy_test.cc):
//   - each pair (J, I < J) is covered by exactly one update task;
//   - an update of J by [I0, I1) comes after the elimination of every I in [I0, I1) and after the
//     update of J by every I' < I0;
//   - the elimination of I comes after every update of I (by all I' < I).
// So a consumer that starts tasks in list order and lets each task wait only for tasks earlier in
// the list never deadlocks.
//
// predict_traffic() replays a list against a sequential model of the cache (cache/ policy: stuck I
// stripes, longest-idle eviction, write-back of dirty parts only) to predict the SSD bytes a
// strategy moves for a given RAM budget; the planner's dry run and the benchmark report it.
//
// Thread-safety: pure functions on values.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace stripesolve::scheduler {

enum class Strategy { kBasic, kZigzag, kMetaZigzag };  // 002 §8.4 Fig 20; default kMetaZigzag

std::string_view strategy_name(Strategy s);              // "basic", "zigzag", "meta_zigzag"
Result<Strategy> parse_strategy(std::string_view name);  // inverse of strategy_name

struct Task {
  enum class Kind { kEliminate, kUpdate };
  Kind kind = Kind::kEliminate;
  int64_t stripe = 0;   // I for kEliminate, J for kUpdate
  int64_t i_begin = 0;  // kUpdate: J is updated by the eliminated stripes [i_begin, i_end)
  int64_t i_end = 0;    // kEliminate: i_begin = I, i_end = I + 1

  static Task eliminate(int64_t i) { return {Kind::kEliminate, i, i, i + 1}; }
  static Task update(int64_t j, int64_t i0, int64_t i1) { return {Kind::kUpdate, j, i0, i1}; }
  friend bool operator==(const Task&, const Task&) = default;
};

// "E3" or "U5<[2,4)" (for test messages and the dry run).
std::string to_string(const Task& t);
std::string to_string(const std::vector<Task>& tasks);

// 002 Eq 9: N^m = ceil(N / S^m); meta-stripe I^m holds stripes [I^m*N/N^m, (I^m+1)*N/N^m).
int64_t meta_stripe_count(int64_t stripes, int64_t meta_stripes);
// The meta-stripe of every stripe under `strategy` (each stripe its own for basic and zigzag).
std::vector<int64_t> meta_stripe_of(Strategy strategy, int64_t stripes, int64_t meta_stripes);

// Whether update `t` is on the critical path: its J lies in the meta-stripe of the stripe right
// after its range (`meta_of` as meta_stripe_of() gives it), the one eliminated next; or J lies in
// the meta-stripe after I's and is updated by I alone (make_tasks' early_next).
inline bool updates_next_meta_stripe(const std::vector<int64_t>& meta_of, const Task& t) {
  const int64_t meta_j = meta_of[static_cast<size_t>(t.stripe)];
  const bool early =
      t.i_end - t.i_begin == 1 && meta_j == meta_of[static_cast<size_t>(t.i_begin)] + 1;
  return meta_j == meta_of[static_cast<size_t>(t.i_end)] || early;
}

// The task list of `strategy` for `stripes` >= 1 stripes; `meta_stripes` (S^m >= 1) is used by
// kMetaZigzag only (S^m = 1 gives the zigzag order). The list has about N^2 / 2 tasks.
//
// `upward_lead` (kMetaZigzag): where an upward sweep (odd I^m, J from the last stripe back)
// visits the next meta-stripe, whose eliminations wait for its updates. -1 (or >= stripes): last,
// as in 002 Fig 20, so the eliminations run alone after the sweep. L >= 0: right after the
// sweep's first L stripes (those the downward sweep before it left cached), so that they overlap
// the rest of the sweep; the other stripes keep their upward order, the next meta-stripe's
// stripes go top to bottom.
//
// `early_next` (kMetaZigzag; the GPU tier): the next meta-stripe's first `early_next` stripes
// are updated by each stripe of the current one right after its elimination (K = S, beside the
// meta-stripe's own updates) instead of by the whole range after the last (K = S^m S), and the
// sweep leaves them out. Their eliminations, the next links of the chain, then wait only for the
// updates by the last stripe: on two H200s (n = 57344) the range's update at each meta-stripe
// boundary held the chain 20-90 ms, beside the sweep that starts there.
std::vector<Task> make_tasks(Strategy strategy, int64_t stripes, int64_t meta_stripes,
                             int64_t upward_lead = -1, int64_t early_next = 0);
// The same tasks in the same order, handed to `visit` one at a time instead of stored (memory
// O(1)); stops at the first error `visit` returns and returns it.
Status for_each_task(Strategy strategy, int64_t stripes, int64_t meta_stripes,
                     const std::function<Status(const Task&)>& visit, int64_t upward_lead = -1,
                     int64_t early_next = 0);

// How many tasks for_each_task() visits, counting no further than `limit` (then limit + 1):
// what make_tasks() would store, without storing it.
int64_t count_tasks(Strategy strategy, int64_t stripes, int64_t meta_stripes, int64_t limit,
                    int64_t upward_lead = -1, int64_t early_next = 0);

// Checks the properties above; returns an internal error naming the first violated one.
Status check_tasks(const std::vector<Task>& tasks, int64_t stripes);

struct TrafficModel {
  int64_t n = 0;            // matrix order
  int64_t stripes = 0;      // N (stripe I holds rows [I*n/N, (I+1)*n/N), 002 Eq 3)
  uint64_t ram_budget = 0;  // bytes of stripe parts the cache may hold at once
  // The CPU tier's master (scheduler/master_walk.cc): the stripes of the next elimination's
  // meta-stripe are evicted last. Only predict_traffic(strategy, ...) models it.
  bool spare_next_meta_stripe = false;
  // false: the solve keeps no factors, so the parts still cached at the end are not written
  // (the final flush); evicted dirty parts still are (the spills of a cache smaller than A).
  bool factors_kept = true;
};

struct Traffic {
  uint64_t bytes_read = 0;     // downloads of stripe parts (SSD -> RAM)
  uint64_t bytes_written = 0;  // uploads of dirty parts, including the final flush
  uint64_t hits = 0;           // parts a task found in the cache
  uint64_t misses = 0;         // parts a task had to download
  uint64_t matrix_bytes = 0;   // 8 n^2, to express traffic as a multiple of the matrix size
};

// Replays `tasks` (factorization only) against the sequential cache model. Fails with
// kResourceExhausted when the budget cannot hold the stripes a task needs at once (the stuck I
// stripes of its range plus the J stripe): the real engine would stall.
Result<Traffic> predict_traffic(const std::vector<Task>& tasks, const TrafficModel& model);
// The same for the tasks of make_tasks(strategy, model.stripes, meta_stripes), generated as they
// are replayed: memory O(N) (the cache model), not O(N^2) (the planner's forecasts, issue 15).
Result<Traffic> predict_traffic(Strategy strategy, int64_t meta_stripes, const TrafficModel& model,
                                int64_t upward_lead = -1, int64_t early_next = 0);

}  // namespace stripesolve::scheduler
