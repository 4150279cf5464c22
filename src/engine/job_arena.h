// JobArena: the memory every job record lives in, addressed by 32-bit handles.
//
// Why not one malloc per job: SPEC §12 allows 180 bytes per pending job with a
// 100-byte body. glibc rounds a 156-byte request up to a 176-byte chunk and
// the indexes would then hold 8-byte pointers. Here a record costs its size
// rounded up to 8 bytes, and every index (the id hash set, the delay and ready
// heaps) stores a 4-byte handle instead of a pointer.
//
// How: one large virtual reservation (MAP_NORESERVE: only touched pages cost
// memory) is cut into 64 KiB pages; each page serves one size class (a
// multiple of 8 bytes up to kMaxRecordBytes). Freed slots go on their class's
// free list, threaded through the slots themselves. A handle is the record's
// offset from the base in 8-byte units, so 2^32 handles address 32 GiB.
//
// Trade-off: memory of freed records is reused by later records of the same
// size class but not returned to the OS, and a page never changes class.
//
// Thread-safety: none; owned by one Engine.
#ifndef DELAYQ_ENGINE_JOB_ARENA_H_
#define DELAYQ_ENGINE_JOB_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "delayq/status.h"

namespace delayq::engine {

class JobArena {
 public:
  static constexpr size_t kUnit = 8;
  static constexpr size_t kMaxRecordBytes = 4096;
  static constexpr size_t kPageBytes = 64 * 1024;
  static constexpr size_t kMaxReserveBytes = size_t{1} << 35;  // 2^32 units of 8 bytes

  // Reserves `reserve_bytes` of address space (capped at kMaxReserveBytes).
  // Errors: kUnavailable if the address space cannot be reserved.
  static Result<std::unique_ptr<JobArena>> Create(size_t reserve_bytes);
  ~JobArena();
  JobArena(const JobArena&) = delete;
  JobArena& operator=(const JobArena&) = delete;

  // Returns the handle of a new record of `bytes` (1..kMaxRecordBytes), never
  // 0, or 0 when the reservation is exhausted.
  uint32_t Allocate(size_t bytes);
  // REQUIRES: handle came from Allocate(bytes) with the same `bytes`.
  void Free(uint32_t handle, size_t bytes);

  char* Ptr(uint32_t handle) const { return base_ + size_t{handle} * kUnit; }

  // True if `handle` is where a slot starts in a page handed out so far (the
  // slot may be free). Lets a handle that came from outside — a generated id
  // sent by a client — be checked before it is dereferenced.
  bool IsSlotStart(uint32_t handle) const;

  // Bytes of pages handed to size classes so far.
  size_t used_page_bytes() const { return next_page_ * kPageBytes; }

 private:
  static constexpr size_t kClasses = kMaxRecordBytes / kUnit + 1;

  JobArena(char* base, size_t reserved) : base_(base), reserved_(reserved) {}

  struct SizeClass {
    uint32_t free_head = 0;  // first free slot, 0 = none
    uint32_t bump = 0;       // next never-used slot in the current page
    uint32_t bump_end = 0;   // end of the current page (exclusive), in units
  };

  char* base_;
  size_t reserved_;
  size_t next_page_ = 0;
  std::vector<uint16_t> page_units_;  // slot size of each page handed out, in units
  SizeClass classes_[kClasses];
};

}  // namespace delayq::engine

#endif  // DELAYQ_ENGINE_JOB_ARENA_H_
