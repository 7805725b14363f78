# Switches CUDA on when a CUDA compiler is found, unless STRIPESOLVE_ENABLE_CUDA is OFF.
# Sets STRIPESOLVE_HAVE_CUDA. Targets Hopper (sm_90, H100/H200) plus PTX for later GPUs.
set(STRIPESOLVE_HAVE_CUDA OFF)
set(STRIPESOLVE_MIN_CUDA_VERSION 12.0 CACHE STRING "The oldest CUDA toolkit the GPU backend builds with")
if(STRIPESOLVE_ENABLE_CUDA AND NOT STRIPESOLVE_SANITIZE)
  # Debian and NVIDIA's installer put nvcc in /usr/local/cuda/bin, often not on PATH.
  if(NOT DEFINED ENV{CUDACXX} AND NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # The device code is C++20 and uses sm_90's integer instructions (__viaddmax_u32): CUDA 12
    # at least. An older toolkit (Debian 12's nvidia-cuda-toolkit is 11.8) builds the CPU backend;
    # asked before enable_language, whose compiler check an old nvcc may not pass.
    execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --version OUTPUT_VARIABLE nvcc_version
                    ERROR_QUIET)
    string(REGEX MATCH "release ([0-9]+\\.[0-9]+)" nvcc_release "${nvcc_version}")
    if(NOT CMAKE_MATCH_1 OR CMAKE_MATCH_1 VERSION_LESS STRIPESOLVE_MIN_CUDA_VERSION)
      message(WARNING "stripesolve: ${CMAKE_CUDA_COMPILER} is CUDA '${CMAKE_MATCH_1}', not "
                      "${STRIPESOLVE_MIN_CUDA_VERSION} or newer: building the CPU backend only "
                      "(point CUDACXX at a newer nvcc for the GPU backend)")
      return()
    endif()
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90-real 90-virtual)
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(STRIPESOLVE_HAVE_CUDA ON)
  else()
    message(STATUS "stripesolve: no CUDA compiler found, building the CPU backend only")
  endif()
endif()
