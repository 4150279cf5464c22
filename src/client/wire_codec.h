// The client's half of RESP as delayq serves it (docs/api.md §4): the
// commands a Queue call becomes, and the replies read back into the public
// types. Pure functions over redis::Reply, no I/O.
//
// A reply of the wrong shape (a RESERVE answered with an integer, a job
// array too short, a number that is not one) is kUnavailable naming what was
// expected: the server is not a delayq server, or not one this client can
// read, and the connection that brought it is closed by the caller.
// An error reply ("-NOTFOUND job 'x' does not exist") is its Status: the
// prefix gives the code (the table of src/server/errors.h, read backwards),
// the rest the message.
//
// Thread-safety: pure functions.
#ifndef DELAYQ_CLIENT_WIRE_CODEC_H_
#define DELAYQ_CLIENT_WIRE_CODEC_H_

#include <string>
#include <string_view>
#include <vector>

#include "delayq/queue.h"
#include "redis/connection.h"
#include "redis/reply.h"

namespace delayq::client {

// A malformed reply: kUnavailable, "malformed reply to CMD: <what>, got <reply>".
Status Malformed(std::string_view command, std::string_view what, const redis::Reply& got);

// The RESP error prefix of a code, as the server sends it ("NOTFOUND",
// "STALE", ...; "ERR" for kInternal and anything unknown): what the
// command line prints a Status under.
std::string_view ErrorPrefix(Code code);

// The Status of an error reply; Ok for any other reply.
Status StatusOf(const redis::Reply& reply);

// +OK or +FORCED: Ok; an error reply: its Status; anything else: Malformed.
Status ParseOk(std::string_view command, const redis::Reply& reply);

// ADD topic id delay ttr body PRIORITY p MAXATTEMPTS n [AT ms] [REPLACE] WITHSTATE.
// REQUIRES: ValidateJobSpec(spec) passed and spec.id is not empty.
redis::Argv AddCommand(const JobSpec& spec);
// ADD ... WITHSTATE's reply: [id, state, run_at_ms].
Result<AddResult> ParseAdded(const redis::Reply& reply);

// RESERVE [TIMEOUT ms] COUNT n [MAXBYTES b] FROM topics...
redis::Argv ReserveCommand(const ReserveRequest& req);
// RESERVE's reply: nil (nothing) or an array of job arrays.
Result<Deliveries> ParseDeliveries(const redis::Reply& reply);
// One job array (RESERVE, PEEK): [id, topic, body, receipt, attempts,
// ttr_ms, priority, run_at_ms, reserved_until_ms, max_attempts]; older
// servers send the first five, or nine (no max_attempts: read as 0).
Result<Delivery> ParseDelivery(std::string_view command, const redis::Reply& reply);

// GET's reply: field/value pairs; nil is kNotFound naming `id`.
Result<JobInfo> ParseJob(std::string_view id, const redis::Reply& reply);
// STATS topic's reply.
Result<TopicInfo> ParseTopic(const redis::Reply& reply);
// STATS's reply (the fields of QueueStats; the server's own figures ignored).
Result<QueueStats> ParseStats(const redis::Reply& reply);
// TOPICS's reply: the names.
Result<std::vector<std::string>> ParseNames(const redis::Reply& reply);
// An integer reply (KICKTOPIC).
Result<uint64_t> ParseCount(std::string_view command, const redis::Reply& reply);

}  // namespace delayq::client

#endif  // DELAYQ_CLIENT_WIRE_CODEC_H_
