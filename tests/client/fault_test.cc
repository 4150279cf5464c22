// The network client under network faults: a real `delayq serve` behind a
// FaultProxy (testing/fault_proxy.h) that loses replies after the server
// acted, holds them, refuses connections or lets connects hang, switched
// while the test runs. What must hold: a receipt-bearing change whose reply
// was lost is retried and acts once, with no error; a server that cannot be
// reached is kUnavailable, never a verdict on the job (stale, not found).
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "client/delayq_server.h"
#include "delayq/queue.h"
#include "gtest/gtest.h"
#include "testing/fault_proxy.h"
#include "testing/poll.h"

namespace delayq {
namespace {

using faults::FaultProxy;
using testing_client::DelayqServer;

std::unique_ptr<Queue> OpenRemote(const std::string& servers, int connect_timeout_ms = 5000,
                                  int request_timeout_ms = 5000) {
  QueueOptions o;
  o.store = StoreKind::kRemote;
  o.servers = servers;
  o.connect_timeout_ms = connect_timeout_ms;
  o.request_timeout_ms = request_timeout_ms;
  auto q = OpenQueue(o);
  EXPECT_TRUE(q.ok()) << q.status().ToString();
  return q.ok() ? std::move(q).value() : nullptr;
}

std::unique_ptr<DelayqServer> StartServer() {
  auto s = DelayqServer::Start({"--store", "memory"});
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

std::unique_ptr<FaultProxy> StartProxy(const DelayqServer& server) {
  auto p = FaultProxy::Start(server.port());
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(p).value() : nullptr;
}

JobSpec Job(std::string topic, std::string id) {
  JobSpec spec;
  spec.topic = std::move(topic);
  spec.id = std::move(id);
  return spec;
}

ReserveRequest From(std::string topic, int64_t wait_ms) {
  ReserveRequest req;
  req.topics = {std::move(topic)};
  req.wait_ms = wait_ms;
  return req;
}

// The FINISH reaches the server, which finishes the job; its reply is lost
// on the way back. The client retries on the next server, is answered "not
// found" (the job is gone: what the first attempt did), and reports success.
TEST(ClientFaults, AFinishWhoseReplyIsLostIsRetriedAndFinishesTheJobOnce) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto proxy = StartProxy(*server);
  ASSERT_NE(proxy, nullptr);
  auto direct = OpenRemote(server->address());
  auto q = OpenRemote(proxy->address() + "," + server->address());
  ASSERT_TRUE(direct->Add(Job("faults.finish", "f1")).ok());
  auto got = q->Reserve(From("faults.finish", 0));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 1u);
  const uint64_t finished_before = direct->Stats()->finished;

  proxy->set_mode(FaultProxy::Mode::kDropReplies);
  Status s = q->Finish("f1", (*got)[0].receipt);
  EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(proxy->replies_lost(), 1u);  // the first attempt acted; its reply was lost
  EXPECT_EQ(direct->Get("f1").status().code(), Code::kNotFound);
  EXPECT_EQ(direct->Stats()->finished, finished_before + 1);
}

// No connection to the server: the touch is kUnavailable (the receipt may
// well be valid), and it works again once the server can be reached.
TEST(ClientFaults, ATouchThroughAProxyRefusingConnectionsIsUnavailableNotStale) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto proxy = StartProxy(*server);
  ASSERT_NE(proxy, nullptr);
  auto direct = OpenRemote(server->address());
  ASSERT_TRUE(direct->Add(Job("faults.touch", "t1")).ok());
  auto got = direct->Reserve(From("faults.touch", 0));
  ASSERT_TRUE(got.ok() && got->size() == 1u) << got.status().ToString();
  const std::string receipt = (*got)[0].receipt;

  proxy->set_mode(FaultProxy::Mode::kRefuse);
  auto q = OpenRemote(proxy->address());
  Status s = q->Touch("t1", receipt);
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("refused"), std::string::npos) << s.ToString();

  proxy->set_mode(FaultProxy::Mode::kPass);
  EXPECT_TRUE(PollUntil([&] { return q->Touch("t1", receipt).ok(); }, std::chrono::seconds(10)));
}

// A reserve's callback asks again (as a Worker does) while the server it
// would go to has gone dark: connects to it hang until connect_timeout_ms.
// That connect must not hold the I/O thread, which owes another waiting
// reserve its answer meanwhile. Fails before: the connect ran on the I/O
// thread, and the other reserve's jobs waited the whole connect timeout.
TEST(ClientFaults, AConnectThatHangsDoesNotHoldUpAnotherWaitingReserve) {
  constexpr int kConnectTimeoutMs = 3000;
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto p1 = StartProxy(*server);
  auto p2 = StartProxy(*server);
  ASSERT_TRUE(p1 != nullptr && p2 != nullptr);
  auto direct = OpenRemote(server->address());
  auto q = OpenRemote(p1->address() + "," + p2->address(), kConnectTimeoutMs);
  using Clock = std::chrono::steady_clock;

  // The reserve that must be answered promptly: on p1, whose connection stays.
  std::promise<Clock::time_point> answered;
  q->ReserveAsync(From("io.b", 20'000), [&](Result<Deliveries> r) {
    EXPECT_TRUE(r.ok() && r->size() == 1u) << r.status().ToString();
    answered.set_value(Clock::now());
  });
  // p1 takes no new connection: the client moves to p2, and prefers it now.
  p1->set_mode(FaultProxy::Mode::kRefuse);
  ASSERT_TRUE(q->Stats().ok());

  // When a job of io.a arrives, its callback makes p2 go dark, makes io.b's
  // job ready, and asks again: the new reserve goes to p2, whose connects hang.
  std::promise<Status> asked_again;
  Clock::time_point b_ready;
  q->ReserveAsync(From("io.a", 20'000), [&](Result<Deliveries> r) {
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    p2->set_mode(FaultProxy::Mode::kBlackhole);
    EXPECT_TRUE(direct->Add(Job("io.b", "b1")).ok());
    b_ready = Clock::now();
    q->ReserveAsync(From("io.c", 20'000),
                    [&](Result<Deliveries> again) { asked_again.set_value(again.status()); });
  });
  ASSERT_TRUE(direct->Add(Job("io.a", "a1")).ok());

  auto when = answered.get_future();
  ASSERT_EQ(when.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const auto late = std::chrono::duration_cast<std::chrono::milliseconds>(when.get() - b_ready);
  EXPECT_LT(late.count(), kConnectTimeoutMs / 2) << "io.b's job waited for the hanging connect";
  // The reserve asked again goes to p1 once the connect to p2 gives up, and
  // takes io.c's job there.
  ASSERT_TRUE(direct->Add(Job("io.c", "c1")).ok());
  auto again = asked_again.get_future();
  ASSERT_EQ(again.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  Status st = again.get();
  EXPECT_TRUE(st.ok()) << st.ToString();
}

}  // namespace
}  // namespace delayq
