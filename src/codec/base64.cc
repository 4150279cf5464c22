#include "codec/base64.h"

#include <array>
#include <cstdint>

namespace delayq::codec {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr uint8_t kBad = 0xFF;

constexpr std::array<uint8_t, 256> MakeDecodeTable() {
  std::array<uint8_t, 256> t{};
  for (auto& v : t) v = kBad;
  for (uint8_t i = 0; i < 64; ++i) t[static_cast<unsigned char>(kAlphabet[i])] = i;
  return t;
}
constexpr std::array<uint8_t, 256> kDecode = MakeDecodeTable();

uint32_t Sextet(char c) { return kDecode[static_cast<unsigned char>(c)]; }

}  // namespace

std::string Base64Encode(std::string_view bytes) {
  std::string out;
  out.resize((bytes.size() + 2) / 3 * 4);
  const auto* in = reinterpret_cast<const unsigned char*>(bytes.data());
  char* o = out.data();
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = (uint32_t{in[i]} << 16) | (uint32_t{in[i + 1]} << 8) | in[i + 2];
    *o++ = kAlphabet[v >> 18];
    *o++ = kAlphabet[(v >> 12) & 63];
    *o++ = kAlphabet[(v >> 6) & 63];
    *o++ = kAlphabet[v & 63];
  }
  size_t left = bytes.size() - i;
  if (left > 0) {
    uint32_t v = uint32_t{in[i]} << 16;
    if (left == 2) v |= uint32_t{in[i + 1]} << 8;
    *o++ = kAlphabet[v >> 18];
    *o++ = kAlphabet[(v >> 12) & 63];
    *o++ = left == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    *o++ = '=';
  }
  return out;
}

std::optional<std::string> Base64Decode(std::string_view text) {
  // Strip the padding, checking it completes the last group.
  size_t pad = 0;
  while (pad < 2 && pad < text.size() && text[text.size() - 1 - pad] == '=') ++pad;
  if (pad > 0 && text.size() % 4 != 0) return std::nullopt;
  text.remove_suffix(pad);
  size_t tail = text.size() % 4;  // characters in the last, partial group
  if (tail == 1) return std::nullopt;
  if (pad > 0 && pad + tail != 4) return std::nullopt;

  std::string out;
  out.resize(text.size() / 4 * 3 + (tail == 0 ? 0 : tail - 1));
  char* o = out.data();
  size_t i = 0;
  for (; i + 4 <= text.size(); i += 4) {
    uint32_t a = Sextet(text[i]), b = Sextet(text[i + 1]);
    uint32_t c = Sextet(text[i + 2]), d = Sextet(text[i + 3]);
    if ((a | b | c | d) & 0xC0) return std::nullopt;  // kBad has bits a sextet cannot
    uint32_t v = (a << 18) | (b << 12) | (c << 6) | d;
    *o++ = static_cast<char>(v >> 16);
    *o++ = static_cast<char>(v >> 8);
    *o++ = static_cast<char>(v);
  }
  if (tail > 0) {
    uint32_t a = Sextet(text[i]), b = Sextet(text[i + 1]);
    uint32_t c = tail == 3 ? Sextet(text[i + 2]) : 0;
    if ((a | b | c) & 0xC0) return std::nullopt;
    uint32_t v = (a << 18) | (b << 12) | (c << 6);
    // The unused low bits must be zero: one encoding per byte string.
    if ((tail == 2 && (v & 0xFFFF) != 0) || (tail == 3 && (v & 0xFF) != 0)) return std::nullopt;
    *o++ = static_cast<char>(v >> 16);
    if (tail == 3) *o++ = static_cast<char>(v >> 8);
  }
  return out;
}

}  // namespace delayq::codec
