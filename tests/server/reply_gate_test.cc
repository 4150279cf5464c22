// The reply gate under --fsync always, as a fault tier: the embedded store
// behind both front ends (FrontEndHarness), its log written through a
// HeldSyncFileSystem whose fdatasyncs the test holds, then lets succeed or
// fail. A reply that reports a change must not leave before the sync that
// makes the change durable has returned — a reserve answered at once, one
// that waited, one filled into its place behind others — and when the sync
// fails, it never leaves: the client's connection is closed instead (it
// cannot know whether the change was kept).
#include <chrono>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "server/front_end_harness.h"
#include "server/held_sync_file_system.h"

namespace delayq::server::testing {
namespace {

using Protocol = FrontEndHarness::Protocol;
using std::chrono_literals::operator""s;

class ReplyGate : public ::testing::Test {
 protected:
  std::shared_ptr<HeldSyncFileSystem> fs = std::make_shared<HeldSyncFileSystem>();
  FrontEndHarness h{
      {.store = StoreKind::kEmbedded, .fsync = FsyncPolicy::kAlways, .file_system = fs}};

  // Holds the syncs, has `producer` add job `id` to `topic` (which hands it
  // to a waiting reserve), and returns once the log's sync of that is held
  // and the loop has run what the add set off (the reserve's answer, posted
  // to the loop). The sync thread is the one held: the loop keeps serving.
  void AddWhileSyncsAreHeld(FrontEndHarness::Client& producer, std::string_view topic,
                            std::string_view id) {
    fs->Hold();
    producer.Send(RespCommand({"ADD", topic, id, "0", "60000", "x"}));
    ASSERT_TRUE(fs->WaitHeld(10s)) << "no fdatasync began";
    h.RunOnLoop([] {});  // the answer posted to the loop
    h.RunOnLoop([] {});  // and the write it posted in turn (FrontEnd::AfterAnswer)
  }
};

TEST_F(ReplyGate, ARespReserveThatWaitedIsAnsweredOnlyOnceItsReservationIsSynced) {
  auto worker = h.Connect(Protocol::kResp);
  worker->Send(RespCommand({"RESERVE", "TIMEOUT", "60000", "FROM", "g"}));
  EXPECT_EQ(worker->Unread(), "");  // it waits
  auto producer = h.Connect(Protocol::kResp);
  AddWhileSyncsAreHeld(*producer, "g", "g1");
  EXPECT_EQ(producer->Unread(), "");  // the add waits for the sync
  EXPECT_EQ(worker->Unread(), "");    // and so does the reservation it made
  fs->Release();
  EXPECT_EQ(producer->ReadResp(), Bulk("g1"));
  RespReply jobs = worker->ReadResp();
  ASSERT_EQ(jobs.elements.size(), 1u) << jobs.ToString();
  EXPECT_EQ(jobs.elements[0].elements[0], Bulk("g1"));
}

// A reserve answered into its place, ahead of replies already stamped with
// an older (already released) change: the whole reply waits for the newer.
TEST_F(ReplyGate, AReserveFilledInBeforeLaterRepliesWaitsForItsOwnReservation) {
  EXPECT_EQ(h.Resp({"ADD", "other", "o1", "0", "60000", "x"}), Bulk("o1"));
  auto worker = h.Connect(Protocol::kResp);
  // The second reserve runs while the first waits (reserves do), and its
  // reply, ready at once, waits behind the first's place.
  worker->Send(RespCommand({"RESERVE", "TIMEOUT", "60000", "FROM", "g"}) +
               RespCommand({"RESERVE", "FROM", "other"}));
  // A later change synced: the second reserve's reservation is durable.
  EXPECT_EQ(h.Resp({"ADD", "other", "o2", "0", "60000", "x"}), Bulk("o2"));
  EXPECT_EQ(worker->Unread(), "");  // nothing passes the first reserve's place
  auto producer = h.Connect(Protocol::kResp);
  AddWhileSyncsAreHeld(*producer, "g", "g1");
  EXPECT_EQ(worker->Unread(), "");
  fs->Release();
  RespReply first = worker->ReadResp();
  ASSERT_EQ(first.elements.size(), 1u) << first.ToString();
  EXPECT_EQ(first.elements[0].elements[0], Bulk("g1"));
  RespReply second = worker->ReadResp();
  ASSERT_EQ(second.elements.size(), 1u) << second.ToString();
  EXPECT_EQ(second.elements[0].elements[0], Bulk("o1"));
}

TEST_F(ReplyGate, AnHttpLongPollIsAnsweredOnlyOnceItsReservationIsSynced) {
  auto worker = h.Connect(Protocol::kHttp);
  worker->Send(HttpRequest("POST", "/v1/reserve", R"({"topics":["g"],"wait_ms":60000})"));
  EXPECT_EQ(worker->Unread(), "");
  auto producer = h.Connect(Protocol::kResp);
  AddWhileSyncsAreHeld(*producer, "g", "g1");
  EXPECT_EQ(worker->Unread(), "");
  fs->Release();
  HttpReply got = worker->ReadHttp();
  EXPECT_EQ(got.status, 200);
  EXPECT_NE(got.body.find("\"g1\""), std::string::npos) << got.body;
}

// The sync fails (a dying disk): the replies that waited for it never
// leave. Their clients see the connection closed without a reply, as after
// a crash; new changes are refused, reads still answered.
TEST_F(ReplyGate, WhenTheSyncFailsTheWaitingRepliesNeverLeaveTheirConnectionsClose) {
  auto worker = h.Connect(Protocol::kResp);
  worker->Send(RespCommand({"RESERVE", "TIMEOUT", "60000", "FROM", "g"}));
  auto producer = h.Connect(Protocol::kResp);
  AddWhileSyncsAreHeld(*producer, "g", "g1");
  EXPECT_EQ(worker->Unread(), "");
  fs->Fail();
  EXPECT_EQ(worker->ReadToClose(), "");
  EXPECT_EQ(producer->ReadToClose(), "");
  RespReply refused = h.Resp({"ADD", "g", "g2", "0", "60000", "x"});
  EXPECT_EQ(refused.type, RespReply::Type::kError) << refused.ToString();
  EXPECT_EQ(refused.str.rfind("UNAVAILABLE", 0), 0u) << refused.str;
  EXPECT_EQ(h.Resp({"PING"}), Simple("PONG"));
}

}  // namespace
}  // namespace delayq::server::testing
