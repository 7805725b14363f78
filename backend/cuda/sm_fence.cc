// backend/cuda/sm_fence.h: green contexts through the driver entry points the runtime hands out.
#include "backend/cuda/sm_fence.h"

#include <string>

#include <cuda.h>
#include <fmt/format.h>

#include "gpu/cuda/check.h"

namespace stripesolve::backend {
namespace {

// The driver API calls of the green context (engine.gpu_panel_sms), looked up through the
// runtime (cudaGetDriverEntryPointByVersion) instead of linking libcuda: the binaries then
// load on hosts without a driver (CI), where the CUDA engine is never opened.
struct Driver {
  decltype(&cuGetErrorName) get_error_name = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
  decltype(&cuDeviceGetDevResource) get_resource = nullptr;
  decltype(&cuDevSmResourceSplitByCount) split_by_count = nullptr;
  decltype(&cuDevResourceGenerateDesc) generate_desc = nullptr;
  decltype(&cuGreenCtxCreate) green_create = nullptr;
  decltype(&cuGreenCtxDestroy) green_destroy = nullptr;
  decltype(&cuGreenCtxStreamCreate) green_stream_create = nullptr;
};

template <class F>
Status look_up(const char* symbol, F& fn) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e =
      cudaGetDriverEntryPointByVersion(symbol, &p, CUDA_VERSION, cudaEnableDefault, &found);
  if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr) {
    if (e != cudaSuccess) (void)cudaGetLastError();  // not left for the next launch check
    return Status::unavailable(fmt::format(
        "the CUDA driver lacks {} (green contexts, needed by engine.gpu_panel_sms)", symbol));
  }
  fn = reinterpret_cast<F>(p);
  return Status::ok();
}

// The driver's entry points, looked up once (kUnavailable when the driver is too old).
Result<const Driver*> driver() {
  static const Result<Driver> loaded = []() -> Result<Driver> {
    Driver d;
    STRIPESOLVE_RETURN_IF_ERROR(look_up("cuGetErrorName", d.get_error_name));
    STRIPESOLVE_RETURN_IF_ERROR(look_up("cuDeviceGet", d.device_get));
    STRIPESOLVE_RETURN_IF_ERROR(look_up("cuDeviceGetDevResource", d.get_resource));
    STRIPESOLVE_RETURN_IF_ERROR(look_up("cuDevSmResourceSplitByCount", d.split_by_count));
    STRIPESOLVE_RETURN_IF_ERROR(look_up("cuDevResourceGenerateDesc", d.generate_desc));
    STRIPESOLVE_RETURN_IF_ERROR(look_up("cuGreenCtxCreate", d.green_create));
    STRIPESOLVE_RETURN_IF_ERROR(look_up("cuGreenCtxDestroy", d.green_destroy));
    STRIPESOLVE_RETURN_IF_ERROR(look_up("cuGreenCtxStreamCreate", d.green_stream_create));
    return d;
  }();
  if (!loaded.is_ok()) return loaded.status();
  return &*loaded;
}

Status driver_check(CUresult r, const std::string& what) {
  if (r == CUDA_SUCCESS) return Status::ok();
  const char* name = nullptr;
  auto d = driver();
  if (d.is_ok()) (void)(*d)->get_error_name(r, &name);
  return Status::internal(what + ": " +
                          (name != nullptr ? name : std::to_string(static_cast<int>(r))));
}

#define RETURN_DRIVER(expr, what) STRIPESOLVE_RETURN_IF_ERROR(driver_check((expr), (what)))

}  // namespace

Result<std::unique_ptr<SmFence>> SmFence::create(int device, int set_aside) {
  STRIPESOLVE_RETURN_IF_ERROR(gpu::cuda_check(cudaSetDevice(device), "cudaSetDevice"));
  // The green context retains the primary context: make it first.
  STRIPESOLVE_RETURN_IF_ERROR(gpu::cuda_check(cudaFree(nullptr), "primary context"));
  STRIPESOLVE_ASSIGN_OR_RETURN(const Driver* d, driver());
  CUdevice dev = 0;
  RETURN_DRIVER(d->device_get(&dev, device), "cuDeviceGet");
  CUdevResource all{}, part{}, rest{};
  RETURN_DRIVER(d->get_resource(dev, &all, CU_DEV_RESOURCE_TYPE_SM), "SM resource");
  const auto total = static_cast<int>(all.sm.smCount);
  if (set_aside >= total) {
    return Status::invalid_argument(
        fmt::format("engine.gpu_panel_sms = {} leaves the J updates none of the device's {} SMs",
                    set_aside, total));
  }
  unsigned groups = 1;
  RETURN_DRIVER(d->split_by_count(&part, &groups, &all, &rest, 0, static_cast<unsigned>(set_aside)),
                "cuDevSmResourceSplitByCount");
  CUdevResourceDesc desc = nullptr;
  RETURN_DRIVER(d->generate_desc(&desc, &rest, 1), "cuDevResourceGenerateDesc");
  CUgreenCtx context = nullptr;
  RETURN_DRIVER(d->green_create(&context, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM),
                "cuGreenCtxCreate");
  std::unique_ptr<SmFence> fence(new SmFence());
  fence->context_ = context;
  fence->sms_ = static_cast<int>(rest.sm.smCount);
  fence->total_sms_ = total;
  return fence;
}

SmFence::~SmFence() {
  if (context_ != nullptr) (*driver())->green_destroy(static_cast<CUgreenCtx>(context_));
}

Result<cudaStream_t> SmFence::stream(int priority) {
  STRIPESOLVE_ASSIGN_OR_RETURN(const Driver* d, driver());
  CUstream s = nullptr;
  RETURN_DRIVER(d->green_stream_create(&s, static_cast<CUgreenCtx>(context_),
                                       CU_STREAM_NON_BLOCKING, priority),
                "cuGreenCtxStreamCreate");
  return reinterpret_cast<cudaStream_t>(s);
}

}  // namespace stripesolve::backend
