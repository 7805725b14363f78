// CK(call): the standalone CUDA benches' check of a CUDA runtime, driver, cuBLAS or cuSOLVER call
// (any whose status is 0 on success): on failure, prints file:line, the call and its status, and
// exits 1. A bench has nothing to recover, so it stops at the first failure.
#pragma once

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                         \
  do {                                                                                \
    auto e_ = (x);                                                                    \
    if (static_cast<int>(e_) != 0) {                                                  \
      std::fprintf(stderr, "%s:%d %s failed: %d\n", __FILE__, __LINE__, #x, (int)e_); \
      std::exit(1);                                                                   \
    }                                                                                 \
  } while (0)
