// The wire encoders: AppendRespDeliveries writes exactly what the field
// table's generic walk (AppendRespValues over kDeliveryFields) writes.
#include "wire/encode.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "resp/writer.h"
#include "wire/fields.h"

namespace delayq::wire {
namespace {

std::string ByTheTable(const std::vector<Delivery>& ds) {
  std::string out;
  resp::AppendArrayHeader(&out, ds.size());
  for (const Delivery& d : ds) AppendRespValues(&out, d, kDeliveryFields);
  return out;
}

std::string Direct(const std::vector<Delivery>& ds, std::string_view before = {}) {
  std::string out;
  out.append(before);
  AppendRespDeliveries(&out, ds);
  return out;
}

TEST(AppendRespDeliveries, MatchesTheFieldTableByteForByte) {
  std::mt19937_64 rng(26);
  auto text = [&](size_t max) {
    std::string s(rng() % (max + 1), 'x');
    for (char& c : s) c = static_cast<char>(rng() % 256);  // bytes, CR and LF included
    return s;
  };
  for (size_t n : {0u, 1u, 2u, 17u, 500u}) {
    std::vector<Delivery> ds(n);
    for (Delivery& d : ds) {
      d.id = text(40);
      d.topic = text(20);
      d.body = text(300);
      d.receipt = text(24);
      d.attempts = static_cast<uint32_t>(rng());
      d.ttr_ms = static_cast<uint32_t>(rng());
      d.priority = static_cast<uint32_t>(rng());
      d.run_at_ms = static_cast<int64_t>(rng());  // either sign
      d.reserved_until_ms = -static_cast<int64_t>(rng() % 1000);
      d.max_attempts = static_cast<uint32_t>(rng() % 3);
    }
    EXPECT_EQ(Direct(ds), ByTheTable(ds)) << n << " deliveries";
  }
}

TEST(AppendRespDeliveries, ExtremeNumbersAndEmptyStrings) {
  std::vector<Delivery> ds(2);
  ds[0].run_at_ms = std::numeric_limits<int64_t>::min();
  ds[0].reserved_until_ms = std::numeric_limits<int64_t>::max();
  ds[0].attempts = std::numeric_limits<uint32_t>::max();
  ds[1].id.assign(1, 'j');
  ds[1].body = std::string(100000, '\0');
  EXPECT_EQ(Direct(ds), ByTheTable(ds));
}

TEST(AppendRespDeliveries, AppendsAfterWhatTheBufferHolds) {
  std::vector<Delivery> ds(1);
  ds[0].id.assign(1, 'a');
  ds[0].receipt.assign(1, 'r');
  std::string want(std::string_view("+OK\r\n"));
  want.append(ByTheTable(ds));
  const std::string got = Direct(ds, "+OK\r\n");
  EXPECT_EQ(got, want);
  EXPECT_EQ(got.compare(0, 13, "+OK\r\n*1\r\n*10\r"), 0);
}

}  // namespace
}  // namespace delayq::wire
