// Status, Result<T> and the stable code names of SPEC §5.
#include "delayq/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <utility>

namespace delayq {
namespace {

TEST(Status, DefaultIsOkWithEmptyMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), Code::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "ok");
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(Status, ErrorKeepsCodeAndMessage) {
  Status s(Code::kNotFound, "job 'x' does not exist");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.message(), "job 'x' does not exist");
  EXPECT_EQ(s.ToString(), "not_found: job 'x' does not exist");
}

TEST(Status, HelpersProduceTheirCodes) {
  EXPECT_EQ(InvalidArgument("m").code(), Code::kInvalidArgument);
  EXPECT_EQ(NotFound("m").code(), Code::kNotFound);
  EXPECT_EQ(Exists("m").code(), Code::kExists);
  EXPECT_EQ(StaleReceipt("m").code(), Code::kStaleReceipt);
  EXPECT_EQ(NotReserved("m").code(), Code::kNotReserved);
  EXPECT_EQ(TooLarge("m").code(), Code::kTooLarge);
  EXPECT_EQ(Unavailable("m").code(), Code::kUnavailable);
  EXPECT_EQ(Internal("m").code(), Code::kInternal);
  EXPECT_EQ(TooLarge("body too big").message(), "body too big");
}

TEST(Status, CodeNameOfEveryCodeIsStable) {
  EXPECT_EQ(CodeName(Code::kOk), "ok");
  EXPECT_EQ(CodeName(Code::kInvalidArgument), "invalid_argument");
  EXPECT_EQ(CodeName(Code::kNotFound), "not_found");
  EXPECT_EQ(CodeName(Code::kExists), "exists");
  EXPECT_EQ(CodeName(Code::kStaleReceipt), "stale_receipt");
  EXPECT_EQ(CodeName(Code::kNotReserved), "not_reserved");
  EXPECT_EQ(CodeName(Code::kTooLarge), "too_large");
  EXPECT_EQ(CodeName(Code::kUnauthorized), "unauthorized");
  EXPECT_EQ(CodeName(Code::kUnavailable), "unavailable");
  EXPECT_EQ(CodeName(Code::kInternal), "internal");
}

TEST(Status, CodeNumbersNeverChange) {
  // The numeric values appear in logs; renumbering would break them.
  EXPECT_EQ(static_cast<int>(Code::kOk), 0);
  EXPECT_EQ(static_cast<int>(Code::kInvalidArgument), 1);
  EXPECT_EQ(static_cast<int>(Code::kNotFound), 2);
  EXPECT_EQ(static_cast<int>(Code::kExists), 3);
  EXPECT_EQ(static_cast<int>(Code::kStaleReceipt), 4);
  EXPECT_EQ(static_cast<int>(Code::kNotReserved), 5);
  EXPECT_EQ(static_cast<int>(Code::kTooLarge), 6);
  EXPECT_EQ(static_cast<int>(Code::kUnauthorized), 7);
  EXPECT_EQ(static_cast<int>(Code::kUnavailable), 8);
  EXPECT_EQ(static_cast<int>(Code::kInternal), 9);
}

TEST(Status, CodeNamesAreDistinct) {
  std::set<std::string_view> names;
  for (int c = 0; c <= 9; ++c) names.insert(CodeName(static_cast<Code>(c)));
  EXPECT_EQ(names.size(), 10u);
}

TEST(Status, UnknownCodeValueReadsAsInternal) {
  EXPECT_EQ(CodeName(static_cast<Code>(200)), "internal");
}

TEST(Result, HoldsValue) {
  Result<int> r = 42;
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.status().ok());
  EXPECT_EQ(r.status().code(), Code::kOk);
  EXPECT_EQ(r.value(), 42);
  EXPECT_EQ(*r, 42);
  *r = 7;
  EXPECT_EQ(r.value(), 7);
}

TEST(Result, HoldsError) {
  Result<std::string> r = NotFound("nope");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kNotFound);
  EXPECT_EQ(r.status().message(), "nope");
}

TEST(Result, ArrowReachesMembers) {
  Result<std::string> r = std::string("hello");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 5u);
  const Result<std::string>& cr = r;
  EXPECT_EQ(cr->front(), 'h');
  EXPECT_EQ(*cr, "hello");
}

TEST(Result, RvalueValueMovesOut) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 5);
}

Result<int> ParsePositive(int v) {
  if (v <= 0) return InvalidArgument("v: must be > 0");
  return v;
}

TEST(Result, ImplicitConversionsFromValueAndStatusInReturn) {
  EXPECT_TRUE(ParsePositive(3).ok());
  EXPECT_EQ(*ParsePositive(3), 3);
  Result<int> bad = ParsePositive(0);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace delayq
