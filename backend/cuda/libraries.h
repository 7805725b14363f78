// cuBLAS and cuSOLVER, opened at run time (dlopen) by the first device engine, not linked.
//
// Linked, they were loaded into every process that holds the backend: libcublasLt's relocations
// and static data, and libcusolver's libcusparse and libnvJitLink, cost each such process about
// 0.5 s and 250 MB of resident memory at start-up, on hosts without a GPU too (the daemon idled
// at 200 MB; each of the 371 test cases in binaries that hold the backend started in 0.5 s).
// Now a process pays that only when it opens a device engine.
//
// The table holds the functions the lanes call (lane.cc, lane_factor.cc, lane_substitute.cc),
// typed from the toolkit's own declarations, so a signature that changes fails to compile.
//
// Thread-safety: load_cuda_libraries() may be called from any thread (the first call opens, the
// others wait for it); the table is immutable once loaded and never unloaded.
#pragma once

#include <string>

#include <cublas_v2.h>
#include <cusolverDn.h>

#include "base/status.h"

namespace stripesolve::backend::cuda {

struct CudaLibraries {
  decltype(&cublasCreate_v2) blas_create;
  decltype(&cublasDestroy_v2) blas_destroy;
  decltype(&cublasSetStream_v2) blas_set_stream;
  decltype(&cublasGetStatusName) blas_status_name;
  decltype(&cublasGetStatusString) blas_status_string;
  decltype(&cublasDgemm_v2) dgemm;
  decltype(&cublasDtrsm_v2) dtrsm;
  decltype(&cublasDgeam) dgeam;
  decltype(&cusolverDnCreate) solver_create;
  decltype(&cusolverDnDestroy) solver_destroy;
  decltype(&cusolverDnSetStream) solver_set_stream;
  decltype(&cusolverDnDgetrf_bufferSize) dgetrf_buffer_size;
  decltype(&cusolverDnDgetrf) dgetrf;
};

// Opens libcublas.so.<major> and libcusolver.so.<major> of the toolkit this was built with (by
// the run path, then from the toolkit's library folder) and finds every function of the table.
// Failure (a library or a function missing) is kUnavailable naming which, and is returned again
// by every later call.
Result<const CudaLibraries*> load_cuda_libraries();

// One library by its soname: through the run path and the loader's folders, else from the
// toolkit's library folder at build time. kUnavailable naming both tries and dlerror's reasons.
Result<void*> open_cuda_library(const std::string& soname);

// The table; load_cuda_libraries() must have succeeded (DeviceEngine::open makes sure of it
// before any lane exists).
const CudaLibraries& cuda_libraries();

}  // namespace stripesolve::backend::cuda
