// Redis Cluster key slots: which of the 16384 slots a key belongs to, as in
// the Redis Cluster specification ("Keys distribution model"):
//
//   slot = CRC16(k) mod 16384
//
// where CRC16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0, no
// reflection, no final xor; check value CRC16("123456789") = 0x31C3) and k
// is the key's hash tag when it has one, else the whole key. The hash tag is
// the text between the first '{' and the first '}' after it, if that text is
// non-empty: "{user1000}.following" and "{user1000}.followers" share a slot;
// "{}x" and "x{}" hash whole; "{a}{b}" hashes "a"; "a{{b}}" hashes "{b".
//
// Thread-safety: pure functions.
#ifndef DELAYQ_REDIS_SLOT_H_
#define DELAYQ_REDIS_SLOT_H_

#include <cstdint>
#include <string_view>

namespace delayq::redis {

inline constexpr int kClusterSlots = 16384;

// CRC-16/XMODEM of `data`.
uint16_t Crc16(std::string_view data);

// The part of `key` that is hashed: its non-empty hash tag, or all of it.
std::string_view HashTag(std::string_view key);

// The cluster slot of `key`, in [0, 16384).
int KeySlot(std::string_view key);

}  // namespace delayq::redis

#endif  // DELAYQ_REDIS_SLOT_H_
