// The Redis client layer against real redis-server processes (redis_harness.h):
// URLs, slots, SHA-1, Connection, Client on a standalone server and on a
// 3-master cluster (MOVED, ASK, scripts, dead nodes), and Subscriber.
// Waits poll with deadlines; nothing sleeps to let time pass.
#include "redis/client.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "redis/connection.h"
#include "redis/redis_harness.h"
#include "redis/slot.h"
#include "redis/subscriber.h"
#include "redis/url.h"

namespace delayq::redis {
namespace {

using redis_harness::ElapsedMs;
using redis_harness::RedisCluster;
using redis_harness::RedisServer;
using redis_harness::RedisServerOptions;
using redis_harness::WaitFor;
using Ms = std::chrono::milliseconds;
using namespace std::string_literals;

RedisServerOptions WithPassword(std::string password) {
  RedisServerOptions o;
  o.password = std::move(password);
  return o;
}

std::unique_ptr<RedisServer> StartServer(RedisServerOptions options = {}) {
  auto s = RedisServer::Start(std::move(options));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(*s) : nullptr;
}

std::unique_ptr<Client> OpenClient(const std::string& url, ClientOptions options = {}) {
  auto c = Client::Open(url, std::move(options));
  EXPECT_TRUE(c.ok()) << url << ": " << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

// A Script of `source`, its SHA-1 computed by `server` (redis.sha1hex), which
// leaves the script itself unloaded: the product code has no SHA-1 of its own.
Script MakeScript(const RedisServer& server, std::string source) {
  auto sha1 = server.Command({"EVAL", "return redis.sha1hex(ARGV[1])", "0", source});
  EXPECT_TRUE(sha1.ok() && sha1->is_string()) << (sha1.ok() ? sha1->ToString() : "no reply");
  return Script(std::move(source), sha1.ok() && sha1->is_string() ? sha1->str() : "");
}

// ---------------------------------------------------------------------------
// URLs

TEST(RedisUrl, ParsesOneHostWithDefaults) {
  auto u = ParseRedisUrl("redis://localhost");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  ASSERT_EQ(u->seeds.size(), 1u);
  EXPECT_EQ(u->seeds[0], (Endpoint{"localhost", 6379}));
  EXPECT_FALSE(u->password.has_value());
  EXPECT_EQ(u->user, "");
  EXPECT_EQ(u->db, 0);
}

TEST(RedisUrl, ParsesUserPasswordSeveralSeedsAndDb) {
  auto u = ParseRedisUrl("redis://app:secret@10.0.0.1:7000,10.0.0.2:7001,[::1]:7002/3");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->user, "app");
  EXPECT_EQ(u->password, "secret");
  ASSERT_EQ(u->seeds.size(), 3u);
  EXPECT_EQ(u->seeds[0], (Endpoint{"10.0.0.1", 7000}));
  EXPECT_EQ(u->seeds[1], (Endpoint{"10.0.0.2", 7001}));
  EXPECT_EQ(u->seeds[2], (Endpoint{"::1", 7002}));
  EXPECT_EQ(u->seeds[2].ToString(), "[::1]:7002");
  EXPECT_EQ(u->db, 3);

  auto only_password = ParseRedisUrl("redis://:pw@h:1/");
  ASSERT_TRUE(only_password.ok());
  EXPECT_EQ(only_password->user, "");
  EXPECT_EQ(only_password->password, "pw");
  EXPECT_EQ(only_password->db, 0);
}

TEST(RedisUrl, DecodesAPercentEncodedPassword) {
  auto u = ParseRedisUrl("redis://:p%40ss%3Aw%2Frd%25@h:6379");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->password, "p@ss:w/rd%");
  // An unescaped '@' in the password still parses: userinfo ends at the last '@'.
  auto raw = ParseRedisUrl("redis://:a@b@h:6379");
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  EXPECT_EQ(raw->password, "a@b");
}

TEST(RedisUrl, RedissIsTheSameUrlOverTls) {
  auto u = ParseRedisUrl("rediss://app:secret@h:1,g:2/4");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->seeds.size(), 2u);
  EXPECT_EQ(u->db, 4);
  EXPECT_EQ(u->ToString(), "rediss://app:***@h:1,g:2/4");
  EXPECT_EQ(RedactUrl("rediss://app:secret@h:1"), "rediss://***@h:1");
  auto plain = ParseRedisUrl("redis://h:1");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->tls);
}

TEST(RedisUrl, ToStringHidesThePassword) {
  auto u = ParseRedisUrl("redis://app:secret@h:1,g:2/4");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->ToString(), "redis://app:***@h:1,g:2/4");
}

TEST(RedisUrl, AnErrorNeverShowsThePassword) {
  auto bad = ParseRedisUrl("redis://admin:s3cretpw@127.0.0.1:notaport");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().find("s3cretpw"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("redis://***@127.0.0.1:notaport"), std::string::npos)
      << bad.status().message();
}

TEST(RedisUrl, RejectsEachBadFormNamingWhatIsWrong) {
  struct Case {
    const char* url;
    const char* says;
  };
  const Case cases[] = {
      {"http://h:1", "unsupported scheme 'http'"},
      {"rediss+sentinel://h:1/m", "TLS with Sentinel is not supported"},
      {"rediss:/h:1", "start with redis://"},
      {"h:6379", "redis://"},
      {"redis://", "empty host"},
      {"redis:///2", "empty host"},
      {"redis://:6379", "empty host"},
      {"redis://h:1,,g:2", "empty host"},
      {"redis://h:", "port ''"},
      {"redis://h:0", "port '0'"},
      {"redis://h:65536", "port '65536'"},
      {"redis://h:63x9", "port '63x9'"},
      {"redis://h:1/x", "db 'x'"},
      {"redis://h:1/-1", "db '-1'"},
      {"redis://pw@h:1", "[user]:password@"},
      {"redis://:bad%4@h:1", "percent escape"},
      {"redis://h:1?db=2", "query"},
      {"redis://::1:6379", "brackets"},
      {"redis://[::1:6379", "']'"},
  };
  for (const Case& c : cases) {
    auto u = ParseRedisUrl(c.url);
    ASSERT_FALSE(u.ok()) << c.url;
    EXPECT_EQ(u.status().code(), Code::kInvalidArgument) << c.url;
    EXPECT_NE(u.status().message().find(c.says), std::string::npos)
        << c.url << " -> " << u.status().message();
  }
}

// ---------------------------------------------------------------------------
// Slots, SHA-1, replies

TEST(KeySlot, Crc16IsXmodem) {
  EXPECT_EQ(Crc16("123456789"), 0x31C3);  // the CRC-16/XMODEM check value
  EXPECT_EQ(Crc16(""), 0);
  EXPECT_EQ(KeySlot("123456789"), 0x31C3);
  EXPECT_EQ(KeySlot("foo"), 12182);  // CLUSTER KEYSLOT foo
}

TEST(KeySlot, HashTagsFollowTheClusterSpec) {
  EXPECT_EQ(HashTag("{user1000}.following"), "user1000");
  EXPECT_EQ(KeySlot("{user1000}.following"), KeySlot("{user1000}.followers"));
  EXPECT_EQ(HashTag("foo{}{bar}"), "foo{}{bar}");  // empty tag: the whole key
  EXPECT_EQ(HashTag("foo{{bar}}zap"), "{bar");
  EXPECT_EQ(HashTag("foo{bar}{zap}"), "bar");
  EXPECT_EQ(HashTag("foo{bar"), "foo{bar");
  EXPECT_EQ(HashTag("}{x}"), "x");
}

TEST(Reply, RendersEveryTypeAndNamesErrorCodes) {
  Reply r = Reply::Array({Reply::Integer(-3), Reply::String("a\"\n\0"s), Reply::Nil(),
                          Reply::Status("OK"), Reply::Array({Reply::Error("ERR x")})});
  EXPECT_EQ(r.ToString(), "[-3, \"a\\\"\\x0a\\x00\", nil, +OK, [-ERR x]]");
  EXPECT_EQ(Reply::Error("MOVED 1 h:2").error_code(), "MOVED");
  EXPECT_EQ(Reply::Error("NOSCRIPT").error_code(), "NOSCRIPT");
  EXPECT_EQ(Reply::String("MOVED").error_code(), "");
}

// ---------------------------------------------------------------------------
// A standalone server

class Standalone : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = StartServer().release(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    ASSERT_TRUE(server_->Command({"FLUSHALL"}).ok());
    ASSERT_TRUE(server_->Command({"SCRIPT", "FLUSH"}).ok());
    client_ = OpenClient(server_->url());
    ASSERT_NE(client_, nullptr);
  }
  static RedisServer* server_;
  std::unique_ptr<Client> client_;
};
RedisServer* Standalone::server_ = nullptr;

TEST_F(Standalone, IsNotACluster) {
  EXPECT_FALSE(client_->cluster());
  ASSERT_EQ(client_->Masters().size(), 1u);
  EXPECT_EQ(client_->Masters()[0].port, server_->port());
}

TEST_F(Standalone, ArgumentsAndValuesAreBinarySafe) {
  const std::string key("k\0ey\r\n with space"s);
  std::string value;
  for (int i = 0; i < 256; ++i) value += static_cast<char>(i);
  value += std::string(100000, '\0');
  Command set{key, {"SET", key, value}};
  auto r = client_->Exec(set);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ToString(), "+OK");
  auto got = client_->Exec(key, {"GET", key});
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(got->is_string());
  EXPECT_EQ(got->str(), value);
  auto len = client_->Exec(key, {"STRLEN", key});
  ASSERT_TRUE(len.ok());
  EXPECT_EQ(len->integer(), static_cast<int64_t>(value.size()));
}

TEST_F(Standalone, RepliesOfEveryTypeComeBackNested) {
  auto r = client_->Exec(
      "", {"EVAL", "return {1, 'two', {3, {'four'}}, redis.status_reply('FINE')}", "0"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ToString(), "[1, \"two\", [3, [\"four\"]], +FINE]");
  // An empty array and a nil inside one (Lua's false) keep their places.
  auto edges = client_->Exec("", {"EVAL", "return {{}, false, {{}}, 'x'}", "0"});
  ASSERT_TRUE(edges.ok()) << edges.status().ToString();
  ASSERT_TRUE(edges->is_array());
  ASSERT_EQ(edges->elements().size(), 4u);
  EXPECT_TRUE(edges->elements()[0].is_array());
  EXPECT_TRUE(edges->elements()[0].elements().empty());
  EXPECT_TRUE(edges->elements()[1].is_nil());
  EXPECT_EQ(edges->elements()[2].ToString(), "[[]]");
  EXPECT_EQ(edges->elements()[3].str(), "x");
  auto nil = client_->Exec("missing", {"GET", "missing"});
  ASSERT_TRUE(nil.ok());
  EXPECT_TRUE(nil->is_nil());
}

TEST_F(Standalone, ErrorRepliesComeBackAsRepliesAndEmptyCommandsAreRefused) {
  ASSERT_TRUE(client_->Exec("s", {"SET", "s", "text"}).ok());
  auto r = client_->Exec("s", {"INCR", "s"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->is_error());
  EXPECT_EQ(r->error_code(), "ERR");
  auto unknown = client_->Exec("", {"NOSUCHCOMMAND"});
  ASSERT_TRUE(unknown.ok());
  EXPECT_TRUE(unknown->is_error());
  // An empty command would get no reply at all: refused before it is sent.
  auto replies = client_->ExecBatch({{"", {}}, {"", {"PING"}}});
  EXPECT_EQ(replies[0].status().code(), Code::kInvalidArgument);
  ASSERT_TRUE(replies[1].ok());
  EXPECT_EQ(replies[1]->ToString(), "+PONG");
}

TEST_F(Standalone, BatchRepliesComeBackInInputOrder) {
  std::vector<Command> batch;
  for (int i = 0; i < 500; ++i) {
    std::string k = "key" + std::to_string(i);
    batch.push_back({k, {"SET", k, "v" + std::to_string(i)}});
    batch.push_back({k, {"GET", k}});
    batch.push_back({k, {"INCR", "counter"}});
  }
  auto replies = client_->ExecBatch(batch);
  ASSERT_EQ(replies.size(), batch.size());
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE(replies[3 * i].ok());
    EXPECT_EQ(replies[3 * i]->ToString(), "+OK");
    ASSERT_TRUE(replies[3 * i + 1].ok());
    EXPECT_EQ(replies[3 * i + 1]->str(), "v" + std::to_string(i));
    ASSERT_TRUE(replies[3 * i + 2].ok());
    EXPECT_EQ(replies[3 * i + 2]->integer(), i + 1);
  }
}

TEST_F(Standalone, ConnectionPipelineRepliesComeBackInOrder) {
  auto conn = Connection::Open(Endpoint{"127.0.0.1", server_->port()}, {});
  ASSERT_TRUE(conn.ok()) << conn.status().ToString();
  std::vector<Argv> cmds;
  for (int i = 0; i < 100; ++i) cmds.push_back({"ECHO", "m" + std::to_string(i)});
  auto replies = (*conn)->ExecMany(cmds);
  ASSERT_TRUE(replies.ok()) << replies.status().ToString();
  ASSERT_EQ(replies->size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ((*replies)[i].str(), "m" + std::to_string(i));
  auto single = (*conn)->Exec({"PING"});
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->str(), "PONG");
}

// The test process keeps SIGPIPE's default action (death), as an embedding
// application may: a write to a connection the server reset must fail, not kill.
TEST_F(Standalone, WritingToAResetConnectionIsAnErrorNotASigpipe) {
  auto conn = Connection::Open(Endpoint{"127.0.0.1", server_->port()}, {});
  ASSERT_TRUE(conn.ok());
  auto id = (*conn)->Exec({"CLIENT", "ID"});
  ASSERT_TRUE(id.ok() && id->is_integer());
  ASSERT_TRUE((*conn)->Append({"PING"}).ok());
  ASSERT_TRUE(server_->Command({"CLIENT", "KILL", "ID", std::to_string(id->integer())}).ok());
  auto readable = [&](short events) {
    pollfd p{(*conn)->fd(), POLLIN, 0};
    return poll(&p, 1, 0) == 1 && (p.revents & events) != 0;
  };
  ASSERT_TRUE(WaitFor([&] { return readable(POLLIN); }));  // the server's FIN
  (void)(*conn)->Flush();  // lands on a closed socket: the peer answers RST
  ASSERT_TRUE(WaitFor([&] { return readable(POLLERR | POLLHUP); }));
  Status s = (*conn)->Append({"ECHO", std::string(1 << 20, 'x')});
  if (s.ok()) s = (*conn)->Flush();  // EPIPE, and a SIGPIPE swallowed
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kUnavailable);
  EXPECT_NE(s.message().find("Broken pipe"), std::string::npos) << s.message();
  EXPECT_FALSE((*conn)->connected());
  auto again = (*conn)->Exec({"PING"});  // reconnects
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

TEST_F(Standalone, ScriptRunsBySha1AndSurvivesScriptFlush) {
  Script script = MakeScript(*server_, "return {KEYS[1], ARGV[1], redis.call('INCR', KEYS[1])}");
  auto loaded = server_->Command({"SCRIPT", "LOAD", script.source()});
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->str(), script.sha1());  // our SHA-1 is Redis's
  ASSERT_TRUE(server_->Command({"SCRIPT", "FLUSH"}).ok());

  auto first = client_->Exec(Command::Eval(script, {"n"}, {"x"}));  // NOSCRIPT -> load -> run
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->ToString(), "[\"n\", \"x\", 1]");
  auto again = client_->Exec(Command::Eval(script, {"n"}, {"y"}));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->ToString(), "[\"n\", \"y\", 2]");

  ASSERT_TRUE(server_->Command({"SCRIPT", "FLUSH"}).ok());
  std::vector<Command> batch;
  for (int i = 0; i < 10; ++i) batch.push_back(Command::Eval(script, {"n"}, {std::to_string(i)}));
  auto replies = client_->ExecBatch(batch);
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(replies[i].ok()) << replies[i].status().ToString();
    ASSERT_TRUE(replies[i]->is_array()) << replies[i]->ToString();
    EXPECT_EQ(replies[i]->elements()[2].integer(), 3 + i);  // in order, each once
  }
  // A script error is a reply, and is not retried.
  Script broken = MakeScript(*server_, "return redis.call('NOSUCH')");
  auto error = client_->Exec(Command::Eval(broken, {}, {}));
  ASSERT_TRUE(error.ok());
  EXPECT_TRUE(error->is_error()) << error->ToString();
}

TEST_F(Standalone, UsesTheDbOfTheUrl) {
  auto db2 = OpenClient(server_->url() + "/2");
  ASSERT_NE(db2, nullptr);
  ASSERT_TRUE(db2->Exec("k", {"SET", "k", "in db 2"}).ok());
  auto in0 = client_->Exec("k", {"GET", "k"});
  ASSERT_TRUE(in0.ok());
  EXPECT_TRUE(in0->is_nil());
  auto got = db2->Exec("k", {"GET", "k"});
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->str(), "in db 2");
  auto bad = Client::Open(server_->url() + "/100000");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("SELECT refused"), std::string::npos)
      << bad.status().message();
}

TEST_F(Standalone, ConcurrentPipelinesNeverMixReplies) {
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        std::vector<Command> batch;
        for (int i = 0; i < 20; ++i) {
          batch.push_back({"",
                           {"ECHO", std::to_string(t) + ":" + std::to_string(round) + ":" +
                                        std::to_string(i)}});
        }
        auto replies = client_->ExecBatch(batch);
        for (int i = 0; i < 20; ++i) {
          if (!replies[i].ok() || replies[i]->str() != batch[i].argv[1]) ++wrong;
        }
        auto one = client_->Exec("", {"ECHO", std::to_string(t)});
        if (!one.ok() || one->str() != std::to_string(t)) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

// ---------------------------------------------------------------------------
// AUTH

TEST(Auth, PasswordInTheUrlIsSent) {
  auto server = StartServer(WithPassword("s3cret"));
  ASSERT_NE(server, nullptr);
  auto client = OpenClient(server->url());
  ASSERT_NE(client, nullptr);
  auto r = client->Exec("k", {"SET", "k", "v"});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->ToString(), "+OK");
}

TEST(Auth, WrongPasswordIsAClearError) {
  auto server = StartServer(WithPassword("s3cret"));
  ASSERT_NE(server, nullptr);
  auto client = Client::Open("redis://:wrong@" + server->address());
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Code::kUnavailable);
  const std::string& m = client.status().message();
  EXPECT_NE(m.find("AUTH refused"), std::string::npos) << m;
  EXPECT_NE(m.find("WRONGPASS"), std::string::npos) << m;
  EXPECT_NE(m.find(server->address()), std::string::npos) << m;
  EXPECT_EQ(m.find("wrong"), std::string::npos) << "the password leaked: " << m;
}

TEST(Auth, MissingPasswordIsAClearError) {
  auto server = StartServer(WithPassword("s3cret"));
  ASSERT_NE(server, nullptr);
  auto client = Client::Open("redis://" + server->address());
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("NOAUTH"), std::string::npos)
      << client.status().message();
  EXPECT_NE(client.status().message().find("no password"), std::string::npos)
      << client.status().message();
}

TEST(Auth, AclUserWithAPercentEncodedPassword) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto acl = server->Command({"ACL", "SETUSER", "app", "on", ">p@ss:w/rd", "~*", "&*", "+@all"});
  ASSERT_TRUE(acl.ok() && acl->is_status()) << (acl.ok() ? acl->ToString() : "");
  auto client = OpenClient("redis://app:p%40ss%3Aw%2Frd@" + server->address());
  ASSERT_NE(client, nullptr);
  auto who = client->Exec("", {"ACL", "WHOAMI"});
  ASSERT_TRUE(who.ok());
  EXPECT_EQ(who->str(), "app");
  auto bad_user = Client::Open("redis://nobody:p%40ss%3Aw%2Frd@" + server->address());
  ASSERT_FALSE(bad_user.ok());
  EXPECT_NE(bad_user.status().message().find("AUTH refused"), std::string::npos);
}

// ---------------------------------------------------------------------------
// Failures: a hung Redis, a dead Redis, a restarted Redis

TEST(Failure, HungRedisTimesOutWithinTheCommandTimeout) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  ClientOptions options;
  options.connection.command_timeout_ms = 300;
  auto client = OpenClient(server->url(), options);
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Exec("k", {"SET", "k", "v"}).ok());
  ASSERT_TRUE(server->Pause().ok());
  auto start = std::chrono::steady_clock::now();
  auto r = client->Exec("k", {"GET", "k"});
  int64_t took = ElapsedMs(start);
  ASSERT_TRUE(server->Resume().ok());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("no reply within 300 ms"), std::string::npos)
      << r.status().message();
  EXPECT_GE(took, 250);
  EXPECT_LT(took, 2000);
  // The connection is replaced; the next call works.
  EXPECT_TRUE(WaitFor([&] {
    auto again = client->Exec("k", {"GET", "k"});
    return again.ok() && again->is_string() && again->str() == "v";
  }));
}

TEST(Failure, KilledRedisIsUnavailableAtOnceAndRecoversAfterRestart) {
  RedisServerOptions aof;
  aof.append_only = true;
  auto server = StartServer(aof);
  ASSERT_NE(server, nullptr);
  auto client = OpenClient(server->url());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Exec("kept", {"SET", "kept", "yes"}).ok());

  ASSERT_TRUE(server->Kill().ok());
  auto start = std::chrono::steady_clock::now();
  auto r = client->Exec("kept", {"GET", "kept"});
  EXPECT_LT(ElapsedMs(start), 1000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find(server->address()), std::string::npos)
      << r.status().message();
  // While it backs off, calls fail fast without touching the network.
  for (int i = 0; i < 20; ++i) {
    start = std::chrono::steady_clock::now();
    auto again = client->Exec("kept", {"GET", "kept"});
    EXPECT_FALSE(again.ok());
    EXPECT_LT(ElapsedMs(start), 500);  // no connect timeout (loose: a loaded machine)
  }
  std::vector<Command> batch = {{"a", {"GET", "a"}}, {"b", {"GET", "b"}}};
  for (auto& rr : client->ExecBatch(batch)) EXPECT_EQ(rr.status().code(), Code::kUnavailable);

  ASSERT_TRUE(server->Restart().ok());
  Result<Reply> last = Unavailable("not yet");
  EXPECT_TRUE(WaitFor([&] {
    last = client->Exec("kept", {"GET", "kept"});
    return last.ok();
  })) << last.status().ToString();
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->str(), "yes");  // AOF kept it
}

TEST(Failure, RestartedRedisIsPickedUpWithoutAFailedCall) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  auto client = OpenClient(server->url());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Exec("", {"PING"}).ok());
  ASSERT_TRUE(server->Stop().ok());
  ASSERT_TRUE(server->Restart().ok());
  // The pooled connection was closed by the old server while idle: it is
  // noticed before writing, and replaced.
  auto r = client->Exec("", {"PING"});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
}

// The message says "the Redis addresses given" (not "seeds", this code's
// word), shows the URL without its password, and each address's error.
TEST(Failure, NoAddressAnsweringIsUnavailableNamingEachOne) {
  auto a = StartServer();
  auto b = StartServer();
  ASSERT_TRUE(a && b);
  std::string url = "redis://" + a->address() + "," + b->address();
  ASSERT_TRUE(a->Kill().ok());
  ASSERT_TRUE(b->Kill().ok());
  auto client = Client::Open(url);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), Code::kUnavailable);
  const std::string& m = client.status().message();
  EXPECT_EQ(m.find("redis: none of the Redis addresses given (" + url + ") answered: "), 0u) << m;
  EXPECT_EQ(m.find("seed"), std::string::npos) << m;
  EXPECT_NE(m.find(a->address() + ": "), std::string::npos) << m;
  EXPECT_NE(m.find(b->address() + ": "), std::string::npos) << m;
  auto with_password = Client::Open("redis://:s3cret@" + a->address());
  ASSERT_FALSE(with_password.ok());
  EXPECT_EQ(with_password.status().message().find("redis: none of the Redis addresses given "
                                                  "(redis://:***@" +
                                                  a->address() + ") answered: "),
            0u)
      << with_password.status().message();
  ASSERT_TRUE(b->Restart().ok());
  auto second_seed = Client::Open(url);  // the first seed is still down
  EXPECT_TRUE(second_seed.ok()) << second_seed.status().ToString();
}

// ---------------------------------------------------------------------------
// Subscriber

struct Inbox {
  std::mutex mu;
  std::vector<std::string> messages;  // "channel=message"
  std::atomic<int> connects{0};

  Subscriber::MessageFn OnMessage() {
    return [this](std::string_view channel, std::string_view message) {
      std::lock_guard lock(mu);
      messages.push_back(std::string(channel) + "=" + std::string(message));
    };
  }
  Subscriber::ConnectFn OnConnect() {
    return [this] { ++connects; };
  }
  bool Has(const std::string& m) {
    std::lock_guard lock(mu);
    return std::find(messages.begin(), messages.end(), m) != messages.end();
  }
};

TEST(SubscriberTest, ReceivesMessagesOfItsChannelsOnly) {
  auto server = StartServer(WithPassword("p@ss w/rd%"));
  ASSERT_NE(server, nullptr);
  Inbox inbox;
  auto sub = Subscriber::Start(server->url(), {"a", "b\0c"s}, inbox.OnMessage(), inbox.OnConnect());
  ASSERT_TRUE(sub.ok()) << sub.status().ToString();
  ASSERT_TRUE(WaitFor([&] { return inbox.connects == 1; }));
  EXPECT_TRUE((*sub)->connected());
  auto client = OpenClient(server->url());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Exec("", {"PUBLISH", "a", "one"}).ok());
  ASSERT_TRUE(client->Exec("", {"PUBLISH", "other", "no"}).ok());
  ASSERT_TRUE(client->Exec("", {"PUBLISH", "b\0c"s, "two\0bytes"s}).ok());
  EXPECT_TRUE(WaitFor([&] { return inbox.Has("a=one") && inbox.Has("b\0c=two\0bytes"s); }));
  std::lock_guard lock(inbox.mu);
  EXPECT_EQ(inbox.messages.size(), 2u);
}

TEST(SubscriberTest, SurvivesARedisRestartAndReportsTheReconnect) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  Inbox inbox;
  SubscriberOptions options;
  options.health_check_interval_ms = 200;
  auto sub =
      Subscriber::Start(server->url(), {"news"}, inbox.OnMessage(), inbox.OnConnect(), options);
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(WaitFor([&] { return inbox.connects == 1; }));
  ASSERT_TRUE(server->Command({"PUBLISH", "news", "before"}).ok());
  ASSERT_TRUE(WaitFor([&] { return inbox.Has("news=before"); }));

  ASSERT_TRUE(server->Kill().ok());
  EXPECT_TRUE(WaitFor([&] { return !(*sub)->connected(); }));
  ASSERT_TRUE(server->Restart().ok());
  ASSERT_TRUE(WaitFor([&] { return inbox.connects == 2; }));
  ASSERT_TRUE(server->Command({"PUBLISH", "news", "after"}).ok());
  EXPECT_TRUE(WaitFor([&] { return inbox.Has("news=after"); }));
}

TEST(SubscriberTest, NoticesAHungRedisByItsHealthCheck) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  Inbox inbox;
  SubscriberOptions options;
  options.health_check_interval_ms = 100;
  auto sub = Subscriber::Start(server->url(), {"x"}, inbox.OnMessage(), inbox.OnConnect(), options);
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(WaitFor([&] { return inbox.connects == 1; }));
  ASSERT_TRUE(server->Pause().ok());
  EXPECT_TRUE(WaitFor([&] { return !(*sub)->connected(); }, 3000));
  ASSERT_TRUE(server->Resume().ok());
  EXPECT_TRUE(WaitFor([&] { return inbox.connects >= 2; }));
}

TEST(SubscriberTest, StopsPromptlyWhileRedisIsDown) {
  auto server = StartServer();
  ASSERT_NE(server, nullptr);
  std::string url = server->url();
  ASSERT_TRUE(server->Kill().ok());
  Inbox inbox;
  auto sub = Subscriber::Start(url, {"x"}, inbox.OnMessage(), inbox.OnConnect());
  ASSERT_TRUE(sub.ok());
  auto start = std::chrono::steady_clock::now();
  sub->reset();
  EXPECT_LT(ElapsedMs(start), 1500);
  EXPECT_EQ(inbox.connects, 0);
}

TEST(SubscriberTest, RejectsNoChannels) {
  auto sub = Subscriber::Start("redis://127.0.0.1:1", {}, nullptr, nullptr);
  ASSERT_FALSE(sub.ok());
  EXPECT_EQ(sub.status().code(), Code::kInvalidArgument);
}

// ---------------------------------------------------------------------------
// A 3-master cluster

class ClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto c = RedisCluster::Start(3);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (c.ok()) cluster_ = c->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(cluster_, nullptr);
    client_ = OpenClient(cluster_->url());
    ASSERT_NE(client_, nullptr);
  }
  // A key of the given prefix whose slot node `node` serves.
  std::string KeyOn(size_t node, const std::string& prefix) {
    for (int i = 0; i < 1000; ++i) {
      std::string key = prefix + std::to_string(i);
      auto owner = cluster_->OwnerOf(KeySlot(key));
      if (owner.ok() && *owner == node) return key;
    }
    ADD_FAILURE() << "no key '" << prefix << "N' on node " << node;
    return prefix;
  }
  Endpoint EndpointOf(size_t node) { return {"127.0.0.1", cluster_->node(node).port()}; }

  static RedisCluster* cluster_;
  std::unique_ptr<Client> client_;
};
RedisCluster* ClusterTest::cluster_ = nullptr;

TEST_F(ClusterTest, IsDetectedAndRefusesANonZeroDb) {
  EXPECT_TRUE(client_->cluster());
  EXPECT_EQ(client_->Masters().size(), 3u);
  auto with_db = Client::Open(cluster_->url() + "/1");
  ASSERT_FALSE(with_db.ok());
  EXPECT_EQ(with_db.status().code(), Code::kInvalidArgument);
  EXPECT_NE(with_db.status().message().find("db 0 only"), std::string::npos)
      << with_db.status().message();
  // One seed is enough to learn every master.
  auto one_seed = OpenClient("redis://" + cluster_->node(1).address());
  ASSERT_NE(one_seed, nullptr);
  EXPECT_EQ(one_seed->Masters().size(), 3u);
}

TEST_F(ClusterTest, KeySlotAgreesWithClusterKeyslot) {
  std::vector<std::string> keys = {
      "",   "foo", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{", "}",
      "{}", "a{b"};
  for (int i = 0; i < 300; ++i) {
    std::string k = "key:" + std::to_string(i * 7919);
    if (i % 3 == 0) k = "{tag" + std::to_string(i) + "}" + k;
    if (i % 5 == 0) k += std::string(1, static_cast<char>(i));  // binary bytes
    keys.push_back(k);
  }
  for (const std::string& k : keys) {
    auto r = cluster_->node(0).Command({"CLUSTER", "KEYSLOT", k});
    ASSERT_TRUE(r.ok() && r->is_integer()) << k;
    EXPECT_EQ(KeySlot(k), r->integer()) << "key '" << k << "'";
  }
}

TEST_F(ClusterTest, KeysLandOnEveryMasterAndBatchesKeepInputOrder) {
  std::vector<Command> batch;
  std::vector<std::string> keys;
  for (int i = 0; i < 300; ++i) keys.push_back("spread:" + std::to_string(i));
  for (const std::string& k : keys) batch.push_back({k, {"SET", k, "v-" + k}});
  for (const std::string& k : keys) batch.push_back({k, {"GET", k}});
  auto replies = client_->ExecBatch(batch);
  ASSERT_EQ(replies.size(), batch.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(replies[i].ok()) << replies[i].status().ToString();
    EXPECT_EQ(replies[i]->ToString(), "+OK") << keys[i];
    ASSERT_TRUE(replies[keys.size() + i].ok());
    EXPECT_EQ(replies[keys.size() + i]->ToString(), "\"v-" + keys[i] + "\"");
  }
  // Each master holds its share, and exactly the keys the client sent it.
  std::set<int> ports;
  for (const std::string& k : keys) {
    auto at = client_->MasterFor(k);
    ASSERT_TRUE(at.ok());
    ports.insert(at->port);
    for (size_t n = 0; n < cluster_->size(); ++n) {
      if (cluster_->node(n).port() != at->port) continue;
      auto exists = cluster_->node(n).Command({"EXISTS", k});
      ASSERT_TRUE(exists.ok());
      EXPECT_EQ(exists->integer(), 1) << k;
    }
  }
  EXPECT_EQ(ports.size(), 3u);
}

TEST_F(ClusterTest, ScriptsRunOnEveryNodeAndSurviveScriptFlush) {
  Script script = MakeScript(cluster_->node(0), "return redis.call('INCRBY', KEYS[1], ARGV[1])");
  std::vector<Command> batch;
  for (size_t n = 0; n < 3; ++n) {
    std::string k = KeyOn(n, "script:");
    batch.push_back(Command::Eval(script, {k}, {"5"}));
  }
  auto first = client_->ExecBatch(batch);
  for (auto& r : first) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->integer(), 5) << r->ToString();
  }
  for (auto& [at, r] : client_->ExecOnEachMaster({"SCRIPT", "FLUSH"})) {
    ASSERT_TRUE(r.ok()) << at.ToString();
  }
  auto second = client_->ExecBatch(batch);
  for (auto& r : second) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->integer(), 10) << r->ToString();
  }
  auto sha = cluster_->node(2).Command({"SCRIPT", "EXISTS", script.sha1()});
  ASSERT_TRUE(sha.ok());
  EXPECT_EQ(sha->ToString(), "[1]");
}

TEST_F(ClusterTest, MovedAfterASlotMovesIsFollowedAndLearned) {
  std::string key = KeyOn(0, "moving:");
  std::string other = KeyOn(0, "staying:");
  ASSERT_NE(KeySlot(key), KeySlot(other));
  ASSERT_TRUE(client_->Exec(key, {"SET", key, "value"}).ok());
  ASSERT_TRUE(cluster_->MoveSlot(KeySlot(key), 0, 1).ok());
  // The client has not heard of the move yet.
  EXPECT_EQ(client_->MasterFor(key).value(), EndpointOf(0));

  auto got = client_->Exec(key, {"GET", key});  // node 0 answers MOVED
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(got->is_string()) << got->ToString();
  EXPECT_EQ(got->str(), "value");
  EXPECT_EQ(client_->MasterFor(key).value(), EndpointOf(1));
  EXPECT_EQ(client_->MasterFor(other).value(), EndpointOf(0));

  // Move it back: a batch meets MOVED for one command and not for the other.
  ASSERT_TRUE(cluster_->MoveSlot(KeySlot(key), 1, 0).ok());
  auto replies = client_->ExecBatch(
      {{key, {"GET", key}}, {other, {"SET", other, "x"}}, {key, {"APPEND", key, "!"}}});
  ASSERT_TRUE(replies[0].ok() && replies[0]->is_string()) << replies[0].status().ToString();
  EXPECT_EQ(replies[0]->str(), "value");
  ASSERT_TRUE(replies[1].ok());
  EXPECT_EQ(replies[1]->ToString(), "+OK");
  ASSERT_TRUE(replies[2].ok());
  EXPECT_EQ(replies[2]->integer(), 6);
  EXPECT_EQ(client_->MasterFor(key).value(), EndpointOf(0));
}

TEST_F(ClusterTest, AskDuringAMigrationReachesTheImportingNode) {
  std::string tag = "{" + KeyOn(2, "ask") + "}";
  const int slot = KeySlot(tag);
  std::string migrated = tag + "migrated", left = tag + "left", fresh = tag + "fresh";
  ASSERT_TRUE(client_->Exec(migrated, {"SET", migrated, "m"}).ok());
  ASSERT_TRUE(client_->Exec(left, {"SET", left, "l"}).ok());

  ASSERT_TRUE(cluster_->BeginMigration(slot, 2, 0).ok());
  ASSERT_TRUE(cluster_->MigrateKeys(slot, 2, 0, {migrated}).ok());

  // node 2 answers ASK for the migrated key, serves the one left itself.
  auto replies = client_->ExecBatch({{migrated, {"GET", migrated}},
                                     {left, {"GET", left}},
                                     {fresh, {"SET", fresh, "f"}}});  // new keys go to the importer
  for (auto& r : replies) ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(replies[0]->ToString(), "\"m\"");
  EXPECT_EQ(replies[1]->ToString(), "\"l\"");
  EXPECT_EQ(replies[2]->ToString(), "+OK");
  EXPECT_EQ(client_->MasterFor(migrated).value(), EndpointOf(2)) << "ASK must not change the map";
  auto single = client_->Exec(migrated, {"GET", migrated});
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->ToString(), "\"m\"");
  auto on_importer =
      cluster_->node(0).Command({"CLUSTER", "COUNTKEYSINSLOT", std::to_string(slot)});
  ASSERT_TRUE(on_importer.ok());
  EXPECT_EQ(on_importer->integer(), 2);  // migrated and fresh
  // A multi-key command whose keys are split by the migration: TRYAGAIN,
  // retried a bounded number of times, then unavailable.
  auto start = std::chrono::steady_clock::now();
  auto split = client_->Exec(left, {"MGET", left, migrated});
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.status().code(), Code::kUnavailable);
  EXPECT_NE(split.status().message().find("TRYAGAIN"), std::string::npos)
      << split.status().message();
  EXPECT_LT(ElapsedMs(start), 2000);

  ASSERT_TRUE(cluster_->MigrateKeys(slot, 2, 0).ok());
  ASSERT_TRUE(cluster_->FinishMigration(slot, 0).ok());
  ASSERT_TRUE(cluster_->WaitHealthy().ok());
  auto after = client_->ExecBatch(
      {{migrated, {"GET", migrated}}, {left, {"GET", left}}, {fresh, {"GET", fresh}}});
  EXPECT_EQ(after[0]->ToString(), "\"m\"");
  EXPECT_EQ(after[1]->ToString(), "\"l\"");
  EXPECT_EQ(after[2]->ToString(), "\"f\"");
  EXPECT_EQ(client_->MasterFor(migrated).value(), EndpointOf(0));
  ASSERT_TRUE(cluster_->MoveSlot(slot, 0, 2).ok());  // as it was
}

TEST_F(ClusterTest, ARedirectionLoopIsCutShort) {
  // Half a migration: node 0 says MIGRATING to node 1, node 1 was never told
  // it imports. A missing key then bounces: node 0 answers ASK, node 1 MOVED.
  std::string key = KeyOn(0, "loop:");
  const std::string slot = std::to_string(KeySlot(key));
  auto to = cluster_->NodeId(1);
  ASSERT_TRUE(to.ok());
  ASSERT_TRUE(cluster_->node(0).Command({"CLUSTER", "SETSLOT", slot, "MIGRATING", *to}).ok());
  auto r = client_->Exec(key, {"GET", key});
  ASSERT_TRUE(cluster_->node(0).Command({"CLUSTER", "SETSLOT", slot, "STABLE"}).ok());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("more than 5 redirections"), std::string::npos)
      << r.status().message();
  auto after = client_->Exec(key, {"GET", key});
  EXPECT_TRUE(after.ok() && after->is_nil());
}

TEST_F(ClusterTest, ConcurrentBatchesAcrossNodesNeverMixReplies) {
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 30; ++round) {
        std::vector<Command> batch;
        for (int i = 0; i < 30; ++i) {
          std::string v = std::to_string(t) + ":" + std::to_string(round) + ":" + std::to_string(i);
          batch.push_back({"k" + v, {"ECHO", v}});
        }
        auto replies = client_->ExecBatch(batch);
        for (int i = 0; i < 30; ++i) {
          if (!replies[i].ok() || replies[i]->str() != batch[i].argv[1]) ++wrong;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(ClusterTest, SubscriberHearsPublishesMadeOnAnyNode) {
  Inbox inbox;
  auto sub = Subscriber::Start(cluster_->url(), {"wake"}, inbox.OnMessage(), inbox.OnConnect());
  ASSERT_TRUE(sub.ok());
  ASSERT_TRUE(WaitFor([&] { return inbox.connects == 1; }));
  for (size_t n = 0; n < 3; ++n) {
    std::string key = KeyOn(n, "pub:");  // routes the PUBLISH to node n
    ASSERT_TRUE(client_->Exec(key, {"PUBLISH", "wake", "from" + std::to_string(n)}).ok());
  }
  EXPECT_TRUE(WaitFor([&] {
    return inbox.Has("wake=from0") && inbox.Has("wake=from1") && inbox.Has("wake=from2");
  }));
}

// Last in the suite: it kills and restarts a node.
TEST_F(ClusterTest, DeadMasterIsUnavailableForItsSlotsOnlyAndRecovers) {
  std::string on_dead = KeyOn(1, "dead:");
  std::string on_live = KeyOn(0, "live:");
  ASSERT_TRUE(client_->Exec(on_dead, {"SET", on_dead, "1"}).ok());
  ASSERT_TRUE(cluster_->node(1).Kill().ok());

  auto start = std::chrono::steady_clock::now();
  auto replies =
      client_->ExecBatch({{on_dead, {"GET", on_dead}}, {on_live, {"SET", on_live, "2"}}});
  EXPECT_LT(ElapsedMs(start), 1500);
  ASSERT_FALSE(replies[0].ok());
  EXPECT_EQ(replies[0].status().code(), Code::kUnavailable);
  EXPECT_NE(replies[0].status().message().find(cluster_->node(1).address()), std::string::npos)
      << replies[0].status().message();
  ASSERT_TRUE(replies[1].ok()) << replies[1].status().ToString();
  EXPECT_EQ(replies[1]->ToString(), "+OK");
  start = std::chrono::steady_clock::now();
  auto again = client_->Exec(on_dead, {"GET", on_dead});
  EXPECT_FALSE(again.ok());
  EXPECT_LT(ElapsedMs(start), 1000);

  // Another slot of the dead node is given to node 0 (what a failover does):
  // the client, failing to reach node 1, reloads the map and goes there.
  std::string rerouted = KeyOn(1, "reroute:");
  ASSERT_NE(KeySlot(rerouted), KeySlot(on_dead));
  auto id0 = cluster_->NodeId(0);
  ASSERT_TRUE(id0.ok());
  for (size_t n : {0, 2}) {
    auto set = cluster_->node(n).Command(
        {"CLUSTER", "SETSLOT", std::to_string(KeySlot(rerouted)), "NODE", *id0});
    ASSERT_TRUE(set.ok() && set->is_status()) << (set.ok() ? set->ToString() : "");
  }
  ASSERT_TRUE(cluster_->node(0).Command({"CLUSTER", "BUMPEPOCH"}).ok());  // node 0's claim wins
  Result<Reply> moved = Unavailable("not yet");
  EXPECT_TRUE(WaitFor([&] {
    moved = client_->Exec(rerouted, {"SET", rerouted, "here"});
    return moved.ok();
  })) << moved.status().ToString();
  EXPECT_EQ(client_->MasterFor(rerouted).value(), EndpointOf(0));

  ASSERT_TRUE(cluster_->node(1).Restart().ok());
  ASSERT_TRUE(cluster_->WaitHealthy().ok());
  Result<Reply> r = Unavailable("not yet");
  EXPECT_TRUE(WaitFor([&] {
    r = client_->Exec(on_dead, {"SET", on_dead, "back"});
    return r.ok();
  })) << r.status().ToString();
  EXPECT_EQ(r->ToString(), "+OK");
}

}  // namespace
}  // namespace delayq::redis
