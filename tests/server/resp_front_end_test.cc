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
  // id, topic, body, receipt, attempts, ttr_ms, priority, run_at_ms,
  // reserved_until_ms, max_attempts: every field of a delivery, as HTTP
  // sends it.
  const RespReply& job = jobs.elements[0];
  ASSERT_EQ(job.elements.size(), 10u) << job.ToString();
  EXPECT_EQ(job.elements[0], Bulk("rt-1"));
  EXPECT_EQ(job.elements[1], Bulk("rt"));
  EXPECT_EQ(job.elements[2], Bulk(std::string("body\0\xff", 6)));  // binary safe
  EXPECT_EQ(job.elements[4], Integer(1));
  EXPECT_EQ(job.elements[5], Integer(60000));  // ttr_ms
  EXPECT_EQ(job.elements[6], Integer(1024));   // priority
  std::string receipt = job.elements[3].str;
  RespReply info = h.Resp({"GET", "rt-1"});
  EXPECT_EQ(FieldOf(info, "state"), "reserved");
  EXPECT_EQ(FieldOf(info, "receipt"), receipt);
  EXPECT_EQ(std::to_string(job.elements[7].integer), FieldOf(info, "run_at_ms"));
  EXPECT_EQ(std::to_string(job.elements[8].integer), FieldOf(info, "reserved_until_ms"));
  EXPECT_EQ(job.elements[9], Integer(0));  // max_attempts: unlimited
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
  EXPECT_EQ(h.Resp({"FINISH", "nope", "FORCE"}).str.rfind("NOTFOUND", 0), 0u);
  EXPECT_EQ(h.Resp({"FINISH", "e1", "force"}).str.rfind("NOTRESERVED", 0), 0u);
  EXPECT_EQ(h.Resp({"ADD", "bad topic!", "*", "0", "60000", "x"}).str.rfind("INVALID topic", 0),
            0u);
  EXPECT_EQ(h.Resp({"ADD", "err", "*", "-5", "60000", "x"}).str.rfind("INVALID delay", 0), 0u);
  // Nothing above changed the stored job, and the connection still serves.
  EXPECT_EQ(FieldOf(h.Resp({"GET", "e1"}), "state"), "ready");
}

// FINISH, TOUCH, BURY and RELEASE need the receipt of the reserve that
// handed the job out, or FORCE in its place to act by id alone.
// ADD ... IDEMPOTENCY key: a repeat after the job was deleted answers as
// the first add did, and adds nothing.
TEST_P(RespFrontEnd, ARepeatedAddWithItsIdempotencyKeyAddsNothing) {
  auto first = h.Resp({"ADD", "idem", "pay-1", "0", "60000", "x", "IDEMPOTENCY", "k-1"});
  EXPECT_EQ(first.str, "pay-1");
  h.Resp({"DELETE", "pay-1"});
  EXPECT_EQ(h.Resp({"ADD", "idem", "pay-1", "0", "60000", "x", "IDEMPOTENCY", "k-1"}).str, "pay-1");
  EXPECT_EQ(h.Resp({"GET", "pay-1"}), NilArray()) << "added again";
  EXPECT_EQ(h.Resp({"ADD", "idem", "pay-2", "0", "60000", "x", "IDEMPOTENCY", "a:b"})
                .str.rfind("INVALID idempotency_key", 0),
            0u);
}

TEST_P(RespFrontEnd, AReceiptOrForceIsRequiredAndForceSaysSo) {
  h.Resp({"ADD", "rc", "rc-1", "0", "60000", "x"});
  RespReply jobs = h.Resp({"RESERVE", "FROM", "rc"});
  ASSERT_EQ(jobs.elements.size(), 1u) << jobs.ToString();
  const std::string receipt = jobs.elements[0].elements[3].str;
  const std::string required =
      "INVALID receipt: required — the receipt from the RESERVE that handed the job out (FORCE "
      "in its place acts by id alone)";
  EXPECT_EQ(h.Resp({"FINISH", "rc-1"}), Error(required));
  EXPECT_EQ(h.Resp({"FINISH", "rc-1", ""}), Error(required));
  EXPECT_EQ(h.Resp({"TOUCH", "rc-1"}), Error(required));
  EXPECT_EQ(h.Resp({"BURY", "rc-1"}), Error(required));
  EXPECT_EQ(h.Resp({"RELEASE", "rc-1", "0"}), Error(required));
  EXPECT_EQ(h.Resp({"RELEASE", "rc-1", "0", "ERROR", "boom"}), Error(required));
  // A receipt that is not 24 hex digits is a mistake, not a stale receipt.
  for (std::string bad : {std::string("abc"), receipt + "0", receipt.substr(0, 23) + "x"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(h.Resp({"FINISH", "rc-1", bad}).str.rfind("INVALID receipt: expected the 24 hex", 0),
              0u);
    EXPECT_EQ(h.Resp({"RELEASE", "rc-1", "0", bad}).str.rfind("INVALID receipt", 0), 0u);
  }
  EXPECT_EQ(h.Resp({"FINISH", "rc-1", std::string(24, '0')}).str.rfind("STALE", 0), 0u);
  // None of that changed the job.
  RespReply info = h.Resp({"GET", "rc-1"});
  EXPECT_EQ(FieldOf(info, "state"), "reserved");
  EXPECT_EQ(FieldOf(info, "receipt"), receipt);
  EXPECT_EQ(FieldOf(info, "attempts"), "1");
  // FORCE (any case) acts by id alone, and the reply says so.
  EXPECT_EQ(h.Resp({"TOUCH", "rc-1", "FORCE"}), Simple("FORCED"));
  EXPECT_EQ(h.Resp({"RELEASE", "rc-1", "5s", "Force", "ERROR", "smtp down"}), Simple("FORCED"));
  info = h.Resp({"GET", "rc-1"});
  EXPECT_EQ(FieldOf(info, "state"), "delayed");
  EXPECT_EQ(FieldOf(info, "last_error"), "smtp down");
  h.AdvanceMs(5000);
  jobs = h.Resp({"RESERVE", "FROM", "rc"});
  ASSERT_EQ(jobs.elements.size(), 1u) << jobs.ToString();
  EXPECT_EQ(h.Resp({"BURY", "rc-1", "force"}), Simple("FORCED"));
  EXPECT_EQ(h.Resp({"FINISH", "rc-1", "FORCE"}).str.rfind("NOTRESERVED", 0), 0u);
  EXPECT_EQ(h.Resp({"KICK", "rc-1"}), Simple("OK"));
  jobs = h.Resp({"RESERVE", "FROM", "rc"});
  ASSERT_EQ(jobs.elements.size(), 1u) << jobs.ToString();
  EXPECT_EQ(h.Resp({"FINISH", "rc-1", "FORCE"}), Simple("FORCED"));
  EXPECT_EQ(h.Resp({"GET", "rc-1"}), NilArray());
  // With its receipt, the reply is a plain OK.
  h.Resp({"ADD", "rc", "rc-2", "0", "60000", "x"});
  jobs = h.Resp({"RESERVE", "FROM", "rc"});
  ASSERT_EQ(jobs.elements.size(), 1u) << jobs.ToString();
  EXPECT_EQ(h.Resp({"FINISH", "rc-2", jobs.elements[0].elements[3].str}), Simple("OK"));
}

// ADD's delay and ttr, RESERVE's TIMEOUT and RELEASE's delay: plain digits
// are milliseconds, as always; a unit makes a duration.
// What the network client (src/client) needs beyond the first commands:
// UNRESERVE (a worker gives back a job it never began), BURY's reason, a
// reserve's own byte bound, and an add that answers its state and run_at.
TEST_P(RespFrontEnd, UnreserveGivesAJobBackReadyWithItsAttemptNotCounted) {
  h.Resp({"ADD", "un", "un-1", "0", "60000", "x"});
  RespReply jobs = h.Resp({"RESERVE", "FROM", "un"});
  ASSERT_EQ(jobs.elements.size(), 1u) << jobs.ToString();
  const std::string receipt = jobs.elements[0].elements[3].str;
  EXPECT_EQ(h.Resp({"UNRESERVE", "un-1", "FORCE"}).str.rfind("INVALID receipt", 0), 0u);
  EXPECT_EQ(h.Resp({"UNRESERVE", "un-1", "0123"}).str.rfind("INVALID receipt", 0), 0u);
  EXPECT_EQ(h.Resp({"UNRESERVE", "un-1", "000000000000000000000000"}).str.rfind("STALE", 0), 0u);
  EXPECT_EQ(h.Resp({"UNRESERVE", "un-1"}),
            Error("ERR wrong number of arguments for 'UNRESERVE' command"));
  EXPECT_EQ(h.Resp({"UNRESERVE", "un-1", receipt}), Simple("OK"));
  RespReply info = h.Resp({"GET", "un-1"});
  EXPECT_EQ(FieldOf(info, "state"), "ready");
  EXPECT_EQ(FieldOf(info, "attempts"), "0");
  // That delivery is over: its receipt is stale now.
  EXPECT_EQ(h.Resp({"UNRESERVE", "un-1", receipt}).str.rfind("STALE", 0), 0u);
  EXPECT_EQ(h.Resp({"UNRESERVE", "nope", receipt}).str.rfind("NOTFOUND", 0), 0u);
}

TEST_P(RespFrontEnd, BuryKeepsItsErrorTextAsLastError) {
  h.Resp({"ADD", "bu", "bu-1", "0", "60000", "x"});
  RespReply jobs = h.Resp({"RESERVE", "FROM", "bu"});
  ASSERT_EQ(jobs.elements.size(), 1u) << jobs.ToString();
  const std::string receipt = jobs.elements[0].elements[3].str;
  EXPECT_EQ(h.Resp({"BURY", "bu-1", receipt, "REASON", "x"}),
            Error("INVALID BURY: expected id receipt|FORCE [ERROR text]"));
  EXPECT_EQ(h.Resp({"BURY", "bu-1", receipt, "ERROR", "poison message"}), Simple("OK"));
  RespReply info = h.Resp({"GET", "bu-1"});
  EXPECT_EQ(FieldOf(info, "state"), "buried");
  EXPECT_EQ(FieldOf(info, "last_error"), "poison message");
}

TEST_P(RespFrontEnd, ReserveMaxBytesCutsTheBatchButHandsOutAtLeastOne) {
  for (const char* id : {"mb-1", "mb-2", "mb-3"}) {
    h.Resp({"ADD", "mb", id, "0", "60000", std::string(100, 'b')});
  }
  EXPECT_EQ(h.Resp({"RESERVE", "COUNT", "3", "MAXBYTES", "-1", "FROM", "mb"}),
            Error("INVALID MAXBYTES: expected an integer >= 0 (0: no limit)"));
  EXPECT_EQ(h.Resp({"RESERVE", "COUNT", "3", "MAXBYTES", "250", "FROM", "mb"}).elements.size(), 2u);
  EXPECT_EQ(h.Resp({"RESERVE", "COUNT", "3", "MAXBYTES", "1", "FROM", "mb"}).elements.size(), 1u);
}

TEST_P(RespFrontEnd, AddWithStateAnswersIdStateAndRunAt) {
  RespReply now = h.Resp({"ADD", "ws", "ws-1", "0", "60000", "x", "WITHSTATE"});
  ASSERT_EQ(now.type, RespReply::Type::kArray) << now.ToString();
  ASSERT_EQ(now.elements.size(), 3u);
  EXPECT_EQ(now.elements[0], Bulk("ws-1"));
  EXPECT_EQ(now.elements[1], Bulk("ready"));
  EXPECT_EQ(std::to_string(now.elements[2].integer), FieldOf(h.Resp({"GET", "ws-1"}), "run_at_ms"));
  RespReply later = h.Resp({"ADD", "ws", "ws-2", "5000", "60000", "x", "withstate"});
  ASSERT_EQ(later.elements.size(), 3u) << later.ToString();
  EXPECT_EQ(later.elements[1], Bulk("delayed"));
  EXPECT_EQ(later.elements[2].integer, now.elements[2].integer + 5000);
  EXPECT_EQ(h.Resp({"ADD", "ws", "ws-3", "0", "60000", "x"}), Bulk("ws-3"));  // as before
}

TEST_P(RespFrontEnd, DurationsTakeMillisecondsOrAUnit) {
  EXPECT_EQ(h.Resp({"ADD", "du", "du-1", "5s", "1m30s", "x"}), Bulk("du-1"));
  EXPECT_EQ(h.Resp({"ADD", "du", "du-2", "5000", "90000", "x"}), Bulk("du-2"));
  RespReply a = h.Resp({"GET", "du-1"});
  RespReply b = h.Resp({"GET", "du-2"});
  EXPECT_EQ(FieldOf(a, "ttr_ms"), "90000");
  EXPECT_EQ(FieldOf(a, "run_at_ms"), FieldOf(b, "run_at_ms"));
  EXPECT_EQ(FieldOf(a, "state"), "delayed");
  auto waiter = h.Connect(Protocol::kResp);
  waiter->Send(RespCommand({"RESERVE", "TIMEOUT", "2s", "COUNT", "2", "FROM", "du"}));
  h.AdvanceMs(1999);
  EXPECT_EQ(waiter->Unread(), "");
  h.AdvanceMs(1);
  EXPECT_EQ(waiter->ReadResp(), NilArray());  // ran out after 2 s, before the jobs were due
  h.AdvanceMs(3000);
  RespReply jobs = h.Resp({"RESERVE", "COUNT", "2", "FROM", "du"});
  ASSERT_EQ(jobs.elements.size(), 2u) << jobs.ToString();
  EXPECT_EQ(jobs.elements[0].elements[5], Integer(90000));
  EXPECT_EQ(h.Resp({"RELEASE", "du-1", "1h", jobs.elements[0].elements[3].str}), Simple("OK"));
  EXPECT_EQ(std::stoll(FieldOf(h.Resp({"GET", "du-1"}), "run_at_ms")),
            std::stoll(FieldOf(b, "run_at_ms")) + 3'600'000);
  auto starts = [](const RespReply& r, std::string_view prefix) {
    return r.type == RespReply::Type::kError && r.str.rfind(prefix, 0) == 0;
  };
  EXPECT_PRED2(starts, h.Resp({"ADD", "du", "*", "5x", "60000", "x"}),
               "INVALID delay: unknown unit 'x'");
  EXPECT_PRED2(starts, h.Resp({"ADD", "du", "*", "1.5s", "60000", "x"}),
               "INVALID delay: a fraction");
  EXPECT_PRED2(starts, h.Resp({"ADD", "du", "*", "0", "0s", "x"}), "INVALID ttr: at least 1ms");
  EXPECT_PRED2(starts, h.Resp({"ADD", "du", "*", "0", "60000", "x", "AT", "1795659700"}),
               "INVALID run_at_ms: 1795659700 is before 2001-09-09 — it looks like seconds; "
               "give milliseconds (1795659700000)");
  EXPECT_PRED2(starts, h.Resp({"RESERVE", "TIMEOUT", "2d", "FROM", "du"}),
               "INVALID TIMEOUT: at most 1d");
  EXPECT_PRED2(starts, h.Resp({"RELEASE", "du-2", "soon", "FORCE"}),
               "INVALID delay: a number expected at 'soon'");
  EXPECT_EQ(FieldOf(h.Resp({"STATS"}), "jobs"), "2");  // nothing added by the refused ADDs
}

// PEEK sends a job as RESERVE does: every field of a delivery, in order.
TEST_P(RespFrontEnd, PeekSendsADeliveryAsReserveDoes) {
  h.Resp({"ADD", "pk", "pk-1", "0", "45000", "x", "PRIORITY", "7", "MAXATTEMPTS", "3"});
  RespReply peek = h.Resp({"PEEK", "pk", "READY"});
  ASSERT_EQ(peek.elements.size(), 10u) << peek.ToString();
  RespReply info = h.Resp({"GET", "pk-1"});
  EXPECT_EQ(peek.elements[0], Bulk("pk-1"));
  EXPECT_EQ(peek.elements[3], Bulk(""));  // not reserved: no receipt
  EXPECT_EQ(peek.elements[4], Integer(0));
  EXPECT_EQ(peek.elements[5], Integer(45000));
  EXPECT_EQ(peek.elements[6], Integer(7));
  EXPECT_EQ(std::to_string(peek.elements[7].integer), FieldOf(info, "run_at_ms"));
  EXPECT_EQ(peek.elements[8], Integer(0));
  EXPECT_EQ(peek.elements[9], Integer(3));  // max_attempts
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

// A RESERVE that arrives together with the client's FIN (one read: a worker
// that sent it and exited) is unanswered at the FIN, as one that waits is:
// the client is gone. It takes no job — none is written to a socket no one
// reads, to stay reserved until its TTR — and the commands before it are
// still answered.
TEST_P(RespFrontEnd, AReserveThatArrivesWithTheClientsFinTakesNoJob) {
  EXPECT_EQ(h.Resp({"ADD", "fin.r", "fr", "0", "60000", "x"}), Bulk("fr"));
  auto gone = h.Connect(Protocol::kResp);
  gone->SendAndShutdown(RespCommand({"PING"}) + RespCommand({"RESERVE", "FROM", "fin.r"}) +
                        RespCommand({"ECHO", "after"}));
  EXPECT_EQ(gone->ReadToClose(), "+PONG\r\n");
  RespReply info = h.Resp({"GET", "fr"});
  EXPECT_EQ(FieldOf(info, "state"), "ready");
  EXPECT_EQ(FieldOf(info, "attempts"), "0");
  RespReply jobs = h.Resp({"RESERVE", "FROM", "fin.r"});
  ASSERT_EQ(jobs.elements.size(), 1u) << jobs.ToString();
  EXPECT_EQ(jobs.elements[0].elements[4], Integer(1));  // its first delivery
}

// Shutdown: a waiting reserve is answered, then the commands pipelined
// behind it, received before the drain, run and are answered, and only then
// does the connection close. The waiting reserve is answered -UNAVAILABLE "shutting down: ...",
// never the nil of "no job" (a worker would poll a server going away); a reserve pipelined behind
// it that asked to wait is cut short the same way when it finds no job, and one that finds a job
// gets it.
TEST_P(RespFrontEnd, ADrainServesWhatWasPipelinedBehindAWaitingReserve) {
  const RespReply shutting_down = Error(
      "UNAVAILABLE shutting down: the server is stopping; reserve again on another server, or "
      "on this one once it is back");
  auto worker = h.Connect(Protocol::kResp);
  worker->Send(RespCommand({"RESERVE", "TIMEOUT", "60000", "FROM", "dr"}) +
               RespCommand({"ADD", "dr", "dr-1", "0", "60000", "x"}) +
               RespCommand({"RESERVE", "TIMEOUT", "60000", "FROM", "dr.none"}) +
               RespCommand({"RESERVE", "FROM", "dr.none"}) +
               RespCommand({"RESERVE", "TIMEOUT", "60000", "FROM", "dr"}) + RespCommand({"PING"}));
  EXPECT_EQ(worker->Unread(), "");
  h.RunOnLoop([&] { h.resp().BeginDrain(); });
  EXPECT_EQ(worker->ReadResp(), shutting_down);
  EXPECT_EQ(worker->ReadResp(), Bulk("dr-1"));
  EXPECT_EQ(worker->ReadResp(), shutting_down);  // asked to wait: cut short
  EXPECT_EQ(worker->ReadResp(), NilArray());     // asked not to wait: no job, as ever
  RespReply got = worker->ReadResp();            // a job was there: it is handed out
  ASSERT_EQ(got.type, RespReply::Type::kArray) << got.ToString();
  EXPECT_EQ(got.elements.at(0).elements.at(0), Bulk("dr-1"));
  EXPECT_EQ(worker->ReadResp(), Simple("PONG"));
  EXPECT_EQ(worker->ReadToClose(), "");
}

// Requests that wait for the client to read its replies (backpressure) were
// received too: the drain serves them as the client reads, then closes.
TEST(RespFrontEndDrain, ServesRequestsHeldBackByUnreadReplies) {
  FrontEndHarness h({.max_output_bytes = 1 << 20});  // high water: 256 KiB
  std::string big(600 * 1024, 'b');
  auto c = h.Connect(Protocol::kResp);
  c->Send(RespCommand({"ECHO", big}) + RespCommand({"ECHO", "second"}));
  h.RunOnLoop([&] { h.resp().BeginDrain(); });
  EXPECT_EQ(c->ReadResp(), Bulk(big));
  EXPECT_EQ(c->ReadResp(), Bulk("second"));
  EXPECT_EQ(c->ReadToClose(), "");
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
