#include "daemon/client_mapping.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <utility>

#include <fmt/format.h>

#include "base/mutex.h"

namespace stripesolve::daemon {
namespace {

struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> truncated{false};
};

std::array<Slot, kMaxClientMappings> g_slots;
Mutex g_slots_mu;  // serializes claiming and freeing slots (never taken by the handler)
struct sigaction g_previous {};
std::once_flag g_installed;

void on_sigbus(int signo, siginfo_t* info, void* context) {
  const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  for (Slot& s : g_slots) {
    const uintptr_t begin = s.begin.load(std::memory_order_acquire);
    const uintptr_t end = s.end.load(std::memory_order_acquire);
    if (begin == 0 || addr < begin || addr >= end) continue;
    const uintptr_t from = addr & ~(page - 1);
    // mmap is a plain system call: safe here. The rest of the mapping becomes zero pages.
    void* r = ::mmap(reinterpret_cast<void*>(from), end - from, PROT_READ | PROT_WRITE,
                     MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r != MAP_FAILED) {
      s.truncated.store(true, std::memory_order_release);
      return;
    }
  }
  // Not a client mapping: what would have happened without this handler.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(signo, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
      g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(signo);
    return;
  }
  // The default action: a faulting access is retried and ends the process; a SIGBUS sent by
  // kill() or raise() is sent again.
  ::signal(SIGBUS, SIG_DFL);
  if (info->si_code <= 0) ::raise(signo);
}

void install_handler() {
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, &g_previous);
}

}  // namespace

Result<ClientMapping> ClientMapping::map(int fd, uint64_t length, bool writable) {
  if (length == 0) return Status::invalid_argument("cannot map an empty file");
  std::call_once(g_installed, install_handler);
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  ClientMapping m;
  m.size_ = length;
  m.mapped_ = (length + page - 1) / page * page;
  {
    MutexLock lock(g_slots_mu);
    for (size_t i = 0; i < g_slots.size(); ++i) {
      if (g_slots[i].begin.load() == 0 && g_slots[i].end.load() == 0) {
        m.slot_ = static_cast<int>(i);
        g_slots[i].end.store(1);  // claimed; begin stays 0 until the mapping exists
        break;
      }
    }
  }
  if (m.slot_ < 0) {
    return Status::resource_exhausted(
        fmt::format("{} client files are mapped already", kMaxClientMappings));
  }
  // Inputs are populated up front (their pages are in the page cache: one call maps them all);
  // an output is not, as populating a shared mapping maps its pages read-only and every first
  // write would fault again.
  const int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
  const int flags = writable ? MAP_SHARED : MAP_PRIVATE | MAP_POPULATE;
  void* p = ::mmap(nullptr, m.mapped_, prot, flags, fd, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    m.release();
    return Status::from_errno(err, "mmap");
  }
  m.data_ = static_cast<char*>(p);
  Slot& s = g_slots[static_cast<size_t>(m.slot_)];
  s.truncated.store(false);
  s.end.store(reinterpret_cast<uintptr_t>(p) + m.mapped_, std::memory_order_release);
  s.begin.store(reinterpret_cast<uintptr_t>(p), std::memory_order_release);
  return m;
}

ClientMapping::ClientMapping(ClientMapping&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)),
      slot_(std::exchange(other.slot_, -1)) {}

ClientMapping& ClientMapping::operator=(ClientMapping&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
    slot_ = std::exchange(other.slot_, -1);
  }
  return *this;
}

ClientMapping::~ClientMapping() {
  release();
}

bool ClientMapping::truncated() const {
  return slot_ >= 0 &&
         g_slots[static_cast<size_t>(slot_)].truncated.load(std::memory_order_acquire);
}

void ClientMapping::release() {
  if (slot_ < 0) return;
  Slot& s = g_slots[static_cast<size_t>(slot_)];
  // Forget the range before unmapping it: a fault there is no longer ours to absorb.
  s.begin.store(0, std::memory_order_release);
  if (data_ != nullptr) ::munmap(data_, mapped_);
  {
    MutexLock lock(g_slots_mu);
    s.end.store(0, std::memory_order_release);
    s.truncated.store(false);
  }
  data_ = nullptr;
  slot_ = -1;
}

}  // namespace stripesolve::daemon
