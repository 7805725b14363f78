// Clang's thread-safety attributes (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html) as
// macros: under clang the analysis (-Wthread-safety, scripts/check-threads.sh) checks that every
// member marked GUARDED_BY(mu_) is touched with mu_ held and every REQUIRES(mu_) function is
// called with it; under GCC they expand to nothing. base/mutex.h is the annotated mutex.
#pragma once

#if defined(__clang__)
#define STRIPESOLVE_THREAD_ATTRIBUTE(x) __attribute__((x))
#else
#define STRIPESOLVE_THREAD_ATTRIBUTE(x)
#endif

// A class that is a lock (base/mutex.h's Mutex).
#define CAPABILITY(x) STRIPESOLVE_THREAD_ATTRIBUTE(capability(x))
// An RAII class that holds a lock for its lifetime (MutexLock).
#define SCOPED_CAPABILITY STRIPESOLVE_THREAD_ATTRIBUTE(scoped_lockable)
// A member read and written only with the lock held.
#define GUARDED_BY(x) STRIPESOLVE_THREAD_ATTRIBUTE(guarded_by(x))
// A pointer member whose pointee is read and written only with the lock held.
#define PT_GUARDED_BY(x) STRIPESOLVE_THREAD_ATTRIBUTE(pt_guarded_by(x))
// A function called with the lock held (the `_locked` helpers).
#define REQUIRES(...) STRIPESOLVE_THREAD_ATTRIBUTE(requires_capability(__VA_ARGS__))
// A function called without the lock (it takes it itself).
#define EXCLUDES(...) STRIPESOLVE_THREAD_ATTRIBUTE(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) STRIPESOLVE_THREAD_ATTRIBUTE(acquire_capability(__VA_ARGS__))
#define RELEASE(...) STRIPESOLVE_THREAD_ATTRIBUTE(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) STRIPESOLVE_THREAD_ATTRIBUTE(try_acquire_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) STRIPESOLVE_THREAD_ATTRIBUTE(assert_capability(x))
#define RETURN_CAPABILITY(x) STRIPESOLVE_THREAD_ATTRIBUTE(lock_returned(x))
// Opts one function out, with a comment saying why the analysis cannot follow it.
#define NO_THREAD_SAFETY_ANALYSIS STRIPESOLVE_THREAD_ATTRIBUTE(no_thread_safety_analysis)
