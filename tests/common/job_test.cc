// Job validation (SPEC §3) and the state names of SPEC §4.
#include "delayq/job.h"

#include <gtest/gtest.h>

#include <string>

namespace delayq {
namespace {

JobSpec ValidSpec() {
  JobSpec spec;
  spec.topic = "orders.close";
  spec.id = "order-1";
  spec.body = "hello";
  return spec;
}

// Expects kInvalidArgument whose message names `field`.
void ExpectInvalid(const Status& s, const std::string& field) {
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(field), std::string::npos)
      << "message does not name '" << field << "': " << s.message();
}

TEST(ValidateJobSpec, ValidSpecPasses) { EXPECT_TRUE(ValidateJobSpec(ValidSpec(), Limits{}).ok()); }

TEST(ValidateJobSpec, DefaultsMatchSpec) {
  JobSpec spec;
  EXPECT_EQ(spec.ttr_ms, 60'000u);
  EXPECT_EQ(spec.priority, 1024u);
  EXPECT_EQ(spec.max_attempts, 0u);
  EXPECT_FALSE(spec.delay_ms.has_value());
  EXPECT_FALSE(spec.run_at_ms.has_value());
  EXPECT_FALSE(spec.replace);
  EXPECT_EQ(Limits{}.max_body_bytes, 256u * 1024);
}

TEST(ValidateJobSpec, MissingTopicIsInvalid) {
  JobSpec spec = ValidSpec();
  spec.topic = "";
  ExpectInvalid(ValidateJobSpec(spec, Limits{}), "topic");
}

TEST(ValidateJobSpec, EmptyIdMeansGeneratedAndPasses) {
  JobSpec spec = ValidSpec();
  spec.id = "";
  EXPECT_TRUE(ValidateJobSpec(spec, Limits{}).ok());
}

TEST(ValidateJobSpec, BadIdIsInvalidNamingId) {
  JobSpec spec = ValidSpec();
  spec.id = std::string(257, 'a');
  ExpectInvalid(ValidateJobSpec(spec, Limits{}), "id");
  spec.id = "a\nb";
  ExpectInvalid(ValidateJobSpec(spec, Limits{}), "id");
}

TEST(ValidateJobSpec, BadTopicIsInvalidNamingTopic) {
  JobSpec spec = ValidSpec();
  spec.topic = "a b";
  ExpectInvalid(ValidateJobSpec(spec, Limits{}), "topic");
}

TEST(ValidateJobSpec, NegativeDelayIsInvalid) {
  JobSpec spec = ValidSpec();
  spec.delay_ms = -1;
  ExpectInvalid(ValidateJobSpec(spec, Limits{}), "delay_ms");
}

TEST(ValidateJobSpec, ZeroAndLargeDelaysPass) {
  JobSpec spec = ValidSpec();
  spec.delay_ms = 0;
  EXPECT_TRUE(ValidateJobSpec(spec, Limits{}).ok());
  spec.delay_ms = kMaxDelayMs;
  EXPECT_TRUE(ValidateJobSpec(spec, Limits{}).ok());
}

TEST(ValidateJobSpec, DelayOverHundredYearsIsInvalid) {
  JobSpec spec = ValidSpec();
  spec.delay_ms = kMaxDelayMs + 1;
  ExpectInvalid(ValidateJobSpec(spec, Limits{}), "delay_ms");
}

TEST(ValidateJobSpec, BothDelayAndRunAtIsInvalidNamingBoth) {
  JobSpec spec = ValidSpec();
  spec.delay_ms = 10;
  spec.run_at_ms = 1'700'000'000'000;
  Status s = ValidateJobSpec(spec, Limits{});
  ExpectInvalid(s, "delay_ms");
  ExpectInvalid(s, "run_at_ms");
}

TEST(ValidateJobSpec, RunAtInPastPasses) {
  JobSpec spec = ValidSpec();
  spec.run_at_ms = kMinRunAtMs;  // 2001-09-09
  EXPECT_TRUE(ValidateJobSpec(spec, Limits{}).ok());
  spec.run_at_ms = 1'700'000'000'000;
  EXPECT_TRUE(ValidateJobSpec(spec, Limits{}).ok());
  spec.run_at_ms = kMaxRunAtMs;
  EXPECT_TRUE(ValidateJobSpec(spec, Limits{}).ok());
}

// A time in seconds (1795659700 is 2026-11-25 in seconds, 1970-01-21 in
// ms) would fire at once: refused, saying what it looks like.
TEST(ValidateJobSpec, RunAtThatLooksLikeSecondsIsInvalidSayingSo) {
  JobSpec spec = ValidSpec();
  spec.run_at_ms = 1'795'659'700;
  Status s = ValidateJobSpec(spec, Limits{});
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "run_at_ms: 1795659700 is before 2001-09-09 — it looks like seconds; give "
            "milliseconds (1795659700000)");
  for (int64_t early : {int64_t{0}, int64_t{1}, kMinRunAtMs - 1}) {
    spec.run_at_ms = early;
    ExpectInvalid(ValidateJobSpec(spec, Limits{}), "looks like seconds");
  }
}

TEST(ValidateJobSpec, RunAtOutOfRangeIsInvalid) {
  JobSpec spec = ValidSpec();
  spec.run_at_ms = -1;
  ExpectInvalid(ValidateJobSpec(spec, Limits{}), "run_at_ms");
  spec.run_at_ms = kMaxRunAtMs + 1;
  ExpectInvalid(ValidateJobSpec(spec, Limits{}), "run_at_ms");
}

TEST(ValidateJobSpec, ZeroTtrIsInvalid) {
  JobSpec spec = ValidSpec();
  spec.ttr_ms = 0;
  ExpectInvalid(ValidateJobSpec(spec, Limits{}), "ttr_ms");
  spec.ttr_ms = 1;
  EXPECT_TRUE(ValidateJobSpec(spec, Limits{}).ok());
}

TEST(ValidateJobSpec, AnyPriorityAndMaxAttemptsPass) {
  JobSpec spec = ValidSpec();
  spec.priority = 0;
  spec.max_attempts = 0;
  EXPECT_TRUE(ValidateJobSpec(spec, Limits{}).ok());
  spec.priority = 4'294'967'295u;
  spec.max_attempts = 4'294'967'295u;
  EXPECT_TRUE(ValidateJobSpec(spec, Limits{}).ok());
}

TEST(ValidateJobSpec, BodyAtLimitPassesAndOverLimitIsTooLarge) {
  JobSpec spec = ValidSpec();
  spec.body = std::string(kDefaultMaxBodyBytes, 'x');
  EXPECT_TRUE(ValidateJobSpec(spec, Limits{}).ok());
  spec.body.push_back('x');
  Status s = ValidateJobSpec(spec, Limits{});
  EXPECT_EQ(s.code(), Code::kTooLarge);
  EXPECT_NE(s.message().find("body"), std::string::npos) << s.message();
}

TEST(ValidateJobSpec, BodyLimitComesFromLimits) {
  JobSpec spec = ValidSpec();
  spec.body = std::string(11, 'x');
  Limits limits;
  limits.max_body_bytes = 10;
  EXPECT_EQ(ValidateJobSpec(spec, limits).code(), Code::kTooLarge);
  limits.max_body_bytes = 11;
  EXPECT_TRUE(ValidateJobSpec(spec, limits).ok());
}

TEST(ValidateJobSpec, BinaryBodyPasses) {
  JobSpec spec = ValidSpec();
  spec.body = std::string("\0\x01\xff\n", 4);
  EXPECT_TRUE(ValidateJobSpec(spec, Limits{}).ok());
}

TEST(ValidateTopic, AllAllowedCharactersPass) {
  EXPECT_TRUE(ValidateTopic("a").ok());
  EXPECT_TRUE(
      ValidateTopic("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-").ok());
}

TEST(ValidateTopic, LengthLimitIs200Bytes) {
  EXPECT_TRUE(ValidateTopic(std::string(200, 't')).ok());
  ExpectInvalid(ValidateTopic(std::string(201, 't')), "topic");
}

TEST(ValidateTopic, EmptyIsInvalid) { ExpectInvalid(ValidateTopic(""), "topic"); }

TEST(ValidateTopic, EveryByteOutsideTheAlphabetIsInvalid) {
  const std::string allowed = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-";
  for (int c = 0; c < 256; ++c) {
    std::string topic = "ok";
    topic.push_back(static_cast<char>(c));
    bool ok = allowed.find(static_cast<char>(c)) != std::string::npos;
    Status s = ValidateTopic(topic);
    EXPECT_EQ(s.ok(), ok) << "byte " << c;
    if (!ok) ExpectInvalid(s, "topic");
  }
}

TEST(ValidateId, LengthLimitIs256Bytes) {
  EXPECT_TRUE(ValidateId(std::string(256, 'i')).ok());
  ExpectInvalid(ValidateId(std::string(257, 'i')), "id");
}

TEST(ValidateId, EmptyIsInvalid) { ExpectInvalid(ValidateId(""), "id"); }

TEST(ValidateReceipt, EmptyOr24HexDigitsInEitherCasePass) {
  EXPECT_TRUE(ValidateReceipt("").ok());  // by id alone: what the servers call force
  EXPECT_TRUE(ValidateReceipt("0123456789abcdef01234567").ok());
  EXPECT_TRUE(ValidateReceipt("0123456789ABCDEF01234567").ok());
}

TEST(ValidateReceipt, AnyOtherShapeIsInvalidNamingTheReceipt) {
  for (std::string_view bad : {"0123", "0123456789abcdef012345670", "0123456789abcdef0123456g",
                               "FORCE", "0123456789abcdef 1234567"}) {
    Status s = ValidateReceipt(bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_EQ(s.message().rfind("receipt: expected the 24 hex digits a reserve hands out", 0), 0u)
        << s.message();
  }
}

TEST(ValidateId, ControlCharactersAreInvalid) {
  for (int c = 0; c < 0x20; ++c) {
    std::string id = "a";
    id.push_back(static_cast<char>(c));
    ExpectInvalid(ValidateId(id), "id");
  }
  ExpectInvalid(ValidateId("a\x7f"), "id");
}

TEST(ValidateId, PrintableSpacesAndUtf8Pass) {
  EXPECT_TRUE(ValidateId("order 42/close?x=y").ok());
  EXPECT_TRUE(ValidateId("\xc3\xa9t\xc3\xa9").ok());  // "été"
  EXPECT_TRUE(ValidateId(" ").ok());
}

TEST(JobState, NamesAreStable) {
  EXPECT_EQ(StateName(JobState::kDelayed), "delayed");
  EXPECT_EQ(StateName(JobState::kReady), "ready");
  EXPECT_EQ(StateName(JobState::kReserved), "reserved");
  EXPECT_EQ(StateName(JobState::kBuried), "buried");
}

TEST(JobState, ParseStateRoundTrips) {
  for (JobState s :
       {JobState::kDelayed, JobState::kReady, JobState::kReserved, JobState::kBuried}) {
    std::optional<JobState> parsed = ParseState(StateName(s));
    ASSERT_TRUE(parsed.has_value()) << StateName(s);
    EXPECT_EQ(*parsed, s);
  }
}

TEST(JobState, ParseStateRejectsOtherNames) {
  EXPECT_FALSE(ParseState("").has_value());
  EXPECT_FALSE(ParseState("READY").has_value());
  EXPECT_FALSE(ParseState("readyx").has_value());
  EXPECT_FALSE(ParseState("gone").has_value());
}

}  // namespace
}  // namespace delayq
