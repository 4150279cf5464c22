// What to say about the words CLI11 could not place on the `delayq` command
// line: a mistyped subcommand or option is named, with the nearest one
// suggested (src/cli/suggest.h), instead of CLI11's "A subcommand is
// required" or its list of leftovers printed in reverse.
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

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_LEFT_OVER_H_
