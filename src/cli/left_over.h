// What to say about the mistakes CLI11 finds on the `delayq` command line,
// the one place that words them: a mistyped subcommand or option is named,
// with the nearest one suggested (common/suggest.h), instead of CLI11's "A
// subcommand is required" or its list of leftovers printed in reverse; and
// every other parse error (a missing argument, a number that is not one or
// out of range, a choice not among the choices, options that exclude each
// other) names the command and says what to type instead.
//
// Thread-safety: used from main()'s thread only.
#ifndef DELAYQ_CLI_LEFT_OVER_H_
#define DELAYQ_CLI_LEFT_OVER_H_

#include <string>

namespace CLI {
class App;
class ParseError;
}  // namespace CLI

namespace delayq::cli {

// After app.parse() threw `error`: the message for the first word it left
// over, or "" when every word had its place or the word is an argument too
// many while `error` is about something else (CLI11's message says it).
// For example
//   delayq: unknown command 'reserv' — did you mean 'reserve'?
//   delayq serve: unknown option '--htp-port' — did you mean '--http-port'?
//   delayq finish: unexpected argument 'b'
std::string DescribeLeftOver(const CLI::App& app, const CLI::ParseError& error);

// After app.parse() threw `error` (not --help): the one line to print, in
// delayq's words, for every mistake CLI11 finds. DescribeLeftOver's message
// when a word was left over; else, once a subcommand was chosen, the error
// under "delayq <command>: ", reworded where CLI11's says it poorly, with
// what to type instead:
//   delayq add: TOPIC is required (delayq add TOPIC [BODY] [OPTIONS]; see
//     delayq add --help)
//   delayq add: --delay-ms takes whole milliseconds, not '30s': use --delay 30s
//   delayq reserve: --count takes 1 to 1000, not 0
//   delayq peek: --state takes ready, delayed or buried, not 'reserved'
//   delayq add: give --delay-ms or --delay, not both
// "" when no subcommand was chosen (main() says how to start).
std::string DescribeParseError(const CLI::App& app, const CLI::ParseError& error);

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_LEFT_OVER_H_
