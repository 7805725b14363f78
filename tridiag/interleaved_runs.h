// Interleaved systems (row i of system j at i * count + j) copied into contiguous rows a run of
// consecutive systems at a time, for code that takes a system's rows one after another (the CPU
// solvers and checks, the daemon's check of every result). A run uses each cache line of the
// batch whole: one system at a time used 8 of its 64 bytes, and the CPU solve of 2^24
// interleaved unknowns of 1024 took 5.9x the strided batch's (3.1x less with runs of 8).
// Thread-safety: plain functions; callers give each thread its own `g`.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

namespace stripesolve::tridiag {

// The systems of a run for systems of n rows: 8, fewer where their five arrays would pass 8 MiB.
std::size_t interleaved_run(std::size_t n);

// Systems [first, first + count) of an interleaved batch of `systems` systems of n rows, from
// src = {dl, d, du, f, x} (x null: not gathered, its rows only sized), into g: array k of run
// system b at g[k][b * n].
void gather_run(std::size_t n, std::size_t systems, const std::array<const double*, 5>& src,
                std::size_t first, std::size_t count, std::array<std::vector<double>, 5>& g);

// The run's x (g[4]) back into the batch's x.
void scatter_run_x(std::size_t n, std::size_t systems, double* x, std::size_t first,
                   std::size_t count, const std::array<std::vector<double>, 5>& g);

}  // namespace stripesolve::tridiag
