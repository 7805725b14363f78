// A DeviceEngine whose "device" is host memory and whose arithmetic is the CPU backend's
// (OpenBLAS + LAPACKE): the GPU tier's roles, device tier and copies run and are tested on a
// machine without a GPU (CI), the way LevelDB tests its Env through an in-memory one. It keeps
// the CUDA engine's contract (backend/device_engine.h) to the letter: the same swap and
// permutation outputs, the same errors; only the speed differs.
//
// Thread-safety: as the CUDA engine: each lane belongs to one thread; allocate/release are safe
// from any thread.
#pragma once

#include <memory>

#include "backend/device_engine.h"

namespace stripesolve::backend {

struct HostEngineOptions {
  // register_host fails, as cudaHostRegister does where the OS will not lock the memory.
  bool refuse_pinning = false;
};

std::unique_ptr<DeviceEngine> make_host_device_engine(HostEngineOptions options = {});

}  // namespace stripesolve::backend
