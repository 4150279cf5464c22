#include "engine/job_arena.h"

#include <sys/mman.h>

#include <cassert>
#include <cstring>

namespace delayq::engine {

Result<std::unique_ptr<JobArena>> JobArena::Create(size_t reserve_bytes) {
  size_t size = reserve_bytes < kPageBytes ? kPageBytes : reserve_bytes;
  if (size > kMaxReserveBytes) size = kMaxReserveBytes;
  size = (size + kPageBytes - 1) / kPageBytes * kPageBytes;
  // Where the kernel refuses a large reservation (strict overcommit), settle
  // for a smaller one rather than not starting.
  for (;;) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      return std::unique_ptr<JobArena>(new JobArena(static_cast<char*>(p), size));
    }
    if (size <= kPageBytes * 16) break;
    size = size / 2 / kPageBytes * kPageBytes;
  }
  return Unavailable("job arena: cannot reserve address space");
}

JobArena::~JobArena() { munmap(base_, reserved_); }

uint32_t JobArena::Allocate(size_t bytes) {
  assert(bytes > 0 && bytes <= kMaxRecordBytes);
  const size_t units = (bytes + kUnit - 1) / kUnit;
  SizeClass& c = classes_[units];
  if (c.free_head != 0) {
    uint32_t h = c.free_head;
    std::memcpy(&c.free_head, Ptr(h), sizeof(uint32_t));
    return h;
  }
  if (c.bump + units > c.bump_end) {
    // Page 0 starts at unit 0, which is the null handle: start it at unit 1.
    if ((next_page_ + 1) * kPageBytes > reserved_) return 0;
    const size_t first = next_page_ * kPageBytes / kUnit;
    c.bump = static_cast<uint32_t>(first == 0 ? 1 : first);
    c.bump_end = static_cast<uint32_t>(first + kPageBytes / kUnit);
    ++next_page_;
    page_units_.push_back(static_cast<uint16_t>(units));
  }
  uint32_t h = c.bump;
  c.bump += static_cast<uint32_t>(units);
  return h;
}

bool JobArena::IsSlotStart(uint32_t handle) const {
  constexpr size_t kUnitsPerPage = kPageBytes / kUnit;
  size_t page = handle / kUnitsPerPage;
  if (handle == 0 || page >= next_page_) return false;
  size_t first = page == 0 ? 1 : 0;  // page 0 skips the null handle
  size_t offset = handle % kUnitsPerPage - first;
  size_t units = page_units_[page];
  return offset % units == 0 && offset + units <= kUnitsPerPage - first;
}

void JobArena::Free(uint32_t handle, size_t bytes) {
  const size_t units = (bytes + kUnit - 1) / kUnit;
  SizeClass& c = classes_[units];
  std::memcpy(Ptr(handle), &c.free_head, sizeof(uint32_t));
  c.free_head = handle;
}

}  // namespace delayq::engine
