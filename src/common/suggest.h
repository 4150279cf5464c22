// "Did you mean": the nearest of a list of words to one the user mistyped,
// for unknown subcommands and options of the `delayq` command line and unknown
// fields of a request.
//
// Thread-safety: pure functions.
#ifndef DELAYQ_COMMON_SUGGEST_H_
#define DELAYQ_COMMON_SUGGEST_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace delayq {

// The Damerau-Levenshtein distance (optimal string alignment): how many
// single-character insertions, deletions, substitutions and swaps of two
// neighbours turn `a` into `b`. "reserv" -> "reserve" is 1, "fnish" ->
// "finish" is 1, "fiinsh" -> "finish" is 1.
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate nearest to `word`, when it is close enough to be what the
// user meant: at most a third of the word's letters wrong (at least one,
// at most three; leading dashes do not count). Ties go to the earlier
// candidate. nullopt when nothing is that close.
std::optional<std::string> Nearest(std::string_view word,
                                   const std::vector<std::string>& candidates);

}  // namespace delayq

#endif  // DELAYQ_COMMON_SUGGEST_H_
