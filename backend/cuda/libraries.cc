// cuBLAS and cuSOLVER opened at run time (libraries.h).
#include "backend/cuda/libraries.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include <fmt/format.h>

namespace stripesolve::backend::cuda {
namespace {

template <typename F>
Status find(void* library, const std::string& soname, const char* name, F& out) {
  void* symbol = dlsym(library, name);
  if (symbol == nullptr) {
    return Status::unavailable(fmt::format("{} has no function {}", soname, name));
  }
  out = reinterpret_cast<F>(symbol);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
  return Status::ok();
}

Result<CudaLibraries> open_all() {
  CudaLibraries t{};
  const std::string blas = fmt::format("libcublas.so.{}", CUBLAS_VER_MAJOR);
  const std::string solver = fmt::format("libcusolver.so.{}", CUSOLVER_VER_MAJOR);
  STRIPESOLVE_ASSIGN_OR_RETURN(void* b, open_cuda_library(blas));
  STRIPESOLVE_RETURN_IF_ERROR(find(b, blas, "cublasCreate_v2", t.blas_create));
  STRIPESOLVE_RETURN_IF_ERROR(find(b, blas, "cublasDestroy_v2", t.blas_destroy));
  STRIPESOLVE_RETURN_IF_ERROR(find(b, blas, "cublasSetStream_v2", t.blas_set_stream));
  STRIPESOLVE_RETURN_IF_ERROR(find(b, blas, "cublasGetStatusName", t.blas_status_name));
  STRIPESOLVE_RETURN_IF_ERROR(find(b, blas, "cublasGetStatusString", t.blas_status_string));
  STRIPESOLVE_RETURN_IF_ERROR(find(b, blas, "cublasDgemm_v2", t.dgemm));
  STRIPESOLVE_RETURN_IF_ERROR(find(b, blas, "cublasDtrsm_v2", t.dtrsm));
  STRIPESOLVE_RETURN_IF_ERROR(find(b, blas, "cublasDgeam", t.dgeam));
  STRIPESOLVE_ASSIGN_OR_RETURN(void* s, open_cuda_library(solver));
  STRIPESOLVE_RETURN_IF_ERROR(find(s, solver, "cusolverDnCreate", t.solver_create));
  STRIPESOLVE_RETURN_IF_ERROR(find(s, solver, "cusolverDnDestroy", t.solver_destroy));
  STRIPESOLVE_RETURN_IF_ERROR(find(s, solver, "cusolverDnSetStream", t.solver_set_stream));
  STRIPESOLVE_RETURN_IF_ERROR(find(s, solver, "cusolverDnDgetrf_bufferSize", t.dgetrf_buffer_size));
  STRIPESOLVE_RETURN_IF_ERROR(find(s, solver, "cusolverDnDgetrf", t.dgetrf));
  return t;
}

// Opened once for the process (never closed: lanes and handles live until its end).
const Result<CudaLibraries>& opened() {
  static const Result<CudaLibraries> libraries = open_all();
  return libraries;
}

}  // namespace

Result<void*> open_cuda_library(const std::string& soname) {
  if (void* handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  const std::string first = dlerror();
  const std::string path = std::string(STRIPESOLVE_CUDA_LIBRARY_DIR) + "/" + soname;
  if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
  return Status::unavailable(
      fmt::format("cannot open {} (the CUDA toolkit's, needed for the GPU tier): {}; nor {}: {}",
                  soname, first, path, dlerror()));
}

Result<const CudaLibraries*> load_cuda_libraries() {
  const Result<CudaLibraries>& libraries = opened();
  if (!libraries.is_ok()) return libraries.status();
  return &libraries.value();
}

const CudaLibraries& cuda_libraries() {
  const Result<CudaLibraries>& libraries = opened();
  if (!libraries.is_ok()) {
    fmt::print(stderr, "stripesolve: the CUDA libraries were used before they loaded: {}\n",
               libraries.status().to_string());
    std::abort();
  }
  return libraries.value();
}

}  // namespace stripesolve::backend::cuda
