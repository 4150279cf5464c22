#include "resp/writer.h"

#include <charconv>

namespace delayq::resp {
namespace {

void AppendLine(std::string* out, char type, std::string_view s) {
  out->push_back(type);
  size_t start = out->size();
  out->append(s);
  for (size_t i = start; i < out->size(); ++i) {
    if ((*out)[i] == '\r' || (*out)[i] == '\n') (*out)[i] = ' ';
  }
  out->append("\r\n");
}

void AppendNumberLine(std::string* out, char type, int64_t v) {
  char buf[24];  // type, up to 20 digits and a sign, CRLF
  buf[0] = type;
  char* end = std::to_chars(buf + 1, buf + sizeof buf - 2, v).ptr;
  end[0] = '\r';
  end[1] = '\n';
  out->append(buf, end + 2);  // one append: one capacity check
}

}  // namespace

void AppendSimple(std::string* out, std::string_view s) { AppendLine(out, '+', s); }
void AppendError(std::string* out, std::string_view line) { AppendLine(out, '-', line); }
void AppendInteger(std::string* out, int64_t v) { AppendNumberLine(out, ':', v); }

void AppendBulk(std::string* out, std::string_view s) {
  AppendNumberLine(out, '$', static_cast<int64_t>(s.size()));
  out->append(s);
  out->append("\r\n");
}

void AppendNullBulk(std::string* out) { out->append("$-1\r\n"); }
void AppendNullArray(std::string* out) { out->append("*-1\r\n"); }
void AppendArrayHeader(std::string* out, size_t n) {
  AppendNumberLine(out, '*', static_cast<int64_t>(n));
}

void AppendMapHeader(std::string* out, size_t pairs, Protocol p) {
  if (p == Protocol::kResp3) return AppendNumberLine(out, '%', static_cast<int64_t>(pairs));
  AppendNumberLine(out, '*', static_cast<int64_t>(2 * pairs));
}

void AppendSetHeader(std::string* out, size_t n, Protocol p) {
  AppendNumberLine(out, p == Protocol::kResp3 ? '~' : '*', static_cast<int64_t>(n));
}

void AppendNull(std::string* out, Protocol p) {
  out->append(p == Protocol::kResp3 ? "_\r\n" : "$-1\r\n");
}

void AppendNullArray(std::string* out, Protocol p) {
  out->append(p == Protocol::kResp3 ? "_\r\n" : "*-1\r\n");
}

void AppendVerbatim(std::string* out, std::string_view text, Protocol p) {
  if (p == Protocol::kResp2) return AppendBulk(out, text);
  AppendNumberLine(out, '=', static_cast<int64_t>(text.size() + 4));
  out->append("txt:");
  out->append(text);
  out->append("\r\n");
}

}  // namespace delayq::resp
