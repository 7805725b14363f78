// A warp of the GPU kernels' warp policy (tridiag/cuda/warp_solves.h, group_solve.h) on the CPU,
// for tests: the 32 lanes are 32 threads, __syncwarp a barrier, a shuffle or the warp maximum an
// exchange through memory between two barriers.
#pragma once

#include <algorithm>
#include <barrier>
#include <thread>
#include <vector>

namespace stripesolve::tridiag {

struct EmulatedWarp {
  std::barrier<>* bar;
  unsigned* keys;  // 32 slots, for max_each
  double* values;  // 32 slots, for up and down
  int lane;
  void sync() { bar->arrive_and_wait(); }
  template <int N>
  void max_each(unsigned (&v)[N]) {
    for (unsigned& x : v) {
      keys[lane] = x;
      sync();
      for (int k = 0; k < 32; ++k) x = std::max(x, keys[k]);
      sync();
    }
  }
  // Lane `from`'s v, or the caller's own where `from` is outside the warp (as __shfl_*_sync).
  double exchange(double v, int from) {
    values[lane] = v;
    sync();
    const double r = from >= 0 && from < 32 ? values[from] : v;
    sync();
    return r;
  }
  double up(double v, int k) { return exchange(v, lane - k); }
  double down(double v, int k) { return exchange(v, lane + k); }
};

// Runs solve(lane, warp) on 32 threads; returns the smallest row any lane reported, or -1.
template <typename Solve>
int run_on_emulated_warp(Solve&& solve) {
  std::barrier<> bar(32);
  unsigned keys[32];
  double values[32];
  int bad[32];
  std::vector<std::thread> lanes;
  for (int lane = 0; lane < 32; ++lane) {
    lanes.emplace_back([&, lane] {
      EmulatedWarp warp{&bar, keys, values, lane};
      bad[lane] = solve(lane, warp);
    });
  }
  for (auto& t : lanes) t.join();
  int first = -1;
  for (int b : bad) {
    if (b >= 0 && (first < 0 || b < first)) first = b;
  }
  return first;
}

}  // namespace stripesolve::tridiag
