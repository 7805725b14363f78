// The CUDA error check of gpu/cuda/check.h under the name tridiag/cuda's kernels use.
#pragma once

#include "gpu/cuda/check.h"

namespace stripesolve::tridiag::gpu {

using ::stripesolve::gpu::cuda_check;

}  // namespace stripesolve::tridiag::gpu
