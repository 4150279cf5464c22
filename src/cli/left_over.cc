// How CLI11's parse errors become delayq's: DescribeLeftOver names a word
// that had no place; DescribeParseError words every other error by its type
// (CLI11's exception classes) and the parts of CLI11's message that carry
// the facts (the option, the value, the range or the choices), so that a
// new option gets the same wording with nothing to add here.
#include "cli/left_over.h"

#include <optional>
#include <regex>
#include <typeinfo>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/duration.h"
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

std::string Upper(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}

// The option of `sub` (or of `app`, where its unknown options fall
// through) that CLI11 names `name` in its messages; nullptr if none.
const CLI::Option* FindOption(const CLI::App& app, const CLI::App& sub, const std::string& name) {
  for (const CLI::App* a : {&sub, &app}) {
    for (const CLI::Option* opt : a->get_options()) {
      if (opt->get_name() == name) return opt;
    }
  }
  return nullptr;
}

// How a message names an option: "--delay-ms", or a positional argument as
// usage lines show it, "TOPIC".
std::string Shown(const CLI::App& app, const CLI::App& sub, const std::string& name) {
  const CLI::Option* opt = FindOption(app, sub, name);
  return opt != nullptr && opt->get_positional() ? Upper(name) : name;
}

// "delayq add TOPIC [BODY] [OPTIONS]". A subcommand with a formatter of its
// own (`work`: "... -- COMMAND [ARGS...]") says its usage itself.
std::string UsageOf(const CLI::App& sub, const std::string& who) {
  const auto base = sub.get_formatter();
  const auto* own = dynamic_cast<const CLI::Formatter*>(base.get());
  if (own != nullptr && typeid(*own) != typeid(CLI::Formatter)) {
    std::string usage = own->make_usage(&sub, who);
    const std::string label = own->get_label("Usage") + ": ";
    if (usage.starts_with(label)) usage.erase(0, label.size());
    while (!usage.empty() && usage.back() == '\n') usage.pop_back();
    return usage;
  }
  std::string out = who;
  for (const CLI::Option* opt :
       sub.get_options([](const CLI::Option* o) { return o->get_positional(); })) {
    std::string name = Upper(opt->get_name());
    if (opt->get_items_expected_max() > 1) name += "...";
    out += " " + (opt->get_required() ? name : "[" + name + "]");
  }
  return out + " [OPTIONS]";
}

bool IsInteger(const std::string& s) {
  static const std::regex kInteger("-?[0-9]+");
  return std::regex_match(s, kInteger);
}

// A number outside its option's range, or no number at all:
// "--delay-ms: Value 30s not in range 0 to 3153600000000" (CLI::Range).
std::optional<std::string> DescribeRange(const CLI::App& app, const CLI::App& sub,
                                         const std::string& message) {
  static const std::regex kRange("(\\S+): Value (.*) not in range (\\S+) to (\\S+)");
  std::smatch m;
  if (!std::regex_match(message, m, kRange)) return std::nullopt;
  const std::string name = m[1], value = m[2], least = m[3], most = m[4];
  const std::string shown = Shown(app, sub, name);
  if (IsInteger(value)) return shown + " takes " + least + " to " + most + ", not " + value;
  // Milliseconds given as a duration: the option beside it takes those
  // ("--delay" beside "--delay-ms"), as a serve option may.
  const bool in_ms = name.ends_with("-ms") || name == "ms";
  if (in_ms) {
    std::string out = shown + " takes whole milliseconds, not '" + value + "'";
    const std::string human = name.substr(0, name.size() - 3);
    const bool has_human = name != "ms" && FindOption(app, sub, human) != nullptr;
    Result<int64_t> ms = ParseDurationMs(value, name);
    if (has_human && ms.ok()) return out + ": use " + human + " " + value;
    if (ms.ok()) return out + ": " + value + " is " + std::to_string(*ms);
    if (has_human) return out + " (or " + human + " with a duration: 30s, 5m, 1h30m)";
    return out + " (" + least + " to " + most + ")";
  }
  return shown + " takes a whole number from " + least + " to " + most + ", not '" + value + "'";
}

// A value not among the choices: "--state: reserved not in {ready,delayed,buried}"
// (CLI::IsMember).
std::optional<std::string> DescribeChoice(const CLI::App& app, const CLI::App& sub,
                                          const std::string& message) {
  static const std::regex kChoice("(\\S+): (.*) not in \\{(.*)\\}");
  std::smatch m;
  if (!std::regex_match(message, m, kChoice)) return std::nullopt;
  std::vector<std::string> choices;
  std::string all = m[3];
  for (size_t start = 0; start <= all.size();) {
    size_t comma = all.find(',', start);
    if (comma == std::string::npos) comma = all.size();
    choices.push_back(all.substr(start, comma - start));
    start = comma + 1;
  }
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (i > 0) list += i + 1 == choices.size() ? " or " : ", ";
    list += choices[i];
  }
  return Shown(app, sub, m[1]) + " takes " + list + ", not '" + std::string(m[2]) + "'";
}

// The deepest subcommand chosen (`schedule set` is two deep), or nullptr,
// and how messages name it: "delayq schedule set".
const CLI::App* Chosen(const CLI::App& app, std::string* who) {
  const CLI::App* sub = nullptr;
  *who = "delayq";
  for (const CLI::App* at = &app;;) {
    std::vector<CLI::App*> chosen = at->get_subcommands();
    if (chosen.empty()) return sub;
    sub = at = chosen.front();
    *who += " " + sub->get_name();
  }
}

// The names of the subcommands `app` has.
std::vector<std::string> CommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* c : app.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(c->get_name());
  }
  return names;
}

}  // namespace

std::string DescribeLeftOver(const CLI::App& app, const CLI::ParseError& error) {
  // Leftovers in command-line order: the app's own first (where a client
  // subcommand's unknown options fall through to), then the subcommand's.
  std::vector<std::string> left = app.remaining(/*recurse=*/true);
  auto word = left.begin();
  while (word != left.end() && *word == "--") ++word;  // a separator, not a word
  if (word == left.end()) return {};

  std::string who;
  const CLI::App* sub = Chosen(app, &who);

  if (word->size() > 1 && (*word)[0] == '-') {
    std::string name = word->substr(0, word->find('='));  // --opt=value
    std::vector<std::string> options;
    if (sub != nullptr) AddOptionNames(*sub, &options);
    if (sub == nullptr || sub->get_fallthrough()) AddOptionNames(app, &options);
    std::string hint = DidYouMean(name, options);
    return who + ": unknown option '" + name + "'" +
           (hint.empty() ? " ('" + who + " --help' lists the options)" : hint);
  }
  // No command, or one that is only its subcommands (`schedule`), and a
  // word that is none of them.
  const CLI::App& parent = sub == nullptr ? app : *sub;
  if (std::vector<std::string> commands = CommandNames(parent);
      sub == nullptr || !commands.empty()) {
    std::string hint = DidYouMean(*word, commands);
    return who + ": unknown command '" + *word + "'" +
           (hint.empty() ? " ('" + who + " --help' lists the commands)" : hint);
  }
  // A word too many may only be the echo of another mistake (the value of
  // `--data-dir --store memory` is "--store", leaving "memory"): unless it
  // is all that is wrong, CLI11's message about that mistake is the one.
  if (dynamic_cast<const CLI::ExtrasError*>(&error) == nullptr) return {};
  return who + ": unexpected argument '" + *word + "'";
}

std::string DescribeParseError(const CLI::App& app, const CLI::ParseError& error) {
  if (std::string left = DescribeLeftOver(app, error); !left.empty()) return left;
  std::string who;
  const CLI::App* chosen = Chosen(app, &who);
  if (chosen == nullptr) return {};
  const CLI::App& sub = *chosen;
  const std::string help = "see " + who + " --help";
  const std::string message = error.what();
  std::smatch m;

  if (dynamic_cast<const CLI::RequiredError*>(&error) != nullptr) {
    static const std::regex kRequired("(\\S+) is required");
    if (std::regex_match(message, m, kRequired)) {
      return who + ": " + Shown(app, sub, m[1]) + " is required (" + UsageOf(sub, who) + "; " +
             help + ")";
    }
    // A command that is only its subcommands (`delayq schedule`) alone.
    if (std::vector<std::string> commands = CommandNames(sub); !commands.empty()) {
      std::string list;
      for (const std::string& c : commands) list += (list.empty() ? "" : ", ") + c;
      return who + ": a subcommand is required: " + list + " (" + help + ")";
    }
  }
  if (dynamic_cast<const CLI::ValidationError*>(&error) != nullptr) {
    if (auto range = DescribeRange(app, sub, message)) return who + ": " + *range;
    if (auto choice = DescribeChoice(app, sub, message)) return who + ": " + *choice;
    return who + ": " + message;  // our own validators' words (option_checks.h)
  }
  if (dynamic_cast<const CLI::ExcludesError*>(&error) != nullptr) {
    static const std::regex kExcludes("(\\S+) excludes (\\S+)");
    if (std::regex_match(message, m, kExcludes)) {
      return who + ": give " + std::string(m[2]) + " or " + std::string(m[1]) + ", not both";
    }
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&error) != nullptr) {
    // "--delay-ms: 1 required INT64 missing": the value was left out.
    static const std::regex kMissing("(\\S+): .*(missing|required but received 0)");
    if (std::regex_match(message, m, kMissing)) {
      return who + ": " + Shown(app, sub, m[1]) + " needs a value (" + help + ")";
    }
  }
  return who + ": " + message + " (" + help + ")";
}

}  // namespace delayq::cli
