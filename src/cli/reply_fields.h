// The command line's reading and printing of RESP field/value replies (GET,
// STATS, SUBSCRIPTION, SCHEDULE): as `key: value` lines for people, or as
// the JSON object HTTP answers, each value by the kind its wire table gives
// it (wire/fields.h). Shared by the client subcommands (client_commands.cc)
// and `delayq schedule` (schedule_command.cc).
//
// Thread-safety: stateless functions writing to stdout.
#ifndef DELAYQ_CLI_REPLY_FIELDS_H_
#define DELAYQ_CLI_REPLY_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codec/json_writer.h"
#include "redis/reply.h"
#include "wire/fields.h"

namespace delayq::cli {

using Pairs = std::vector<std::pair<std::string, std::string>>;

// Writes s to stdout as it is.
void Out(std::string_view s);

// key: value lines, the values aligned and escaped for the terminal.
void PrintFields(const Pairs& fields);

// A flat array of field/value pairs (RESP2; a text list's value a nested
// array, given as "a,b"); nullopt when the reply is not one.
std::optional<Pairs> ParseFields(const redis::Reply& r);

// Digits as an integer ("-5" too); nullopt for anything else, and for a
// leading zero, so "007" stays text.
std::optional<int64_t> AsInteger(const std::string& s);

// RESP pairs as one JSON object, each value as kind_of(key) says (a list as
// an array, numbers as numbers, a flag as true or false; text when the
// value does not fit the kind, or the key is unknown: a newer server's
// field). False when the reply is not pairs.
bool WritePairsJson(codec::JsonWriter& w, const redis::Reply& pairs,
                    wire::Kind (*kind_of)(std::string_view key));

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_REPLY_FIELDS_H_
