#include "storage/engine_select.h"

#include "base/logging.h"
#include "storage/pread_engine.h"
#if STRIPESOLVE_HAVE_URING
#include "storage/uring_engine.h"
#endif

namespace stripesolve::storage {

Status io_uring_usable() {
#if STRIPESOLVE_HAVE_URING
  return UringEngine::probe();
#else
  return Status::unimplemented("io_uring: this build has no liburing");
#endif
}

Result<std::shared_ptr<IoEngine>> make_io_engine(const StoreConfig& config, Status (*probe)()) {
  if (config.io_engine == "pread")
    return std::shared_ptr<IoEngine>(std::make_shared<PreadEngine>());
  if (config.io_engine != "io_uring" && config.io_engine != "auto") {
    return Status::invalid_argument("unknown io_engine '" + config.io_engine +
                                    "' (expected auto, io_uring or pread)");
  }
  Status usable = probe();
#if STRIPESOLVE_HAVE_URING
  if (usable.is_ok()) {
    return std::shared_ptr<IoEngine>(
        std::make_shared<UringEngine>(static_cast<unsigned>(config.queue_depth),
                                      config.request_bytes, config.write_request_bytes));
  }
#endif
  if (config.io_engine == "io_uring") {
    return Status::unavailable("io_engine io_uring was configured but is not usable: " +
                               usable.message());
  }
  logger("storage")->warn("io_uring is not usable ({}); using the pread engine", usable.message());
  return std::shared_ptr<IoEngine>(std::make_shared<PreadEngine>());
}

}  // namespace stripesolve::storage
