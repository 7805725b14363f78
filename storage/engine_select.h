// Choosing the I/O engine from the store configuration.
//
// io_engine "pread" -> PreadEngine; "io_uring" -> UringEngine or an error if io_uring cannot be
// set up here; "auto" -> UringEngine when io_uring works (built with liburing and a test ring can
// be created: it fails under seccomp filters, kernel.io_uring_disabled=2 or old kernels), else
// PreadEngine, logging why.
//
// Thread-safety: make_io_engine may be called from any thread.
#pragma once

#include <memory>

#include "base/status.h"
#include "storage/io_engine.h"
#include "storage/store_config.h"

namespace stripesolve::storage {

// OK when an io_uring ring can be created in this process; else why not.
Status io_uring_usable();

// `probe` decides whether io_uring is usable (tests pass one that says no).
Result<std::shared_ptr<IoEngine>> make_io_engine(const StoreConfig& config,
                                                 Status (*probe)() = io_uring_usable);

}  // namespace stripesolve::storage
