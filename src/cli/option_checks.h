// Checks every option of the `delayq` command line shares, for `serve`
// (src/server/main.cc) and the client subcommands (client_commands.cc).
//
// CLI11 takes the word after an option as its value whatever it looks like:
// `delayq serve --data-dir --help` ran a server in a directory named
// "--help", and `--auth-token ''` silently turned authentication off. The
// validators here turn such values into usage errors (exit 2) whose message
// starts with the option's name.
//
// Includes CLI11: for main.cc and client_commands.cc only, never a header.
#ifndef DELAYQ_CLI_OPTION_CHECKS_H_
#define DELAYQ_CLI_OPTION_CHECKS_H_

#include <string>

#include "CLI/CLI.hpp"

namespace delayq::cli {

// Refuses a value that starts with "--": it is another option, and the value
// is missing. (A value such as "-5" passes: numbers have ranges of their own.)
inline CLI::Validator NotAnOption() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (value.rfind("--", 0) != 0) return {};
        return "value '" + value + "' starts with '--': the option's value is missing";
      },
      /*validator_desc=*/"");
}

// Refuses an empty value where an empty one would quietly mean "off" (an
// empty environment variable is never read: CLI11 treats it as unset).
inline CLI::Validator NotEmpty(std::string why) {
  return CLI::Validator(
      [why = std::move(why)](std::string& value) -> std::string {
        return value.empty() ? "must not be empty: " + why : std::string();
      },
      /*validator_desc=*/"");
}

// Adds NotAnOption to every option of `app` and of its subcommands that
// takes a value. Positional arguments are left alone: CLI11 never hands them
// a word starting with "--" unless it follows a "--" separator, on purpose.
// Call once, after every option has been added.
inline void RefuseOptionLikeValues(CLI::App* app) {
  for (CLI::Option* opt : app->get_options([](CLI::Option*) { return true; })) {
    if (opt->get_positional() || opt->get_items_expected_min() == 0) continue;
    opt->check(NotAnOption());
  }
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) {
    RefuseOptionLikeValues(sub);
  }
}

}  // namespace delayq::cli

#endif  // DELAYQ_CLI_OPTION_CHECKS_H_
