// The RESP front end in-process (FrontEndHarness): the real parser, command
// table and handlers on a real queue, no sockets, a ManualClock. Ports of
// behaviours tests/integration/resp_server_test.py checks black-box.
#include <string>

#include "gtest/gtest.h"
#include "server/front_end_harness.h"

namespace delayq::server::testing {
namespace {

using Protocol = FrontEndHarness::Protocol;

// The value of `field` in a flat field/value array (GET, STATS).
std::string FieldOf(const RespReply& r, std::string_view field) {
  for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
    if (r.elements[i].str == field) return r.elements[i + 1].str;
  }
  return "(absent)";
}

class RespFrontEnd : public OnEachStore {};

TEST_P(RespFrontEnd, AddReserveFinish) {
  EXPECT_EQ(h.Resp({"PING"}), Simple("PONG"));
  EXPECT_EQ(h.Resp({"ADD", "rt", "rt-1", "0", "60000", std::string_view("body\0\xff", 6)}),
            Bulk("rt-1"));
  RespReply jobs = h.Resp({"RESERVE", "FROM", "rt"});
  ASSERT_EQ(jobs.type, RespReply::Type::kArray) << jobs.ToString();
  ASSERT_EQ(jobs.elements.size(), 1u);
  const RespReply& job = jobs.elements[0];  // id, topic, body, receipt, attempts
  ASSERT_EQ(job.elements.size(), 5u) << job.ToString();
  EXPECT_EQ(job.elements[0], Bulk("rt-1"));
  EXPECT_EQ(job.elements[1], Bulk("rt"));
  EXPECT_EQ(job.elements[2], Bulk(std::string("body\0\xff", 6)));  // binary safe
  EXPECT_EQ(job.elements[4], Integer(1));
  std::string receipt = job.elements[3].str;
  RespReply info = h.Resp({"GET", "rt-1"});
  EXPECT_EQ(FieldOf(info, "state"), "reserved");
  EXPECT_EQ(FieldOf(info, "receipt"), receipt);
  EXPECT_EQ(h.Resp({"FINISH", "rt-1", receipt}), Simple("OK"));
  EXPECT_EQ(h.Resp({"GET", "rt-1"}), NilArray());
}

TEST_P(RespFrontEnd, ErrorsForArityUnknownCommandsAndBadArguments) {
  EXPECT_EQ(h.Resp({"FLUSHALL"}),
            Error("ERR unknown command 'FLUSHALL', with args beginning with: "));
  EXPECT_EQ(h.Resp({"FINISH"}), Error("ERR wrong number of arguments for 'FINISH' command"));
  EXPECT_EQ(h.Resp({"ADD", "t", "*"}), Error("ERR wrong number of arguments for 'ADD' command"));
  h.Resp({"ADD", "err", "e1", "0", "60000", "x"});
  EXPECT_EQ(h.Resp({"ADD", "err", "e1", "0", "60000", "x"}).str.rfind("EXISTS", 0), 0u);
  EXPECT_EQ(h.Resp({"FINISH", "nope"}).str.rfind("NOTFOUND", 0), 0u);
  EXPECT_EQ(h.Resp({"FINISH", "e1"}).str.rfind("NOTRESERVED", 0), 0u);
  EXPECT_EQ(h.Resp({"ADD", "bad topic!", "*", "0", "60000", "x"}).str.rfind("INVALID topic", 0),
            0u);
  EXPECT_EQ(h.Resp({"ADD", "err", "*", "-5", "60000", "x"}).str.rfind("INVALID delay_ms", 0), 0u);
  // Nothing above changed the stored job, and the connection still serves.
  EXPECT_EQ(FieldOf(h.Resp({"GET", "e1"}), "state"), "ready");
}

TEST_P(RespFrontEnd, PipelinedCommandsAreAnsweredInOrderInOneWrite) {
  auto c = h.Connect(Protocol::kResp);
  std::string pipeline;
  for (int i = 0; i < 20; ++i) {
    pipeline += RespCommand({"ADD", "pipe", "p" + std::to_string(i), "0", "60000", "x"});
  }
  pipeline += "PING\r\n";  // an inline command among them
  pipeline += RespCommand({"RESERVE", "COUNT", "3", "FROM", "pipe"});
  pipeline += RespCommand({"ECHO", "last"});
  c->Send(pipeline);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(c->ReadResp(), Bulk("p" + std::to_string(i)));
  EXPECT_EQ(c->ReadResp(), Simple("PONG"));
  RespReply jobs = c->ReadResp();
  ASSERT_EQ(jobs.elements.size(), 3u) << jobs.ToString();
  EXPECT_EQ(jobs.elements[0].elements[0], Bulk("p0"));  // in the order they were added
  EXPECT_EQ(jobs.elements[2].elements[0], Bulk("p2"));
  EXPECT_EQ(c->ReadResp(), Bulk("last"));
  EXPECT_EQ(c->Unread(), "");
}

TEST_P(RespFrontEnd, AWaitingReserveIsAnsweredWhenAJobFallsDueNeverEarly) {
  auto waiter = h.Connect(Protocol::kResp);
  // A command pipelined behind the waiting reserve waits for its answer.
  waiter->Send(RespCommand({"RESERVE", "TIMEOUT", "60000", "FROM", "lp"}) +
               RespCommand({"ECHO", "behind"}));
  EXPECT_EQ(FieldOf(h.Resp({"STATS", "lp"}), "waiting"), "1");
  EXPECT_EQ(h.Resp({"ADD", "lp", "soon", "200", "60000", "later"}), Bulk("soon"));
  h.AdvanceMs(199);
  EXPECT_EQ(waiter->Unread(), "");  // never early
  h.AdvanceMs(1);
  RespReply jobs = waiter->ReadResp();
  ASSERT_EQ(jobs.elements.size(), 1u) << jobs.ToString();
  EXPECT_EQ(jobs.elements[0].elements[0], Bulk("soon"));
  EXPECT_EQ(jobs.elements[0].elements[2], Bulk("later"));
  EXPECT_EQ(waiter->ReadResp(), Bulk("behind"));
}

// A reserve that waits is answered later, into its reply's place in the
// output. The jobs it hands over are kept until their reply has left (to be
// given back if the client goes first), and no longer: a connection that
// reserves this way all day keeps no list that grows (it once did, and was
// walked whole per reply: the Redis store, whose every reply comes later,
// lost two thirds of its throughput to it).
TEST_P(RespFrontEnd, JobsWhoseReplyLeftAreNotKeptByAConnectionThatWaitsEachTime) {
  auto worker = h.Connect(Protocol::kResp);
  for (int i = 0; i < 200; ++i) {
    std::string id = "w" + std::to_string(i);
    worker->Send(RespCommand({"RESERVE", "TIMEOUT", "60000", "FROM", "wait.t"}));
    EXPECT_EQ(worker->Unread(), "");  // it waits
    EXPECT_EQ(h.Resp({"ADD", "wait.t", id, "0", "60000", "x"}), Bulk(id));
    RespReply jobs = worker->ReadResp();
    ASSERT_EQ(jobs.elements.size(), 1u) << jobs.ToString();
    worker->Send(RespCommand({"FINISH", id, jobs.elements[0].elements[3].str}));
    EXPECT_EQ(worker->ReadResp(), Simple("OK"));
  }
  size_t in_hand = 0;
  h.RunOnLoop([&] { in_hand = h.resp().JobsInHand(worker->id()); });
  EXPECT_LE(in_hand, 1u);
}

TEST_P(RespFrontEnd, AReserveThatRunsOutAnswersNil) {
  auto waiter = h.Connect(Protocol::kResp);
  waiter->Send(RespCommand({"RESERVE", "TIMEOUT", "50", "FROM", "empty"}));
  EXPECT_EQ(waiter->Unread(), "");
  h.AdvanceMs(50);
  EXPECT_EQ(waiter->ReadResp(), NilArray());
}

TEST_P(RespFrontEnd, AClientThatSendsFinWhileItsReserveWaitsIsGoneAndTakesNoJob) {
  auto gone = h.Connect(Protocol::kResp);
  gone->Send(RespCommand({"RESERVE", "TIMEOUT", "30000", "FROM", "fin.t"}));
  EXPECT_EQ(FieldOf(h.Resp({"STATS", "fin.t"}), "waiting"), "1");
  gone->SendAndShutdown();
  EXPECT_EQ(gone->ReadToClose(), "");  // closed without a reply
  EXPECT_EQ(FieldOf(h.Resp({"STATS", "fin.t"}), "waiting"), "0");
  EXPECT_EQ(h.Resp({"ADD", "fin.t", "j", "0", "60000", "for a live worker"}), Bulk("j"));
  RespReply jobs = h.Resp({"RESERVE", "FROM", "fin.t"});
  ASSERT_EQ(jobs.elements.size(), 1u) << jobs.ToString();
  EXPECT_EQ(jobs.elements[0].elements[4], Integer(1));  // its first delivery
}

TEST_P(RespFrontEnd, CommandsSentBeforeTheClientsFinAreAnswered) {
  auto c = h.Connect(Protocol::kResp);
  c->SendAndShutdown(RespCommand({"ADD", "f", "f1", "0", "60000", "x"}) + "PING\r\n");
  EXPECT_EQ(c->ReadToClose(), "$2\r\nf1\r\n+PONG\r\n");
}

// A job handed to a connection that left before its reply was written whole
// goes back at once, its attempt not counted (FrontEnd::OnClose).
TEST_P(RespFrontEnd, AJobWhoseReplyNeverLeftGoesBackWhenTheClientLeaves) {
  std::string big(200 * 1024, 'b');  // more than a pipe holds: the reply cannot leave whole
  EXPECT_EQ(h.Resp({"ADD", "gb", "big", "0", "60000", big}), Bulk("big"));
  auto c = h.Connect(Protocol::kResp);
  c->Send(RespCommand({"RESERVE", "FROM", "gb"}));  // not read
  EXPECT_EQ(FieldOf(h.Resp({"GET", "big"}), "state"), "reserved");
  c->Disconnect();
  RespReply info = h.Resp({"GET", "big"});
  EXPECT_EQ(FieldOf(info, "state"), "ready");
  EXPECT_EQ(FieldOf(info, "attempts"), "0");
  RespReply jobs = h.Resp({"RESERVE", "FROM", "gb"});
  ASSERT_EQ(jobs.elements.size(), 1u);
  EXPECT_EQ(jobs.elements[0].elements[2].str.size(), big.size());
  EXPECT_EQ(jobs.elements[0].elements[4], Integer(1));
}

TEST_P(RespFrontEnd, ProtocolErrorsAnswerWhatCameBeforeThenClose) {
  auto c = h.Connect(Protocol::kResp);
  c->Send("PING\r\n*1\r\n$abc\r\n");
  std::string got = c->ReadToClose();
  EXPECT_EQ(got.rfind("+PONG\r\n-ERR Protocol error", 0), 0u) << got;
  EXPECT_EQ(h.Resp({"PING"}), Simple("PONG"));  // other connections go on
}

INSTANTIATE_TEST_SUITE_P(Stores, RespFrontEnd, ::testing::ValuesIn(kInProcessStores),
                         [](const auto& info) { return std::string(StoreKindName(info.param)); });

TEST(RespFrontEndAuth, TokenIsRequired) {
  FrontEndHarness h({.auth_token = "s3cret"});
  EXPECT_EQ(h.Resp({"ADD", "a", "*", "0", "1000", "x"}),
            Error("NOAUTH Authentication required: AUTH <token>"));
  EXPECT_EQ(h.Resp({"PING"}), Simple("PONG"));
  EXPECT_EQ(h.Resp({"AUTH", "wrong"}), Error("NOAUTH invalid token"));
  EXPECT_EQ(h.Resp({"AUTH", "s3cret"}), Simple("OK"));
  // A failed AUTH leaves the earlier one in force.
  auto c = h.Connect(Protocol::kResp);
  c->Send("AUTH s3cret\r\nAUTH wrong\r\nGET nope\r\n");
  EXPECT_EQ(c->ReadResp(), Simple("OK"));
  EXPECT_EQ(c->ReadResp(), Error("NOAUTH invalid token"));
  EXPECT_EQ(c->ReadResp(), NilArray());
}

TEST(RespFrontEndAuth, AuthWithoutATokenConfigured) {
  FrontEndHarness h;
  EXPECT_EQ(h.Resp({"AUTH", "x"}), Error("ERR AUTH called without a token configured"));
}

}  // namespace
}  // namespace delayq::server::testing
