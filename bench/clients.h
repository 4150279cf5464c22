// Wire codecs of the load generator: how delayq-bench writes an add, a
// reserve and a finish in each protocol it speaks, and a small scanner for
// the replies. Not the product's codecs on purpose: a benchmark client must
// cost the shared CPUs as little as possible, so these append straight into
// an output string and read replies in place, looking only at what the
// benchmark needs (an id, a body, a receipt, or "error").
//
//   resp            delayq's Redis protocol (SPEC §7)
//   http            delayq's HTTP/JSON API, keep-alive HTTP/1.1 (SPEC §6);
//                   responses must carry Content-Length (no chunked)
//   beanstalk       beanstalkd 1.12's text protocol; delays and TTRs are
//                   whole seconds there (rounded up, so never earlier)
//   redis-hashzset  plain Redis, for the memory figure only: a job is
//                   HSET dq:jobs <id> <job JSON> + ZADD dq:delay <due> <id>,
//                   as the seeds store it
//   redis-set       plain Redis, for `put` only: an "add" is SET <topic>
//                   <body>, redis-benchmark's SET test through this client
//
// Thread-safety: codecs are immutable after Create; share them freely.
#ifndef DELAYQ_BENCH_CLIENTS_H_
#define DELAYQ_BENCH_CLIENTS_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

#include "delayq/status.h"

namespace delayq::bench {

// What a request was, so its reply can be read (replies come back in
// request order on a connection).
enum class Op : uint8_t {
  kBind,    // beanstalk's use / watch / ignore
  kAdd,     // the add (redis-hashzset: the ZADD)
  kAddAux,  // redis-hashzset: the HSET before the ZADD
  kReserve,
  kFinish,
  kCommand,  // RESP only: a request the benchmark encoded itself (Conn::Command);
             // its reply's bytes are in Reply::raw
};

// One reply, its views pointing into the connection's input buffer: valid
// until the next read on that connection.
struct Reply {
  enum class Kind : uint8_t {
    kOk,     // add (with `id`), finish, bind
    kJob,    // reserve handed out a job: id, body, receipt
    kEmpty,  // reserve timed out: nil, {"jobs":[]}, TIMED_OUT
    kError,  // the server said no: `error` holds its words
  };
  Kind kind = Kind::kOk;
  std::string_view id;
  std::string_view body;
  std::string_view receipt;  // empty for beanstalk
  std::string_view error;
  std::string_view raw;  // RESP: the whole reply as read, for the caller to parse
};

// An add. Exactly one of delay_ms and run_at_ms is used: run_at_ms when
// >= 0 (Unix ms; beanstalk converts it to whole seconds from now, rounded up).
struct AddArgs {
  std::string_view topic;
  std::string_view id;  // empty: the server chooses (redis-hashzset needs one)
  int64_t delay_ms = 0;
  int64_t run_at_ms = -1;
  int64_t ttr_ms = 60'000;
  std::string_view body;
};

class Codec {
 public:
  // proto: resp | http | beanstalk | redis-hashzset | redis-set. `host_header` is what
  // HTTP requests name in Host. Errors: kInvalidArgument for another proto.
  static Result<std::unique_ptr<Codec>> Create(std::string_view proto, std::string host_header);
  virtual ~Codec() = default;

  // The port a protocol's server listens on by default.
  virtual int default_port() const = 0;
  // True when delays are whole seconds on the wire (beanstalk).
  virtual bool whole_seconds() const { return false; }

  // Appends what binds a fresh connection to `topic` and returns how many
  // replies (Op::kBind) that costs: beanstalk's use + watch + ignore, else 0.
  virtual int Bind(std::string* out, std::string_view topic) const { return 0; }
  // Appends an add; returns its replies: 1, or 2 for redis-hashzset (an
  // Op::kAddAux reply, then the Op::kAdd one).
  virtual int Add(std::string* out, const AddArgs& a) const = 0;
  // Appends a reserve of one job of `topic`, waiting up to wait_ms for one
  // (beanstalk: reserves from the watched tube; the wait rounds up to s).
  virtual void Reserve(std::string* out, std::string_view topic, int64_t wait_ms) const = 0;
  // Appends a finish (beanstalk: delete) of a reserved job.
  virtual void Finish(std::string* out, std::string_view id, std::string_view receipt) const = 0;

  // Reads one reply to a request of kind `op` from in[0, n). Returns the
  // bytes it takes, 0 if it is not complete yet, or -1 if the bytes are not
  // a reply of this protocol (the connection cannot be trusted after that).
  virtual long Parse(const char* in, size_t n, Op op, Reply* reply) const = 0;
};

// Appends the decimal form of v.
void AppendInt(std::string* out, int64_t v);

// Appends one RESP command: an array of bulk strings (for Conn::Command).
void AppendRespCommand(std::string* out, std::initializer_list<std::string_view> args);

}  // namespace delayq::bench

#endif  // DELAYQ_BENCH_CLIENTS_H_
