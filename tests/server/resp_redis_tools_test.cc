// What Redis's own tools and client libraries send to the RESP front end on
// connect or to probe it — HELLO (and RESP3), INFO, COMMAND, CLIENT, SELECT,
// AUTH with a username, unknown commands — answered in Redis 7's forms.
// In-process (FrontEndHarness); RESP3 replies are compared as bytes.
#include <algorithm>
#include <string>
#include <string_view>

#include "gtest/gtest.h"
#include "server/front_end_harness.h"
#include "wire/fields.h"

namespace delayq::server::testing {
namespace {

using Protocol = FrontEndHarness::Protocol;

// A connection whose replies are read as raw bytes: Send returns exactly
// what the server wrote in answer (the in-process stores answer at once).
class RawClient {
 public:
  explicit RawClient(FrontEndHarness& h) : c_(h.Connect(Protocol::kResp)) {}
  std::string Send(std::initializer_list<std::string_view> args) {
    c_->Send(RespCommand(args));
    std::string all = c_->Unread();
    std::string reply = all.substr(seen_);
    seen_ = all.size();
    return reply;
  }
  uint64_t id() const { return c_->id(); }

 private:
  std::unique_ptr<FrontEndHarness::Client> c_;
  size_t seen_ = 0;
};

std::string BulkText(std::string_view s) {
  return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
}

// HELLO's map after its header: server, version, proto, id, mode, role, modules.
std::string HelloPairs(int proto, uint64_t id) {
  return BulkText("server") + BulkText("delayq") + BulkText("version") + BulkText(DELAYQ_VERSION) +
         BulkText("proto") + ":" + std::to_string(proto) + "\r\n" + BulkText("id") + ":" +
         std::to_string(id) + "\r\n" + BulkText("mode") + BulkText("standalone") +
         BulkText("role") + BulkText("master") + BulkText("modules") + "*0\r\n";
}

bool Contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

TEST(RespRedisTools, Hello3SwitchesTheConnectionToResp3MapsAndNulls) {
  FrontEndHarness h;
  RawClient c(h);
  EXPECT_EQ(c.Send({"HELLO"}), "*14\r\n" + HelloPairs(2, c.id()));  // no switch
  EXPECT_EQ(c.Send({"HELLO", "3"}), "%7\r\n" + HelloPairs(3, c.id()));
  // Nothing is RESP3's null; maps are maps, their numbers integers.
  EXPECT_EQ(c.Send({"GET", "nope"}), "_\r\n");
  EXPECT_EQ(c.Send({"PEEK", "t", "READY"}), "_\r\n");
  EXPECT_EQ(c.Send({"RESERVE", "FROM", "t"}), "_\r\n");
  EXPECT_EQ(c.Send({"ADD", "t", "j1", "0", "60000", "hi"}), BulkText("j1"));
  std::string job = c.Send({"GET", "j1"});
  EXPECT_EQ(job.rfind("%13\r\n" + BulkText("id") + BulkText("j1") + BulkText("topic") +
                          BulkText("t") + BulkText("state") + BulkText("ready") + BulkText("body") +
                          BulkText("hi") + BulkText("priority") + ":",
                      0),
            0u)
      << job;
  EXPECT_TRUE(Contains(job, BulkText("ttr_ms") + ":60000\r\n")) << job;
  std::string topic = c.Send({"STATS", "t"});
  EXPECT_EQ(topic.rfind("%8\r\n" + BulkText("topic") + BulkText("t") + BulkText("delayed") +
                            ":0\r\n" + BulkText("ready") + ":1\r\n",
                        0),
            0u)
      << topic;
  EXPECT_EQ(c.Send({"STATS"}).rfind("%", 0), 0u);
  // RESERVE's per-job arrays stay arrays.
  std::string reserved = c.Send({"RESERVE", "FROM", "t"});
  EXPECT_EQ(reserved.rfind("*1\r\n*", 0), 0u) << reserved;
  EXPECT_TRUE(Contains(reserved, BulkText("j1"))) << reserved;
  // Another connection still speaks RESP2; HELLO 2 switches back.
  EXPECT_EQ(h.Resp({"GET", "nope"}), NilArray());
  EXPECT_EQ(c.Send({"HELLO", "2"}), "*14\r\n" + HelloPairs(2, c.id()));
  EXPECT_EQ(c.Send({"GET", "nope"}), "*-1\r\n");
}

TEST(RespRedisTools, HelloRefusesWhatItCannotDoAndChangesNothing) {
  FrontEndHarness h;
  RawClient c(h);
  EXPECT_EQ(c.Send({"HELLO", "4"}), "-NOPROTO unsupported protocol version\r\n");
  EXPECT_EQ(c.Send({"HELLO", "three"}),
            "-ERR Protocol version is not an integer or out of range\r\n");
  EXPECT_EQ(c.Send({"HELLO", "3", "FOO"}), "-ERR Syntax error in HELLO option 'FOO'\r\n");
  EXPECT_EQ(c.Send({"HELLO", "3", "SETNAME"}), "-ERR Syntax error in HELLO option 'SETNAME'\r\n");
  EXPECT_EQ(c.Send({"HELLO", "3", "SETNAME", "a b"}),
            "-ERR Client names cannot contain spaces, newlines or special characters.\r\n");
  EXPECT_EQ(c.Send({"GET", "nope"}), "*-1\r\n");  // still RESP2
  EXPECT_EQ(c.Send({"CLIENT", "GETNAME"}), "$-1\r\n");
  EXPECT_EQ(c.Send({"HELLO", "3", "SETNAME", "w1"}), "%7\r\n" + HelloPairs(3, c.id()));
  EXPECT_EQ(c.Send({"CLIENT", "GETNAME"}), BulkText("w1"));
}

TEST(RespRedisTools, HelloAuthenticatesWithTheDefaultUserAndTheToken) {
  FrontEndHarness h({.auth_token = "s3cret"});
  RawClient c(h);
  EXPECT_EQ(c.Send({"HELLO", "3"})
                .rfind("-NOAUTH HELLO must be called with the client already "
                       "authenticated",
                       0),
            0u);
  EXPECT_EQ(c.Send({"HELLO", "3", "AUTH", "admin", "s3cret"}),
            "-NOAUTH invalid username 'admin': delayq has one user, \"default\"\r\n");
  EXPECT_EQ(c.Send({"HELLO", "3", "AUTH", "default", "wrong"}), "-NOAUTH invalid token\r\n");
  EXPECT_EQ(c.Send({"INFO"}), "-NOAUTH Authentication required: AUTH <token>\r\n");
  EXPECT_EQ(c.Send({"COMMAND", "COUNT"}), "-NOAUTH Authentication required: AUTH <token>\r\n");
  EXPECT_EQ(c.Send({"HELLO", "3", "AUTH", "default", "s3cret", "SETNAME", "w1"}),
            "%7\r\n" + HelloPairs(3, c.id()));
  EXPECT_EQ(c.Send({"CLIENT", "GETNAME"}), BulkText("w1"));
  // AUTH's two-argument form, as redis-cli --user and redis-py's username= send it.
  EXPECT_EQ(h.Resp({"AUTH", "admin", "s3cret"}),
            Error("NOAUTH invalid username 'admin': delayq has one user, \"default\""));
  EXPECT_EQ(h.Resp({"AUTH", "default", "s3cret"}), Simple("OK"));
  EXPECT_EQ(h.Resp({"GET", "nope"}), NilArray());
}

// The pairs of a flat field/value array as INFO lines.
std::string AsInfoLines(const RespReply& pairs) {
  std::string out;
  for (size_t i = 0; i + 1 < pairs.elements.size(); i += 2) {
    out += pairs.elements[i].str + ":" + pairs.elements[i + 1].str + "\r\n";
  }
  return out;
}

TEST(RespRedisTools, InfoHasRedisSectionsAndTheQueuesFiguresAsStatsGivesThem) {
  FrontEndHarness h;
  h.Resp({"ADD", "t", "j1", "0", "60000", "x"});
  h.Resp({"ADD", "t", "j2", "5000", "60000", "x"});
  RespReply info = h.Resp({"INFO"});
  ASSERT_EQ(info.type, RespReply::Type::kBulk) << info.ToString();
  EXPECT_EQ(info.str.rfind("# Server\r\ndelayq_version:" DELAYQ_VERSION
                           "\r\nredis_version:7.0.0\r\nredis_mode:standalone\r\nprocess_id:",
                           0),
            0u)
      << info.str;
  for (std::string_view part : {"\r\nstore:memory\r\n",
                                "\r\n\r\n# Clients\r\nconnected_clients:1\r\n"
                                "blocked_clients:0\r\nmaxclients:",
                                "\r\n\r\n# Stats\r\ntotal_connections_received:1\r\n",
                                "\r\n\r\n# Delayq\r\njobs:2\r\ndelayed:1\r\nready:1\r\n"}) {
    EXPECT_TRUE(Contains(info.str, part)) << part << " in " << info.str;
  }
  EXPECT_TRUE(info.str.ends_with("\r\n\r\n# Keyspace\r\n")) << info.str;
  // The delayq section is STATS, line for line.
  RespReply delayq = h.Resp({"INFO", "DELAYQ"});
  EXPECT_EQ(delayq.str, "# Delayq\r\n" + AsInfoLines(h.Resp({"STATS"})));
  for (const auto& f : wire::kStatsFields) {
    EXPECT_TRUE(Contains(delayq.str, "\r\n" + std::string(f.name) + ":")) << f.name;
  }
  // Sections by name, any case; one delayq does not have adds nothing.
  RespReply two = h.Resp({"info", "clients", "server"});
  EXPECT_EQ(two.str.rfind("# Server\r\n", 0), 0u);
  EXPECT_TRUE(Contains(two.str, "\r\n\r\n# Clients\r\n"));
  EXPECT_FALSE(Contains(two.str, "# Delayq"));
  EXPECT_EQ(h.Resp({"INFO", "replication"}), Bulk(""));
  EXPECT_EQ(h.Resp({"INFO", "all"}).str.rfind("# Server", 0), 0u);
  // RESP3: a verbatim string, as Redis 7 sends INFO.
  RawClient c(h);
  c.Send({"HELLO", "3"});
  EXPECT_EQ(c.Send({"INFO", "keyspace"}), "=16\r\ntxt:# Keyspace\r\n\r\n");
}

TEST(RespRedisTools, CommandDescribesEveryCommandFromTheTable) {
  FrontEndHarness h;
  RespReply all = h.Resp({"COMMAND"});
  ASSERT_EQ(all.type, RespReply::Type::kArray);
  EXPECT_EQ(h.Resp({"COMMAND", "COUNT"}), Integer(static_cast<int64_t>(all.elements.size())));
  EXPECT_EQ(h.Resp({"command", "info", "GET"}),
            Array({Array({Bulk("get"), Integer(2), Array({}), Integer(0), Integer(0), Integer(0),
                          Array({Simple("@queue")}), Array({}), Array({}), Array({})})}));
  RespReply ping = h.Resp({"COMMAND", "INFO", "ping", "nosuch", "client|setname"});
  ASSERT_EQ(ping.elements.size(), 3u) << ping.ToString();
  EXPECT_EQ(ping.elements[0].elements[1], Integer(-1));
  EXPECT_EQ(ping.elements[0].elements[2], Array({Simple("no_auth")}));
  EXPECT_EQ(ping.elements[1], Nil());
  EXPECT_EQ(ping.elements[2].elements[0], Bulk("client|setname"));
  EXPECT_EQ(ping.elements[2].elements[1], Integer(3));
  // CLIENT lists its subcommands as element 10.
  RespReply client = h.Resp({"COMMAND", "INFO", "client"});
  EXPECT_EQ(client.elements[0].elements[1], Integer(-2));
  EXPECT_EQ(client.elements[0].elements[9].elements[0].elements[0], Bulk("client|setname"));
  RespReply list = h.Resp({"COMMAND", "LIST"});
  EXPECT_GT(list.elements.size(), all.elements.size());
  EXPECT_EQ(list.elements[0], Bulk("ping"));
}

TEST(RespRedisTools, CommandDocsGivesRedisCliItsHelpAndHints) {
  FrontEndHarness h;
  const RespReply flag_optional = Array({Simple("optional")});
  RespReply docs = h.Resp({"COMMAND", "DOCS", "kick", "nosuch"});
  EXPECT_EQ(
      docs,
      Array({Bulk("kick"),
             Array({Bulk("summary"), Bulk("Makes a buried or delayed job ready."), Bulk("since"),
                    Bulk("0.1.0"), Bulk("group"), Bulk("queue"), Bulk("arguments"),
                    Array({Array({Bulk("name"), Bulk("id"), Bulk("type"), Bulk("string")})})})}));
  // [PRIORITY p] is a token and its value, [REPLACE] a token alone, both optional.
  RespReply add = h.Resp({"COMMAND", "DOCS", "ADD"}).elements[1];
  ASSERT_EQ(add.elements[6], Bulk("arguments"));
  auto with_token = [&](std::string_view token) {
    for (const RespReply& arg : add.elements[7].elements) {
      if (arg.elements.size() > 5 && arg.elements[5].str == token) return arg;
    }
    return RespReply{};
  };
  EXPECT_EQ(add.elements[7].elements[0],
            Array({Bulk("name"), Bulk("topic"), Bulk("type"), Bulk("string")}));
  EXPECT_EQ(with_token("PRIORITY"),
            Array({Bulk("name"), Bulk("p"), Bulk("type"), Bulk("string"), Bulk("token"),
                   Bulk("PRIORITY"), Bulk("flags"), flag_optional}));
  EXPECT_EQ(with_token("REPLACE"),
            Array({Bulk("name"), Bulk("replace"), Bulk("type"), Bulk("pure-token"), Bulk("token"),
                   Bulk("REPLACE"), Bulk("flags"), flag_optional}));
  // Every command, each with a summary and a group.
  RespReply all = h.Resp({"COMMAND", "DOCS"});
  EXPECT_EQ(static_cast<int64_t>(all.elements.size()), 2 * h.Resp({"COMMAND", "COUNT"}).integer);
  for (size_t i = 1; i < all.elements.size(); i += 2) {
    EXPECT_EQ(all.elements[i].elements[0], Bulk("summary")) << all.elements[i - 1].str;
    EXPECT_FALSE(all.elements[i].elements[1].str.empty()) << all.elements[i - 1].str;
  }
  // RESP3: maps.
  RawClient c(h);
  c.Send({"HELLO", "3"});
  EXPECT_EQ(c.Send({"COMMAND", "DOCS", "topics"}),
            "%1\r\n" + BulkText("topics") + "%3\r\n" + BulkText("summary") +
                BulkText("The topics with jobs, waiting reserves or a pause.") + BulkText("since") +
                BulkText("0.1.0") + BulkText("group") + BulkText("queue"));
  EXPECT_EQ(h.Resp({"COMMAND", "HELP"}).elements[0],
            Simple("COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"));
  EXPECT_EQ(h.Resp({"COMMAND", "GETKEYS", "GET", "x"}),
            Error("ERR unknown subcommand 'GETKEYS'. Try COMMAND HELP."));
  EXPECT_EQ(h.Resp({"COMMAND", "COUNT", "x"}),
            Error("ERR wrong number of arguments for 'COMMAND|COUNT' command"));
}

TEST(RespRedisTools, ClientNamesIdsAndListsConnections) {
  FrontEndHarness h;
  auto other = h.Connect(Protocol::kResp);
  other->Send(RespCommand({"RESERVE", "TIMEOUT", "60000", "FROM", "t"}));  // waits: blocked
  RespReply id = h.Resp({"CLIENT", "ID"});
  ASSERT_EQ(id.type, RespReply::Type::kInteger);
  EXPECT_EQ(h.Resp({"CLIENT", "GETNAME"}), Nil());
  EXPECT_EQ(h.Resp({"CLIENT", "SETNAME", "worker-1"}), Simple("OK"));
  EXPECT_EQ(h.Resp({"CLIENT", "GETNAME"}), Bulk("worker-1"));
  EXPECT_EQ(h.Resp({"CLIENT", "SETNAME", "a b"}),
            Error("ERR Client names cannot contain spaces, newlines or special characters."));
  EXPECT_EQ(h.Resp({"CLIENT", "GETNAME"}), Bulk("worker-1"));
  EXPECT_EQ(h.Resp({"CLIENT", "SETINFO", "lib-name", "redis-py"}), Simple("OK"));
  EXPECT_EQ(h.Resp({"CLIENT", "SETINFO", "LIB-VER", "5.0.1"}), Simple("OK"));
  EXPECT_EQ(h.Resp({"CLIENT", "SETINFO", "colour", "red"}),
            Error("ERR Unrecognized option 'colour': CLIENT SETINFO takes LIB-NAME or LIB-VER"));
  EXPECT_EQ(h.Resp({"CLIENT", "SETINFO", "LIB-NAME", "a\nb"}),
            Error("ERR LIB-NAME cannot contain spaces, newlines or special characters."));

  const std::string me = "id=" + std::to_string(id.integer) + " addr= laddr= fd=";
  std::string info = h.Resp({"CLIENT", "INFO"}).str;
  EXPECT_EQ(info.rfind(me, 0), 0u) << info;
  for (std::string_view part : {" name=worker-1 age=", " flags=N db=0 ",
                                " cmd=client|info user=default resp=2 "
                                "lib-name=redis-py lib-ver=5.0.1\n"}) {
    EXPECT_TRUE(Contains(info, part)) << part << " in " << info;
  }
  std::string list = h.Resp({"CLIENT", "LIST"}).str;
  const std::string waiter = "id=" + std::to_string(other->id()) + " ";
  EXPECT_EQ(list.rfind(waiter, 0), 0u) << list;  // opened first, listed first
  EXPECT_TRUE(Contains(list, " flags=b ")) << list;
  EXPECT_TRUE(Contains(list, " cmd=reserve ")) << list;
  EXPECT_TRUE(Contains(list, "\n" + me)) << list;
  EXPECT_EQ(std::count(list.begin(), list.end(), '\n'), 2);
  EXPECT_EQ(h.Resp({"CLIENT", "LIST", "ID", std::to_string(other->id())}).str.rfind(waiter, 0), 0u);
  EXPECT_EQ(h.Resp({"CLIENT", "LIST", "TYPE", "pubsub"}), Bulk(""));
  EXPECT_EQ(h.Resp({"CLIENT", "LIST", "ID", "x"}), Error("ERR Invalid client ID"));
  EXPECT_EQ(h.Resp({"CLIENT", "LIST", "TYPE", "x"}), Error("ERR Unknown client type 'x'"));
  EXPECT_EQ(h.Resp({"CLIENT", "LIST", "NAME"}),
            Error("ERR syntax error: CLIENT LIST takes [TYPE normal] [ID id [id ...]]"));

  EXPECT_EQ(h.Resp({"CLIENT"}), Error("ERR wrong number of arguments for 'CLIENT' command"));
  EXPECT_EQ(h.Resp({"CLIENT", "SETNAME"}),
            Error("ERR wrong number of arguments for 'CLIENT|SETNAME' command"));
  EXPECT_EQ(h.Resp({"CLIENT", "KILL", "x"}),
            Error("ERR unknown subcommand 'KILL'. Try CLIENT HELP."));
  RespReply help = h.Resp({"CLIENT", "HELP"});
  EXPECT_EQ(help.elements[1], Simple("SETNAME name"));
  EXPECT_EQ(help.elements[2], Simple("    Names the connection (empty: no name); CLIENT LIST "
                                     "shows it."));
  // An empty name clears it, as in Redis.
  EXPECT_EQ(h.Resp({"CLIENT", "SETNAME", ""}), Simple("OK"));
  EXPECT_EQ(h.Resp({"CLIENT", "GETNAME"}), Nil());
}

TEST(RespRedisTools, SelectZeroAndUnknownCommandsAsRedisWordsThem) {
  FrontEndHarness h;
  EXPECT_EQ(h.Resp({"SELECT", "0"}), Simple("OK"));
  EXPECT_EQ(h.Resp({"SELECT", "1"}),
            Error("ERR DB index is out of range: delayq has database 0 only"));
  EXPECT_EQ(h.Resp({"SELECT", "x"}), Error("ERR value is not an integer or out of range"));
  EXPECT_EQ(h.Resp({"FROB", "a", "b c"}),
            Error("ERR unknown command 'FROB', with args beginning with: 'a' 'b c' "));
  // At most about 128 bytes of arguments, as Redis.
  const std::string big(200, 'x');
  EXPECT_EQ(
      h.Resp({"FROB", big, "more"}),
      Error("ERR unknown command 'FROB', with args beginning with: '" + big.substr(0, 128) + "' "));
}

}  // namespace
}  // namespace delayq::server::testing
