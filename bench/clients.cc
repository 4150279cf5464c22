// The codecs of clients.h. Requests are appended with no intermediate
// objects; replies are scanned in place. Each scanner returns 0 until a
// whole reply is in the buffer and then reads it once, so a reply split
// across reads is rescanned from its start: replies here are small.
#include "clients.h"

#include <time.h>

#include <cstring>

namespace delayq::bench {
namespace {

int64_t WallMs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// Writes the decimal form of v to buf (24 bytes suffice); returns its length.
int FormatInt(int64_t v, char* buf) {
  char rev[24];
  int n = 0;
  uint64_t u = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  do {
    rev[n++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  int len = 0;
  if (v < 0) buf[len++] = '-';
  while (n > 0) buf[len++] = rev[--n];
  return len;
}

int64_t CeilSeconds(int64_t ms) { return ms <= 0 ? 0 : (ms + 999) / 1000; }

// Parses a decimal integer (optionally negative) filling [p, end) exactly.
bool ParseInt(const char* p, const char* end, int64_t* v) {
  bool neg = p < end && *p == '-';
  if (neg) ++p;
  if (p == end) return false;
  int64_t x = 0;
  for (; p < end; ++p) {
    if (*p < '0' || *p > '9') return false;
    x = x * 10 + (*p - '0');
  }
  *v = neg ? -x : x;
  return true;
}

// The offset just past the first '\n' in p[0, n), or -1 if there is none.
long LineEnd(const char* p, size_t n) {
  const void* nl = std::memchr(p, '\n', n);
  if (nl == nullptr) return -1;
  return static_cast<const char*>(nl) - p + 1;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

void AppendJsonString(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(ch);
    } else if (c < 0x20) {
      out->append("\\u00");
      out->push_back(kHex[c >> 4]);
      out->push_back(kHex[c & 15]);
    } else {
      out->push_back(ch);
    }
  }
  out->push_back('"');
}

// --- RESP ---------------------------------------------------------------------

void AppendBulk(std::string* out, std::string_view s) {
  out->push_back('$');
  AppendInt(out, static_cast<int64_t>(s.size()));
  out->append("\r\n");
  out->append(s);
  out->append("\r\n");
}

// A bulk string holding the decimal form of v.
void AppendBulkInt(std::string* out, int64_t v) {
  char digits[24];
  int len = FormatInt(v, digits);
  out->push_back('$');
  AppendInt(out, len);
  out->append("\r\n");
  out->append(digits, static_cast<size_t>(len));
  out->append("\r\n");
}

void AppendArrayHeader(std::string* out, int n) {
  out->push_back('*');
  AppendInt(out, n);
  out->append("\r\n");
}

// What one RESP reply holds, flattened: its type, whether it is nil, and
// its first few leaf strings in order (a RESERVE reply [[id, topic, body,
// receipt, attempts]] gives leaves id, topic, body, receipt, attempts).
struct RespValue {
  static constexpr int kMaxLeaves = 6;
  char type = 0;
  bool null = false;
  int64_t count = 0;  // array length or bulk length
  int leaves = 0;
  std::string_view leaf[kMaxLeaves];
};

long ScanResp(const char* p, size_t n, int depth, RespValue* v) {
  if (n < 3) return 0;
  long line = LineEnd(p, n);
  if (line < 0) return 0;
  if (line < 3 || p[line - 2] != '\r') return -1;
  const char* body = p + 1;
  const char* body_end = p + line - 2;
  char type = p[0];
  bool top = v->type == 0;
  if (top) v->type = type;
  auto add_leaf = [v](std::string_view s) {
    if (v->leaves < RespValue::kMaxLeaves) v->leaf[v->leaves++] = s;
  };
  switch (type) {
    case '+':
    case '-':
    case ':':
      add_leaf(std::string_view(body, body_end - body));
      return line;
    case '$': {
      int64_t len;
      if (!ParseInt(body, body_end, &len) || len < -1) return -1;
      if (top) v->count = len;
      if (len == -1) {
        if (top) v->null = true;
        add_leaf({});
        return line;
      }
      if (n < static_cast<size_t>(line + len + 2)) return 0;
      add_leaf(std::string_view(p + line, static_cast<size_t>(len)));
      return line + static_cast<long>(len) + 2;
    }
    case '*': {
      int64_t count;
      if (!ParseInt(body, body_end, &count) || count < -1 || depth > 4) return -1;
      if (top) {
        v->count = count;
        v->null = count == -1;
      }
      long used = line;
      for (int64_t i = 0; i < count; ++i) {
        long r = ScanResp(p + used, n - static_cast<size_t>(used), depth + 1, v);
        if (r <= 0) return r;
        used += r;
      }
      return used;
    }
    default:
      return -1;
  }
}

class RespCodec : public Codec {
 public:
  int default_port() const override { return 7701; }

  int Add(std::string* out, const AddArgs& a) const override {
    AppendArrayHeader(out, a.run_at_ms >= 0 ? 8 : 6);
    out->append("$3\r\nADD\r\n");
    AppendBulk(out, a.topic);
    AppendBulk(out, a.id.empty() ? std::string_view("*") : a.id);
    AppendBulkInt(out, a.run_at_ms >= 0 ? 0 : a.delay_ms);
    AppendBulkInt(out, a.ttr_ms);
    AppendBulk(out, a.body);
    if (a.run_at_ms >= 0) {
      out->append("$2\r\nAT\r\n");
      AppendBulkInt(out, a.run_at_ms);
    }
    return 1;
  }

  void Reserve(std::string* out, std::string_view topic, int64_t wait_ms) const override {
    out->append("*7\r\n$7\r\nRESERVE\r\n$7\r\nTIMEOUT\r\n");
    AppendBulkInt(out, wait_ms);
    out->append("$5\r\nCOUNT\r\n$1\r\n1\r\n$4\r\nFROM\r\n");
    AppendBulk(out, topic);
  }

  void Finish(std::string* out, std::string_view id, std::string_view receipt) const override {
    AppendArrayHeader(out, receipt.empty() ? 2 : 3);
    out->append("$6\r\nFINISH\r\n");
    AppendBulk(out, id);
    if (!receipt.empty()) AppendBulk(out, receipt);
  }

  long Parse(const char* in, size_t n, Op op, Reply* r) const override {
    RespValue v;
    long used = ScanResp(in, n, 0, &v);
    if (used <= 0) return used;
    *r = Reply();
    r->raw = std::string_view(in, static_cast<size_t>(used));
    if (v.type == '-') {
      r->kind = Reply::Kind::kError;
      r->error = v.leaf[0];
      return used;
    }
    switch (op) {
      case Op::kReserve:
        if (v.type != '*') return -1;
        if (v.null || v.count == 0) {
          r->kind = Reply::Kind::kEmpty;
        } else if (v.leaves >= 4) {
          r->kind = Reply::Kind::kJob;
          r->id = v.leaf[0];
          r->body = v.leaf[2];
          r->receipt = v.leaf[3];
        } else {
          return -1;
        }
        return used;
      case Op::kAdd:
        r->kind = Reply::Kind::kOk;
        if (v.type == '$') r->id = v.leaf[0];
        return used;
      default:
        r->kind = Reply::Kind::kOk;
        return used;
    }
  }
};

// --- plain Redis: redis-hashzset (memory), redis-set (put) -------------------

class RedisSetCodec : public RespCodec {
 public:
  int default_port() const override { return 6379; }

  int Add(std::string* out, const AddArgs& a) const override {
    out->append("*3\r\n$3\r\nSET\r\n");
    AppendBulk(out, a.topic);
    AppendBulk(out, a.body);
    return 1;
  }
};

class RedisHashZsetCodec : public RespCodec {
 public:
  int default_port() const override { return 6379; }

  // HSET dq:jobs <id> <job JSON>, then ZADD dq:delay <due ms> <id>: the
  // job pool and the delay bucket of seeds 000 and 002.
  int Add(std::string* out, const AddArgs& a) const override {
    int64_t due = a.run_at_ms >= 0 ? a.run_at_ms : WallMs() + a.delay_ms;
    std::string& job = Scratch();
    job.clear();
    job.append("{\"topic\":");
    AppendJsonString(&job, a.topic);
    job.append(",\"id\":");
    AppendJsonString(&job, a.id);
    job.append(",\"delay\":");
    AppendInt(&job, CeilSeconds(due - WallMs()));
    job.append(",\"TTR\":");
    AppendInt(&job, CeilSeconds(a.ttr_ms));
    job.append(",\"body\":");
    AppendJsonString(&job, a.body);
    job.push_back('}');
    out->append("*4\r\n$4\r\nHSET\r\n$7\r\ndq:jobs\r\n");
    AppendBulk(out, a.id);
    AppendBulk(out, job);
    out->append("*4\r\n$4\r\nZADD\r\n$8\r\ndq:delay\r\n");
    AppendBulkInt(out, due);
    AppendBulk(out, a.id);
    return 2;
  }

 private:
  static std::string& Scratch() {
    static thread_local std::string s;
    return s;
  }
};

// --- HTTP/JSON ----------------------------------------------------------------

// Finds the first member "key": "value" in `json` (a key found inside a
// string value would fool it; the benchmark's own bodies hold no quotes)
// and sets *value to the raw, still escaped, text between the quotes.
bool FindJsonString(std::string_view json, std::string_view key, std::string_view* value) {
  size_t pos = 0;
  while ((pos = json.find(key, pos)) != std::string_view::npos) {
    size_t i = pos + key.size();
    bool quoted = pos > 0 && json[pos - 1] == '"' && i < json.size() && json[i] == '"';
    pos = i;
    if (!quoted) continue;
    ++i;
    while (i < json.size() && (json[i] == ' ' || json[i] == '\t')) ++i;
    if (i >= json.size() || json[i] != ':') continue;
    ++i;
    while (i < json.size() && (json[i] == ' ' || json[i] == '\t')) ++i;
    if (i >= json.size() || json[i] != '"') continue;
    size_t start = ++i;
    while (i < json.size() && json[i] != '"') i += json[i] == '\\' ? 2 : 1;
    if (i >= json.size()) return false;
    *value = json.substr(start, i - start);
    return true;
  }
  return false;
}

bool EqualsLower(std::string_view s, std::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

class HttpCodec : public Codec {
 public:
  explicit HttpCodec(std::string host) : host_(std::move(host)) {}

  int default_port() const override { return 7700; }

  int Add(std::string* out, const AddArgs& a) const override {
    std::string& j = Scratch();
    j.assign("{\"topic\":");
    AppendJsonString(&j, a.topic);
    if (!a.id.empty()) {
      j.append(",\"id\":");
      AppendJsonString(&j, a.id);
    }
    j.append(a.run_at_ms >= 0 ? ",\"run_at_ms\":" : ",\"delay_ms\":");
    AppendInt(&j, a.run_at_ms >= 0 ? a.run_at_ms : a.delay_ms);
    j.append(",\"ttr_ms\":");
    AppendInt(&j, a.ttr_ms);
    j.append(",\"body\":");
    AppendJsonString(&j, a.body);
    j.push_back('}');
    Post(out, "/v1/jobs", j);
    return 1;
  }

  void Reserve(std::string* out, std::string_view topic, int64_t wait_ms) const override {
    std::string& j = Scratch();
    j.assign("{\"topics\":[");
    AppendJsonString(&j, topic);
    j.append("],\"wait_ms\":");
    AppendInt(&j, wait_ms);
    j.append(",\"count\":1}");
    Post(out, "/v1/reserve", j);
  }

  void Finish(std::string* out, std::string_view id, std::string_view receipt) const override {
    std::string& j = Scratch();
    j.assign("{\"receipt\":");
    AppendJsonString(&j, receipt);
    j.push_back('}');
    std::string& path = Path();
    path.assign("/v1/jobs/");
    path.append(id);  // generated ids are hex: nothing to escape
    path.append("/finish");
    Post(out, path, j);
  }

  long Parse(const char* in, size_t n, Op op, Reply* r) const override {
    std::string_view buf(in, n);
    size_t head_end = buf.find("\r\n\r\n");
    if (head_end == std::string_view::npos) return n > (64 << 10) ? -1 : 0;
    if (!StartsWith(buf, "HTTP/1.") || head_end < 12) return -1;
    int64_t status;
    if (!ParseInt(in + 9, in + 12, &status)) return -1;
    int64_t length = -1;
    size_t line = buf.find("\r\n");
    while (line < head_end) {
      size_t next = buf.find("\r\n", line + 2);
      std::string_view h = buf.substr(line + 2, next - line - 2);
      size_t colon = h.find(':');
      if (colon != std::string_view::npos && EqualsLower(h.substr(0, colon), "content-length")) {
        size_t v = colon + 1;
        while (v < h.size() && h[v] == ' ') ++v;
        if (!ParseInt(h.data() + v, h.data() + h.size(), &length)) return -1;
      }
      line = next;
    }
    if (length < 0) {
      if (status != 204 && status != 304 && status >= 200) return -1;  // chunked: unsupported
      length = 0;
    }
    size_t total = head_end + 4 + static_cast<size_t>(length);
    if (n < total) return 0;
    std::string_view body = buf.substr(head_end + 4, static_cast<size_t>(length));
    *r = Reply();
    if (status >= 300) {
      r->kind = Reply::Kind::kError;
      r->error = body.empty() ? buf.substr(0, buf.find("\r\n")) : body;
      return static_cast<long>(total);
    }
    r->kind = Reply::Kind::kOk;
    if (op == Op::kAdd) {
      FindJsonString(body, "id", &r->id);
    } else if (op == Op::kReserve) {
      size_t jobs = body.find("\"jobs\"");
      if (jobs == std::string_view::npos) return -1;
      size_t open = body.find('[', jobs);
      if (open == std::string_view::npos) return -1;
      size_t i = body.find_first_not_of(" \t\r\n", open + 1);
      if (i == std::string_view::npos) return -1;
      if (body[i] == ']') {
        r->kind = Reply::Kind::kEmpty;
      } else {
        std::string_view job = body.substr(i);
        if (!FindJsonString(job, "id", &r->id) || !FindJsonString(job, "receipt", &r->receipt)) {
          return -1;
        }
        FindJsonString(job, "body", &r->body);
        r->kind = Reply::Kind::kJob;
      }
    }
    return static_cast<long>(total);
  }

 private:
  void Post(std::string* out, std::string_view path, std::string_view json) const {
    out->append("POST ");
    out->append(path);
    out->append(" HTTP/1.1\r\nHost: ");
    out->append(host_);
    out->append("\r\nContent-Type: application/json\r\nContent-Length: ");
    AppendInt(out, static_cast<int64_t>(json.size()));
    out->append("\r\n\r\n");
    out->append(json);
  }
  static std::string& Scratch() {
    static thread_local std::string s;
    return s;
  }
  static std::string& Path() {
    static thread_local std::string s;
    return s;
  }

  std::string host_;
};

// --- beanstalk ----------------------------------------------------------------

class BeanstalkCodec : public Codec {
 public:
  int default_port() const override { return 11300; }
  bool whole_seconds() const override { return true; }

  int Bind(std::string* out, std::string_view topic) const override {
    out->append("use ");
    out->append(topic);
    out->append("\r\nwatch ");
    out->append(topic);
    out->append("\r\nignore default\r\n");
    return 3;
  }

  int Add(std::string* out, const AddArgs& a) const override {
    int64_t delay_ms = a.run_at_ms >= 0 ? a.run_at_ms - WallMs() : a.delay_ms;
    out->append("put 1024 ");
    AppendInt(out, CeilSeconds(delay_ms));
    out->push_back(' ');
    AppendInt(out, CeilSeconds(a.ttr_ms) > 0 ? CeilSeconds(a.ttr_ms) : 1);
    out->push_back(' ');
    AppendInt(out, static_cast<int64_t>(a.body.size()));
    out->append("\r\n");
    out->append(a.body);
    out->append("\r\n");
    return 1;
  }

  void Reserve(std::string* out, std::string_view, int64_t wait_ms) const override {
    out->append("reserve-with-timeout ");
    AppendInt(out, CeilSeconds(wait_ms));
    out->append("\r\n");
  }

  void Finish(std::string* out, std::string_view id, std::string_view) const override {
    out->append("delete ");
    out->append(id);
    out->append("\r\n");
  }

  long Parse(const char* in, size_t n, Op op, Reply* r) const override {
    long end = LineEnd(in, n);
    if (end < 0) return n > 4096 ? -1 : 0;
    if (end < 2 || in[end - 2] != '\r') return -1;
    std::string_view line(in, static_cast<size_t>(end - 2));
    *r = Reply();
    r->kind = Reply::Kind::kOk;
    switch (op) {
      case Op::kBind:
        if (StartsWith(line, "USING ") || StartsWith(line, "WATCHING ")) return end;
        break;
      case Op::kAdd:
        if (StartsWith(line, "INSERTED ")) {
          r->id = line.substr(9);
          return end;
        }
        break;
      case Op::kReserve:
        if (StartsWith(line, "RESERVED ")) {
          size_t sp = line.find(' ', 9);
          int64_t bytes;
          if (sp == std::string_view::npos ||
              !ParseInt(line.data() + sp + 1, line.data() + line.size(), &bytes) || bytes < 0) {
            return -1;
          }
          size_t total = static_cast<size_t>(end) + static_cast<size_t>(bytes) + 2;
          if (n < total) return 0;
          r->kind = Reply::Kind::kJob;
          r->id = line.substr(9, sp - 9);
          r->body = std::string_view(in + end, static_cast<size_t>(bytes));
          return static_cast<long>(total);
        }
        if (line == "TIMED_OUT" || line == "DEADLINE_SOON") {
          r->kind = Reply::Kind::kEmpty;
          return end;
        }
        break;
      case Op::kFinish:
        if (line == "DELETED") return end;
        break;
      case Op::kAddAux:
      case Op::kCommand:  // RESP only
        break;
    }
    r->kind = Reply::Kind::kError;
    r->error = line;
    return end;
  }
};

}  // namespace

void AppendInt(std::string* out, int64_t v) {
  char digits[24];
  out->append(digits, static_cast<size_t>(FormatInt(v, digits)));
}

void AppendRespCommand(std::string* out, std::initializer_list<std::string_view> args) {
  AppendArrayHeader(out, static_cast<int>(args.size()));
  for (std::string_view a : args) AppendBulk(out, a);
}

Result<std::unique_ptr<Codec>> Codec::Create(std::string_view proto, std::string host_header) {
  if (proto == "resp") return std::unique_ptr<Codec>(new RespCodec());
  if (proto == "http") return std::unique_ptr<Codec>(new HttpCodec(std::move(host_header)));
  if (proto == "beanstalk") return std::unique_ptr<Codec>(new BeanstalkCodec());
  if (proto == "redis-hashzset") return std::unique_ptr<Codec>(new RedisHashZsetCodec());
  if (proto == "redis-set") return std::unique_ptr<Codec>(new RedisSetCodec());
  return InvalidArgument(
      "--proto: expected resp, http, beanstalk, redis-hashzset or redis-set, not '" +
      std::string(proto) + "'");
}

}  // namespace delayq::bench
