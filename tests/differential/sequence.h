// The command sequences of the differential test (differential_test.cc):
// what a step is, how a seed becomes a sequence of steps, and how a step's
// commands become RESP arguments.
//
// A command names its job and receipt symbolically ("the job's latest
// receipt", "an older one", FORCE), not as bytes: receipts and generated ids
// differ between stores, and a step removed while shrinking must not leave a
// later step naming a receipt that no longer exists. `History` resolves the
// symbols against what the replies so far handed out, in the normalised
// names both stores share while they agree (r1, r2…, g1, g2…); each store
// then maps those names back to its own bytes.
#ifndef DELAYQ_TESTS_DIFFERENTIAL_SEQUENCE_H_
#define DELAYQ_TESTS_DIFFERENTIAL_SEQUENCE_H_

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace delayq::differential {

enum class Op {
  kAdd,
  kReserve,
  kFinish,
  kRelease,
  kTouch,
  kBury,
  kUnreserve,
  kDelete,
  kKick,
  kKickTopic,
  kGet,
  kPeek,
  kPause,
  kResume,
  kStats,
  kStatsTopic,
  kTopics,
};

// Which receipt a FINISH, RELEASE, TOUCH, BURY or UNRESERVE carries.
enum class ReceiptRef {
  kLatest,  // the latest one a RESERVE handed out for the job
  kOlder,   // one before it (or another job's, or a well-formed unknown one)
  kForce,   // FORCE
  kNone,    // a well-formed receipt no delivery had
};

struct Command {
  Op op = Op::kGet;
  // The job: 0..kFixedIds-1 the fixed ids j0…; kFixedIds + k the k-th
  // generated id (g<k+1>); kGenerate: ADD asks for a generated id ('*');
  // kRecent - k: the job of the k-th most recent delivery (0: the last).
  int job = 0;
  int topic = 0;              // index into kTopics
  std::vector<int> from;      // RESERVE: topics, in order
  int count = 0;              // RESERVE COUNT (0: absent)
  int64_t max_bytes = 0;      // RESERVE MAXBYTES (0: absent)
  int64_t delay_ms = 0;       // ADD, RELEASE
  int64_t ttr_ms = 1000;      // ADD
  int64_t priority = -1;      // ADD PRIORITY (-1: absent)
  int64_t max_attempts = -1;  // ADD MAXATTEMPTS (-1: absent)
  bool replace = false;       // ADD REPLACE
  bool with_state = false;    // ADD WITHSTATE
  std::string body;           // ADD
  std::string error;          // RELEASE, BURY ERROR text ("" absent)
  ReceiptRef receipt = ReceiptRef::kLatest;
  int state = 0;         // PEEK: 0 READY, 1 DELAYED, 2 BURIED
  int64_t n = 0;         // KICKTOPIC
  int64_t pause_ms = 0;  // PAUSE (0: until RESUME)
};

// One step: the clock moves (advance_ms > 0), or the commands are sent to
// the store together, as one pipeline, and their replies read.
struct Step {
  int64_t advance_ms = 0;
  std::vector<Command> commands;
};

inline constexpr int kFixedIds = 6;
inline constexpr int kGenerate = -1;
inline constexpr int kRecent = -2;
inline constexpr const char* kTopics[] = {"a", "b", "c"};
inline constexpr int kTopicCount = 3;

struct GenerateOptions {
  int steps = 300;
  // false: KICKTOPIC only in steps of its own (issue 23, item 13).
  bool kick_topic_in_pipelines = false;
  // false: MAXBYTES only on RESERVEs in steps of their own (see
  // kReserveBehindBudgetCutFixed in differential_test.cc).
  bool max_bytes_in_pipelines = false;
  // false: PEEK, STATS and TOPICS only in steps of their own (see
  // kPipelinedReadsInOrderFixed).
  bool reads_in_pipelines = false;
  // false: the RESERVEs of one pipeline all name the same topics (see
  // kPipelinedReservesInOrderFixed).
  bool reserve_topics_vary = false;
};

// The steps of one seed: the same for the same seed and options.
std::vector<Step> Generate(uint64_t seed, const GenerateOptions& options);

// One argument of a command, with what the store must put in its place.
struct Arg {
  enum class Kind { kPlain, kId, kReceipt };
  std::string text;  // kId: j<n> or g<n>; kReceipt: r<n>
  Kind kind = Kind::kPlain;
};

// What the replies so far handed out, in normalised names.
class History {
 public:
  // A generated id was answered (its normalised name, g<n>).
  void NoteGenerated(const std::string& name) { generated_.push_back(name); }
  // A RESERVE delivered job `id` (normalised) with `receipt` (r<n>).
  void NoteDelivery(const std::string& id, const std::string& receipt);

  // The normalised id of job index `job`; a generated one not handed out
  // (yet, or at all in a shrunk sequence) is "no-g<n>", an id no job has.
  std::string IdOf(int job) const;
  // Every id a snapshot reads: the fixed ones and those generated so far.
  std::vector<std::string> KnownIds() const;
  // The command as arguments, its symbols resolved.
  std::vector<Arg> Resolve(const Command& c) const;

 private:
  std::string ReceiptFor(const std::string& id, ReceiptRef ref) const;

  std::vector<std::string> generated_;
  std::vector<std::string> delivered_;                        // job ids, in order
  std::map<std::string, std::vector<std::string>> receipts_;  // by id, oldest first
  std::vector<std::string> all_receipts_;                     // in order handed out
};

// The command as one line: "RESERVE COUNT 2 FROM a b".
std::string Render(const std::vector<Arg>& args);

}  // namespace delayq::differential

#endif  // DELAYQ_TESTS_DIFFERENTIAL_SEQUENCE_H_
