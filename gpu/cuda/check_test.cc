// gpu/cuda/check.h: which errors mark a device failed (no kernel runs: the codes are passed in).
#include "gpu/cuda/check.h"

#include <gtest/gtest.h>

#include "gpu/devices.h"

namespace stripesolve::gpu {
namespace {

TEST(CudaCheck, AStickyErrorMarksTheCurrentDeviceFailedAndSaysSo) {
  const ScopedDeviceFailuresForTesting clean;
  const Status plain = cuda_check(cudaErrorInvalidValue, "cudaMemcpyAsync");
  EXPECT_EQ(plain.code(), StatusCode::kInternal);
  EXPECT_NE(plain.message().find("cudaMemcpyAsync: cudaErrorInvalidValue"), std::string::npos);
  EXPECT_TRUE(device_failures().empty()) << "an ordinary error leaves the device usable";
  EXPECT_EQ(cuda_check(cudaErrorMemoryAllocation, "cudaMalloc").code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(device_failures().empty());

  const Status sticky = cuda_check(cudaErrorIllegalAddress, "cudaStreamSynchronize");
  EXPECT_EQ(sticky.code(), StatusCode::kInternal);
  EXPECT_NE(sticky.message().find("cudaErrorIllegalAddress"), std::string::npos);
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    GTEST_SKIP() << "no CUDA device here: the error cannot be tied to one";
  }
  ASSERT_EQ(device_failures().size(), 1u);
  EXPECT_EQ(device_failures()[0].device, device);
  EXPECT_NE(device_failure(device).find("cudaStreamSynchronize: cudaErrorIllegalAddress"),
            std::string::npos);
  EXPECT_NE(sticky.message().find("unusable until the daemon restarts"), std::string::npos);
}

// CUDA keeps a failed call's error for the thread's next cudaGetLastError: once cuda_check has
// made it a Status, the next launch check must not blame its kernel for it
// (GpuDenseTest.ResidualOnTheDevicesCopyOfA failed so, after a test's refused copy).
TEST(CudaCheck, AHandledErrorIsNotLeftForTheNextLaunchCheck) {
  if (device_count() == 0) GTEST_SKIP() << "no CUDA device here: no call can fail on one";
  double host = 0;
  const cudaError_t err =
      cudaMemcpy(&host, &host, sizeof host, static_cast<cudaMemcpyKind>(42));  // no such kind
  ASSERT_NE(err, cudaSuccess);
  const Status handled = cuda_check(err, "cudaMemcpy");
  EXPECT_FALSE(handled.is_ok());
  EXPECT_NE(handled.message().find("cudaMemcpy: "), std::string::npos) << handled.to_string();
  EXPECT_TRUE(launch_check("the next kernel").is_ok());
}

TEST(CudaCheck, TheStickyErrorsAreThoseCudaDocumentsSo) {
  for (cudaError_t e : {cudaErrorIllegalAddress, cudaErrorLaunchFailure, cudaErrorAssert,
                        cudaErrorMisalignedAddress, cudaErrorLaunchTimeout}) {
    EXPECT_TRUE(sticky_error(e)) << cudaGetErrorName(e);
  }
  for (cudaError_t e : {cudaErrorInvalidValue, cudaErrorMemoryAllocation, cudaErrorNotReady,
                        cudaErrorLaunchOutOfResources, cudaErrorNoDevice}) {
    EXPECT_FALSE(sticky_error(e)) << cudaGetErrorName(e);
  }
}

}  // namespace
}  // namespace stripesolve::gpu
