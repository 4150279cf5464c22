#include "cli/left_over.h"

#include <optional>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/suggest.h"

namespace delayq::cli {
namespace {

// "--name" and "-n" for each named option of `app`.
void AddOptionNames(const CLI::App& app, std::vector<std::string>* names) {
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& l : opt->get_lnames()) names->push_back("--" + l);
    for (const std::string& s : opt->get_snames()) names->push_back("-" + s);
  }
}

std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates) {
  std::optional<std::string> nearest = Nearest(word, candidates);
  return nearest ? " \u2014 did you mean '" + *nearest + "'?" : "";
}

}  // namespace

std::string DescribeLeftOver(const CLI::App& app, const CLI::ParseError& error) {
  // Leftovers in command-line order: the app's own first (where a client
  // subcommand's unknown options fall through to), then the subcommand's.
  std::vector<std::string> left = app.remaining(/*recurse=*/true);
  auto word = left.begin();
  while (word != left.end() && *word == "--") ++word;  // a separator, not a word
  if (word == left.end()) return {};

  std::vector<CLI::App*> chosen = app.get_subcommands();
  const CLI::App* sub = chosen.empty() ? nullptr : chosen.front();
  std::string who = sub == nullptr ? "delayq" : "delayq " + sub->get_name();

  if (word->size() > 1 && (*word)[0] == '-') {
    std::string name = word->substr(0, word->find('='));  // --opt=value
    std::vector<std::string> options;
    if (sub != nullptr) AddOptionNames(*sub, &options);
    if (sub == nullptr || sub->get_fallthrough()) AddOptionNames(app, &options);
    std::string hint = DidYouMean(name, options);
    return who + ": unknown option '" + name + "'" +
           (hint.empty() ? " ('" + who + " --help' lists the options)" : hint);
  }
  if (sub == nullptr) {
    std::vector<std::string> commands;
    for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; })) {
      commands.push_back(c->get_name());
    }
    std::string hint = DidYouMean(*word, commands);
    return "delayq: unknown command '" + *word + "'" +
           (hint.empty() ? " ('delayq --help' lists the commands)" : hint);
  }
  // A word too many may only be the echo of another mistake (the value of
  // `--data-dir --store memory` is "--store", leaving "memory"): unless it
  // is all that is wrong, CLI11's message about that mistake is the one.
  if (dynamic_cast<const CLI::ExtrasError*>(&error) == nullptr) return {};
  return who + ": unexpected argument '" + *word + "'";
}

}  // namespace delayq::cli
