#include "cli/server_address.h"

#include <charconv>

namespace delayq::cli {

Result<redis::Endpoint> ParseServerAddress(const std::string& text) {
  redis::Endpoint a{.host = "", .port = kDefaultServerPort};
  std::string port;
  if (!text.empty() && text[0] == '[') {  // [v6]:port or [v6]
    size_t close = text.find(']');
    if (close == std::string::npos) return InvalidArgument("server address '" + text + "': no ']'");
    a.host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') {
        return InvalidArgument("server address '" + text + "': expected ':port' after ']'");
      }
      port = text.substr(close + 2);
      if (port.empty()) return InvalidArgument("server address '" + text + "': empty port");
    }
  } else if (size_t colon = text.rfind(':');
             colon != std::string::npos && text.find(':') == colon) {  // host:port
    a.host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (port.empty()) return InvalidArgument("server address '" + text + "': empty port");
  } else {  // host, or a bare IPv6 address
    a.host = text;
  }
  if (a.host.empty()) return InvalidArgument("server address '" + text + "': empty host");
  if (!port.empty()) {
    int p = 0;
    auto r = std::from_chars(port.data(), port.data() + port.size(), p);
    if (r.ec != std::errc() || r.ptr != port.data() + port.size() || p < 1 || p > 65535) {
      return InvalidArgument("server address '" + text + "': port must be 1..65535");
    }
    a.port = p;
  }
  return a;
}

}  // namespace delayq::cli
