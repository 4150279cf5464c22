// The Redis client layer when masters change (issue 28), against real
// redis-server processes, replicas and sentinels (redis_harness.h): WAIT
// (Command::needs_replicas) confirmed, short, timed out, once per node and
// batch; Sentinel URLs; a failover seen as READONLY, as MOVED, and announced
// by the sentinels. Waits poll with deadlines; nothing sleeps to let time pass.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "redis/client.h"
#include "redis/redis_harness.h"
#include "redis/slot.h"
#include "redis/url.h"

namespace delayq::redis {
namespace {

using redis_harness::ElapsedMs;
using redis_harness::RedisCluster;
using redis_harness::RedisServer;
using redis_harness::RedisServerOptions;
using redis_harness::WaitFor;

std::unique_ptr<RedisServer> Start(RedisServerOptions options = {}) {
  auto s = RedisServer::Start(std::move(options));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

// A master and its replica, online and caught up; nullptrs on failure.
redis_harness::RedisPair StartPair() {
  auto pair = redis_harness::RedisPair::Start();
  EXPECT_TRUE(pair.ok()) << pair.status().ToString();
  return pair.ok() ? std::move(*pair) : redis_harness::RedisPair{};
}

std::unique_ptr<RedisServer> StartSentinelOf(const RedisServer& master) {
  RedisServerOptions o;
  o.sentinel = RedisServerOptions::Sentinel{};
  o.sentinel->master_port = master.port();
  return Start(o);
}

std::string Role(const RedisServer& s) {
  auto role = s.Command({"ROLE"});
  if (!role.ok() || !role->is_array() || role->elements().empty()) return "?";
  return role->elements()[0].str();
}

Command Change(const std::string& key, const std::string& value) {
  Command c;
  c.key = key;
  c.argv = {"SET", key, value};
  c.needs_replicas = true;
  return c;
}

Command Read(const std::string& key) {
  Command c;
  c.key = key;
  c.argv = {"GET", key};
  return c;
}

ClientOptions Waiting(int replicas, int timeout_ms) {
  ClientOptions o;
  o.wait_replicas = replicas;
  o.wait_timeout_ms = timeout_ms;
  return o;
}

std::unique_ptr<Client> Open(const std::string& url, ClientOptions options = {}) {
  auto c = Client::Open(url, std::move(options));
  EXPECT_TRUE(c.ok()) << url << ": " << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

uint64_t WaitCalls(const RedisServer& s) {
  auto info = s.Command({"INFO", "commandstats"});
  if (!info.ok() || !info->is_string()) return 0;
  size_t at = info->str().find("cmdstat_wait:calls=");
  if (at == std::string::npos) return 0;
  return std::stoull(info->str().substr(at + 19));
}

// --- URLs ------------------------------------------------------------------

TEST(SentinelUrl, NamesTheSentinelsAndTheMaster) {
  auto u = ParseRedisUrl("redis+sentinel://:pw@10.0.0.1,10.0.0.2:26380/my%20master/2");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_TRUE(u->sentinel());
  EXPECT_EQ(u->sentinel_master, "my master");
  ASSERT_EQ(u->seeds.size(), 2u);
  EXPECT_EQ(u->seeds[0].port, 26379);  // a sentinel's default port
  EXPECT_EQ(u->seeds[1].port, 26380);
  EXPECT_EQ(u->db, 2);
  EXPECT_EQ(*u->password, "pw");
  EXPECT_EQ(u->ToString(), "redis+sentinel://:***@10.0.0.1:26379,10.0.0.2:26380/my master/2");
  auto plain = ParseRedisUrl("redis://h/3");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->sentinel());
}

TEST(SentinelUrl, WithoutAMasterNameIsRefusedSayingWhatIsMissing) {
  for (const char* url : {"redis+sentinel://h:26379", "redis+sentinel://h:26379/"}) {
    auto u = ParseRedisUrl(url);
    ASSERT_FALSE(u.ok()) << url;
    EXPECT_NE(u.status().message().find("no master name"), std::string::npos)
        << u.status().message();
  }
  auto other = ParseRedisUrl("http://h");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("redis+sentinel://"), std::string::npos);
}

// --- WAIT ------------------------------------------------------------------

TEST(WaitReplicas, AChangeConfirmedByAReplicaCountsAndTheReplicaHasIt) {
  auto [master, replica] = StartPair();
  ASSERT_TRUE(master && replica);
  auto client = Open(master->url(), Waiting(1, 5000));
  ASSERT_TRUE(client);

  auto r = client->Exec(Change("k", "v1"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->str(), "OK");
  // Confirmed means there: the replica answers it now, no waiting.
  auto on_replica = replica->Command({"GET", "k"});
  ASSERT_TRUE(on_replica.ok());
  EXPECT_EQ(on_replica->str(), "v1");

  Topology t = client->topology();
  EXPECT_EQ(t.mode, Topology::Mode::kStandalone);
  ASSERT_EQ(t.masters.size(), 1u);
  EXPECT_EQ(t.masters[0].replicas, 1);
  EXPECT_EQ(t.masters[0].acked, 1);
  EXPECT_EQ(t.waits, 1u);
  EXPECT_EQ(t.wait_shortfalls, 0u);
}

TEST(WaitReplicas, OneWaitPerNodeHoweverManyChangesABatchHolds) {
  auto [master, replica] = StartPair();
  ASSERT_TRUE(master && replica);
  auto client = Open(master->url(), Waiting(1, 5000));
  ASSERT_TRUE(client);

  std::vector<Command> batch;
  for (int i = 0; i < 50; ++i) batch.push_back(Change("k" + std::to_string(i), "v"));
  for (int i = 0; i < 5; ++i) batch.push_back(Read("k" + std::to_string(i)));
  for (auto& r : client->ExecBatch(batch)) ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(WaitCalls(*master), 1u);

  // Reads alone wait for nobody.
  for (auto& r : client->ExecBatch({Read("k1"), Read("k2")})) ASSERT_TRUE(r.ok());
  EXPECT_EQ(WaitCalls(*master), 1u);
  EXPECT_EQ(client->topology().waits, 1u);
}

TEST(WaitReplicas, AReplicaCountThatCannotBeReachedAnswersUnavailable) {
  auto master = Start();  // no replica at all
  ASSERT_TRUE(master);
  auto client = Open(master->url(), Waiting(1, 100));
  ASSERT_TRUE(client);

  auto r = client->Exec(Change("k", "v"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("WAIT confirmed 0 of 1 replicas within 100 ms"),
            std::string::npos)
      << r.status().message();
  // What unavailable means here: the master made the change; nobody
  // confirmed it survives the master.
  auto there = master->Command({"GET", "k"});
  ASSERT_TRUE(there.ok());
  EXPECT_EQ(there->str(), "v");

  // A read in the same batch is answered as Redis answered it; an error reply
  // to a change is the error, not unavailable (Redis made no change).
  Command bad;
  bad.key = "k";
  bad.argv = {"INCR", "k"};
  bad.needs_replicas = true;
  auto results = client->ExecBatch({Read("k"), bad});
  ASSERT_TRUE(results[0].ok());
  EXPECT_EQ(results[0]->str(), "v");
  ASSERT_TRUE(results[1].ok()) << results[1].status().ToString();
  EXPECT_TRUE(results[1]->is_error());

  Topology t = client->topology();
  EXPECT_EQ(t.masters[0].acked, 0);
  EXPECT_EQ(t.waits, 2u);
  EXPECT_EQ(t.wait_shortfalls, 2u);
}

// After one full WAIT fell short, the master's next WAITs are short, so it
// holds up a batch (and every other master's commands in it) for
// milliseconds, not the full timeout.
TEST(WaitReplicas, AfterAShortfallTheNextWaitsOnThatMasterAreBrief) {
  auto master = Start();  // no replica at all
  ASSERT_TRUE(master);
  auto client = Open(master->url(), Waiting(1, 1000));
  ASSERT_TRUE(client);
  auto began = std::chrono::steady_clock::now();
  ASSERT_FALSE(client->Exec(Change("a", "1")).ok());
  EXPECT_GE(ElapsedMs(began), 990);
  for (int i = 0; i < 3; ++i) {
    began = std::chrono::steady_clock::now();
    auto r = client->Exec(Change("b", "2"));
    int64_t took = ElapsedMs(began);
    ASSERT_FALSE(r.ok());
    EXPECT_LT(took, 500) << "a WAIT known to fall short waited long again";
    EXPECT_NE(r.status().message().find("within 100 ms (its last WAIT of 1000 ms fell short too)"),
              std::string::npos)
        << r.status().message();
  }
}

TEST(WaitReplicas, AWaitThatTimesOutWhileTheReplicaHangsThenRecovers) {
  auto [master, replica] = StartPair();
  ASSERT_TRUE(master && replica);
  auto client = Open(master->url(), Waiting(1, 200));
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->Exec(Change("a", "1")).ok());

  ASSERT_TRUE(replica->Pause().ok());  // SIGSTOP: connected, silent
  auto began = std::chrono::steady_clock::now();
  auto r = client->Exec(Change("b", "2"));
  int64_t took = ElapsedMs(began);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_GE(took, 190);  // WAIT's own timeout, not the connection's
  EXPECT_LT(took, 3000);
  EXPECT_NE(r.status().message().find("confirmed 0 of 1"), std::string::npos)
      << r.status().message();

  ASSERT_TRUE(replica->Resume().ok());
  EXPECT_TRUE(WaitFor([&] { return client->Exec(Change("c", "3")).ok(); }));
  EXPECT_EQ(client->topology().masters[0].acked, 1);
}

// --- Failover --------------------------------------------------------------

// A master demoted by hand, the sentinel pointed at the new one without a
// +switch-master announcement: the first command meets READONLY on the old
// master and goes to the new one.
TEST(Failover, ReadonlyFromADemotedMasterSendsTheCommandToTheNewOne) {
  auto [a, b] = StartPair();
  ASSERT_TRUE(a && b);
  auto sentinel = StartSentinelOf(*a);
  ASSERT_TRUE(sentinel);
  auto client = Open("redis+sentinel://" + sentinel->address() + "/mymaster");
  ASSERT_TRUE(client);
  Topology before = client->topology();
  EXPECT_EQ(before.mode, Topology::Mode::kSentinel);
  ASSERT_EQ(before.masters.size(), 1u);
  EXPECT_EQ(before.masters[0].endpoint.port, a->port());
  ASSERT_TRUE(client->Exec(Change("x", "1")).ok());

  ASSERT_TRUE(sentinel->Command({"SENTINEL", "REMOVE", "mymaster"}).ok());
  ASSERT_TRUE(b->Command({"REPLICAOF", "NO", "ONE"}).ok());
  ASSERT_TRUE(a->Command({"REPLICAOF", "127.0.0.1", std::to_string(b->port())}).ok());
  auto monitor = sentinel->Command(
      {"SENTINEL", "MONITOR", "mymaster", "127.0.0.1", std::to_string(b->port()), "1"});
  ASSERT_TRUE(monitor.ok() && !monitor->is_error()) << monitor->ToString();
  ASSERT_EQ(Role(*a), "slave");

  auto r = client->Exec(Change("y", "2"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto y = b->Command({"GET", "y"});
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(y->str(), "2");
  Topology after = client->topology();
  ASSERT_EQ(after.masters.size(), 1u);
  EXPECT_EQ(after.masters[0].endpoint.port, b->port());
  EXPECT_EQ(after.failovers, 1u);
}

// Without sentinels there is nowhere else to go: READONLY is unavailable,
// saying why.
TEST(Failover, AStandaloneMasterTurnedReplicaAnswersUnavailable) {
  auto a = Start();
  ASSERT_TRUE(a);
  auto b = Start();
  ASSERT_TRUE(b);
  auto client = Open(a->url());
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->Exec(Change("x", "1")).ok());
  ASSERT_TRUE(a->Command({"REPLICAOF", "127.0.0.1", std::to_string(b->port())}).ok());
  auto r = client->Exec(Change("x", "2"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("is a replica now"), std::string::npos)
      << r.status().message();
  // Reads still go there (a replica serves them).
  EXPECT_TRUE(client->Exec(Read("x")).ok());
}

// SENTINEL FAILOVER while a writer runs: the client follows the announced
// switch, and every write it confirmed with WAIT is on the new master.
TEST(Failover, ASentinelFailoverIsFollowedAndLosesNoConfirmedWrite) {
  auto [a, b] = StartPair();
  ASSERT_TRUE(a && b);
  auto sentinel = StartSentinelOf(*a);
  ASSERT_TRUE(sentinel);
  // The sentinel must know the replica before it can fail over to it.
  ASSERT_TRUE(WaitFor([&] {
    auto r = sentinel->Command({"SENTINEL", "REPLICAS", "mymaster"});
    return r.ok() && r->is_array() && !r->elements().empty();
  }));
  auto client = Open("redis+sentinel://" + sentinel->address() + "/mymaster", Waiting(1, 300));
  ASSERT_TRUE(client);

  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<std::string> confirmed;
  int unavailable = 0;
  std::thread writer([&] {
    for (int i = 0; i < 100000 && !stop; ++i) {
      std::string key = "w" + std::to_string(i);
      auto r = client->Exec(Change(key, "v"));
      std::lock_guard lock(mu);
      if (r.ok() && r->is_status()) {
        confirmed.push_back(key);
      } else {
        ++unavailable;
      }
    }
  });
  ASSERT_TRUE(WaitFor([&] {
    std::lock_guard lock(mu);
    return confirmed.size() >= 20;
  }));
  // Until the sentinel has heard from the replica itself, it answers
  // NOGOODSLAVE: asked again until it starts.
  std::string refused;
  ASSERT_TRUE(WaitFor([&] {
    auto fo = sentinel->Command({"SENTINEL", "FAILOVER", "mymaster"});
    refused = fo.ok() ? fo->ToString() : fo.status().ToString();
    return fo.ok() && !fo->is_error();
  })) << refused;
  auto began = std::chrono::steady_clock::now();
  bool switched = WaitFor(
      [&] {
        Topology t = client->topology();
        return !t.masters.empty() && t.masters[0].endpoint.port == b->port();
      },
      20000);
  const int64_t switched_ms = ElapsedMs(began);
  // The sentinel turns the old master into a replica once its periodic INFO
  // (every 10 s) shows it still a master; as a restart with --replicaof
  // would, the test does it now. Writes go on until confirmed ones land on
  // the new master, with the old one as its replica.
  ASSERT_TRUE(a->Command({"REPLICAOF", "127.0.0.1", std::to_string(b->port())}).ok());
  size_t at_switch = 0;
  {
    std::lock_guard lock(mu);
    at_switch = confirmed.size();
  }
  bool resumed = WaitFor(
      [&] {
        std::lock_guard lock(mu);
        return confirmed.size() > at_switch + 20;
      },
      20000);
  stop = true;
  writer.join();
  std::printf("failover followed %lld ms, writes confirmed again %lld ms after SENTINEL FAILOVER\n",
              static_cast<long long>(switched_ms), static_cast<long long>(ElapsedMs(began)));
  ASSERT_TRUE(switched) << "the client never followed the failover";
  ASSERT_TRUE(resumed) << "no write was confirmed after the failover";
  EXPECT_EQ(Role(*b), "master");
  EXPECT_GE(client->topology().failovers, 1u);
  std::lock_guard lock(mu);
  for (const std::string& key : confirmed) {
    auto v = b->Command({"GET", key});
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->ToString(), "\"v\"") << key << " was confirmed and is gone";
  }
}

// A cluster replica promoted (CLUSTER FAILOVER TAKEOVER): the old master answers
// MOVED, the command goes to the new one, and WAIT is answered there by the
// old master, now its replica.
TEST(Failover, MovedAfterAClusterFailoverReachesThePromotedReplica) {
  auto cluster = RedisCluster::Start(3, {}, /*replicas=*/1);
  ASSERT_TRUE(cluster.ok()) << cluster.status().ToString();
  RedisCluster& c = **cluster;
  auto client = Open(c.url(), Waiting(1, 2000));
  ASSERT_TRUE(client);
  const std::string key = "{failover}k";
  ASSERT_TRUE(client->Exec(Change(key, "1")).ok());
  auto owner = c.OwnerOf(KeySlot(key));
  ASSERT_TRUE(owner.ok()) << owner.status().ToString();
  // Its replica: the node that says ROLE slave of the owner's port.
  size_t replica = c.size();
  for (size_t i = 0; i < c.size(); ++i) {
    auto role = c.node(i).Command({"ROLE"});
    if (role.ok() && role->is_array() && role->elements().size() >= 3 &&
        role->elements()[0].str() == "slave" &&
        role->elements()[2].integer() == c.node(*owner).port()) {
      replica = i;
    }
  }
  ASSERT_LT(replica, c.size());
  EXPECT_EQ(client->topology().masters.size(), 3u);

  // TAKEOVER: no vote to wait for (the replica is in sync: the write above
  // was confirmed by WAIT).
  auto takeover = c.node(replica).Command({"CLUSTER", "FAILOVER", "TAKEOVER"});
  ASSERT_TRUE(takeover.ok() && !takeover->is_error()) << takeover->ToString();
  ASSERT_TRUE(WaitFor([&] { return Role(c.node(*owner)) == "slave"; }, 20000));
  ASSERT_TRUE(c.WaitHealthy(20000).ok());
  ASSERT_TRUE(c.WaitReplicas(1).ok());

  auto r = client->Exec(Change(key, "2"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  auto v = c.node(replica).Command({"GET", key});
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->str(), "2");
  // The MOVED asked for a reload of the map, made at once or, within
  // min_refresh_interval_ms of the last, by a later call.
  EXPECT_TRUE(WaitFor([&] {
    (void)client->Exec(Read(key));
    return client->topology().failovers == 1;
  }));
  Topology t = client->topology();
  EXPECT_EQ(t.failovers, 1u);
  ASSERT_EQ(t.masters.size(), 3u);
  bool promoted_known = false;
  for (const auto& m : t.masters) {
    promoted_known = promoted_known || m.endpoint.port == c.node(replica).port();
  }
  EXPECT_TRUE(promoted_known);
}

}  // namespace
}  // namespace delayq::redis
