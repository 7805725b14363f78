// cuBLAS and cuSOLVER opened at run time (libraries.h): not in the process until asked for, then
// every function of the table found. Needs the CUDA toolkit's libraries, not a device.
#include "backend/cuda/libraries.h"

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace stripesolve::backend::cuda {
namespace {

bool mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::stringstream text;
  text << maps.rdbuf();
  return text.str().find(name) != std::string::npos;
}

// First in the file: in a run of the whole binary nothing has opened them yet.
TEST(CudaLibraries, AreOpenedOnlyWhenAskedForAndHaveEveryFunction) {
  EXPECT_FALSE(mapped("libcublas")) << "cuBLAS was loaded at start-up";
  EXPECT_FALSE(mapped("libcusolver")) << "cuSOLVER was loaded at start-up";
  const Result<const CudaLibraries*> loaded = load_cuda_libraries();
  ASSERT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  EXPECT_TRUE(mapped("libcublasLt"));
  EXPECT_TRUE(mapped("libcusolver"));
  const CudaLibraries& t = *loaded.value();
  for (const void* f :
       {reinterpret_cast<const void*>(t.blas_create), reinterpret_cast<const void*>(t.blas_destroy),
        reinterpret_cast<const void*>(t.blas_set_stream),
        reinterpret_cast<const void*>(t.blas_status_name),
        reinterpret_cast<const void*>(t.blas_status_string), reinterpret_cast<const void*>(t.dgemm),
        reinterpret_cast<const void*>(t.dtrsm), reinterpret_cast<const void*>(t.dgeam),
        reinterpret_cast<const void*>(t.solver_create),
        reinterpret_cast<const void*>(t.solver_destroy),
        reinterpret_cast<const void*>(t.solver_set_stream),
        reinterpret_cast<const void*>(t.dgetrf_buffer_size),
        reinterpret_cast<const void*>(t.dgetrf)}) {
    EXPECT_NE(f, nullptr);
  }
  // Calls that need no device: the table's functions are the libraries'.
  EXPECT_STREQ(t.blas_status_name(CUBLAS_STATUS_NOT_INITIALIZED), "CUBLAS_STATUS_NOT_INITIALIZED");
  EXPECT_EQ(&cuda_libraries(), loaded.value());
  EXPECT_EQ(load_cuda_libraries().value(), loaded.value());  // opened once
}

TEST(CudaLibraries, AMissingLibraryIsNamedWithBothPlacesTried) {
  const Result<void*> missing = open_cuda_library("libstripesolve-no-such-library.so.1");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kUnavailable);
  const std::string& m = missing.status().message();
  EXPECT_EQ(m.rfind("cannot open libstripesolve-no-such-library.so.1 (the CUDA toolkit's, needed "
                    "for the GPU tier): ",
                    0),
            0u)
      << m;
  EXPECT_NE(m.find(std::string("nor ") + STRIPESOLVE_CUDA_LIBRARY_DIR +
                   "/libstripesolve-no-such-library.so.1: "),
            std::string::npos)
      << m;
}

}  // namespace
}  // namespace stripesolve::backend::cuda
