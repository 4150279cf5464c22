// HugePageAllocator: a std::allocator for the engine's big random-access
// tables (the id hash set). Blocks of 2 MiB or more are mapped directly and
// advised MADV_HUGEPAGE: a lookup at ten million jobs lands anywhere in an
// ~80 MiB table, and with 4 KiB pages each one also misses the TLB — which,
// under a hypervisor's nested paging, costs as much again as the cache miss.
// Smaller blocks come from operator new as usual.
//
// Only the table is advised, not the job arena: the arena grows page by page
// on the add path, where a huge-page fault may stall on memory compaction;
// the table is allocated whole, at a rehash that stalls anyway.
#ifndef DELAYQ_ENGINE_HUGE_PAGE_ALLOCATOR_H_
#define DELAYQ_ENGINE_HUGE_PAGE_ALLOCATOR_H_

#include <sys/mman.h>

#include <cstddef>
#include <new>

namespace delayq::engine {

template <typename T>
class HugePageAllocator {
 public:
  using value_type = T;
  static constexpr size_t kHugeBytes = size_t{2} << 20;

  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT(google-explicit-constructor)

  T* allocate(size_t n) {
    size_t bytes = n * sizeof(T);
    if (bytes < kHugeBytes) return static_cast<T*>(::operator new(bytes));
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    madvise(p, bytes, MADV_HUGEPAGE);
    return static_cast<T*>(p);
  }

  void deallocate(T* p, size_t n) {
    size_t bytes = n * sizeof(T);
    if (bytes < kHugeBytes) {
      ::operator delete(p);
    } else {
      munmap(p, bytes);
    }
  }

  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

}  // namespace delayq::engine

#endif  // DELAYQ_ENGINE_HUGE_PAGE_ALLOCATOR_H_
