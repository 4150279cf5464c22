// Text for a terminal: what the command line prints for people.
#ifndef DELAYQ_CODEC_TERMINAL_H_
#define DELAYQ_CODEC_TERMINAL_H_

#include <string>
#include <string_view>

namespace delayq::codec {

// Valid UTF-8 is kept, control characters and bytes that are not UTF-8 are
// shown as \n, \t, \r or \xHH, so a body can neither break the layout nor
// drive the terminal.
std::string EscapeForTerminal(std::string_view s);

}  // namespace delayq::codec

#endif  // DELAYQ_CODEC_TERMINAL_H_
