#include "client/wire_codec.h"

#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

namespace delayq::client {
namespace {

using redis::Reply;

// The RESP error prefixes of src/server/errors.h, read backwards.
struct Prefix {
  std::string_view resp;
  Code code;
};
constexpr Prefix kPrefixes[] = {
    {"INVALID", Code::kInvalidArgument}, {"NOTFOUND", Code::kNotFound},
    {"EXISTS", Code::kExists},           {"STALE", Code::kStaleReceipt},
    {"NOTRESERVED", Code::kNotReserved}, {"TOOLARGE", Code::kTooLarge},
    {"NOAUTH", Code::kUnauthorized},     {"UNAVAILABLE", Code::kUnavailable},
};

template <typename T>
std::optional<T> Number(std::string_view s) {
  T v{};
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
  return v;
}

// An integer element, or a bulk string of digits (RESP2 maps carry numbers
// as strings).
template <typename T>
std::optional<T> NumberOf(const Reply& r) {
  if (r.is_integer()) {
    const int64_t v = r.integer();
    if (v < static_cast<int64_t>(std::numeric_limits<T>::min())) return std::nullopt;
    if (v > 0 && static_cast<uint64_t>(v) > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
      return std::nullopt;
    }
    return static_cast<T>(v);
  }
  if (r.is_string()) return Number<T>(r.str());
  return std::nullopt;
}

// Walks a flat array of field/value pairs, calling set(name, value) for
// each; false from set is a malformed value.
template <typename Set>
Status Pairs(std::string_view command, const Reply& reply, Set set) {
  if (!reply.is_array() || reply.elements().size() % 2 != 0) {
    return Malformed(command, "a flat array of field/value pairs", reply);
  }
  const auto& e = reply.elements();
  for (size_t i = 0; i < e.size(); i += 2) {
    if (!e[i].is_string()) return Malformed(command, "a field name", e[i]);
    if (!set(e[i].str(), e[i + 1])) {
      return Malformed(command, "a valid value of '" + e[i].str() + "'", e[i + 1]);
    }
  }
  return Status::Ok();
}

bool Text(const Reply& r, std::string* out) {
  if (!r.is_string()) return false;
  *out = r.str();
  return true;
}

template <typename T>
bool Num(const Reply& r, T* out) {
  auto v = NumberOf<T>(r);
  if (!v) return false;
  *out = *v;
  return true;
}

}  // namespace

Status Malformed(std::string_view command, std::string_view what, const Reply& got) {
  std::string shown = got.ToString();
  if (shown.size() > 120) shown = shown.substr(0, 120) + "...";
  return Unavailable("malformed reply to " + std::string(command) + ": expected " +
                     std::string(what) + ", got " + shown);
}

std::string_view ErrorPrefix(Code code) {
  for (const Prefix& p : kPrefixes) {
    if (p.code == code) return p.resp;
  }
  return "ERR";
}

Status StatusOf(const Reply& reply) {
  if (!reply.is_error()) return Status::Ok();
  std::string_view text = reply.str();
  const size_t space = text.find(' ');
  std::string_view prefix = text.substr(0, space);
  std::string_view rest = space == std::string_view::npos ? "" : text.substr(space + 1);
  for (const Prefix& p : kPrefixes) {
    if (prefix == p.resp) return Status(p.code, std::string(rest));
  }
  return Internal("server error: " + std::string(text));
}

Status ParseOk(std::string_view command, const Reply& reply) {
  if (reply.is_error()) return StatusOf(reply);
  if (reply.is_status() && (reply.str() == "OK" || reply.str() == "FORCED")) return Status::Ok();
  return Malformed(command, "+OK", reply);
}

redis::Argv AddCommand(const JobSpec& spec) {
  redis::Argv argv{"ADD",
                   spec.topic,
                   spec.id.empty() ? std::string("*") : spec.id,
                   std::to_string(spec.delay_ms.value_or(0)),
                   std::to_string(spec.ttr_ms),
                   spec.body,
                   "PRIORITY",
                   std::to_string(spec.priority),
                   "MAXATTEMPTS",
                   std::to_string(spec.max_attempts)};
  if (spec.run_at_ms) {
    argv.emplace_back("AT");
    argv.push_back(std::to_string(*spec.run_at_ms));
  }
  if (spec.replace) argv.emplace_back("REPLACE");
  if (!spec.idempotency_key.empty()) {
    argv.emplace_back("IDEMPOTENCY");
    argv.push_back(spec.idempotency_key);
  }
  argv.emplace_back("WITHSTATE");
  return argv;
}

Result<AddResult> ParseAdded(const Reply& reply) {
  if (reply.is_error()) return StatusOf(reply);
  AddResult a;
  std::string state;
  if (!reply.is_array() || reply.elements().size() < 3 || !Text(reply.elements()[0], &a.id) ||
      !Text(reply.elements()[1], &state) || !Num(reply.elements()[2], &a.run_at_ms)) {
    return Malformed("ADD", "[id, state, run_at_ms] (a server with ADD ... WITHSTATE)", reply);
  }
  auto parsed = ParseState(state);
  if (!parsed) return Malformed("ADD", "a job state", reply.elements()[1]);
  a.state = *parsed;
  return a;
}

redis::Argv ReserveCommand(const ReserveRequest& req) {
  redis::Argv argv{"RESERVE"};
  if (req.wait_ms > 0) {
    argv.emplace_back("TIMEOUT");
    argv.push_back(std::to_string(req.wait_ms));
  }
  argv.emplace_back("COUNT");
  argv.push_back(std::to_string(req.count));
  if (req.max_bytes > 0) {
    argv.emplace_back("MAXBYTES");
    argv.push_back(std::to_string(req.max_bytes));
  }
  argv.emplace_back("FROM");
  for (const std::string& t : req.topics) argv.push_back(t);
  return argv;
}

Result<Delivery> ParseDelivery(std::string_view command, const Reply& reply) {
  if (!reply.is_array() || reply.elements().size() < 5) {
    return Malformed(command, "a job array of 5 or more elements", reply);
  }
  const auto& e = reply.elements();
  Delivery d;
  bool ok = Text(e[0], &d.id) && Text(e[1], &d.topic) && Text(e[2], &d.body) &&
            Text(e[3], &d.receipt) && Num(e[4], &d.attempts);
  if (ok && e.size() >= 9) {
    ok = Num(e[5], &d.ttr_ms) && Num(e[6], &d.priority) && Num(e[7], &d.run_at_ms) &&
         Num(e[8], &d.reserved_until_ms);
  }
  // max_attempts, the 10th: a server older than that field sends 9, read as
  // 0 (unlimited).
  if (ok && e.size() >= 10) ok = Num(e[9], &d.max_attempts);
  if (!ok) return Malformed(command, "[id, topic, body, receipt, attempts, ...]", reply);
  return d;
}

Result<Deliveries> ParseDeliveries(const Reply& reply) {
  if (reply.is_error()) return StatusOf(reply);
  if (reply.is_nil()) return Deliveries{};
  if (!reply.is_array()) return Malformed("RESERVE", "an array of jobs or nil", reply);
  Deliveries out;
  out.reserve(reply.elements().size());
  for (const Reply& job : reply.elements()) {
    auto d = ParseDelivery("RESERVE", job);
    if (!d.ok()) return d.status();
    out.push_back(std::move(d).value());
  }
  return out;
}

Result<JobInfo> ParseJob(std::string_view id, const Reply& reply) {
  if (reply.is_error()) return StatusOf(reply);
  if (reply.is_nil()) return NotFound("job '" + std::string(id) + "' does not exist");
  JobInfo j;
  bool has_state = false;
  Status s = Pairs("GET", reply, [&](const std::string& name, const Reply& v) {
    if (name == "id") return Text(v, &j.id);
    if (name == "topic") return Text(v, &j.topic);
    if (name == "body") return Text(v, &j.body);
    if (name == "receipt") return Text(v, &j.receipt);
    if (name == "last_error") return Text(v, &j.last_error);
    if (name == "priority") return Num(v, &j.priority);
    if (name == "ttr_ms") return Num(v, &j.ttr_ms);
    if (name == "max_attempts") return Num(v, &j.max_attempts);
    if (name == "attempts") return Num(v, &j.attempts);
    if (name == "created_at_ms") return Num(v, &j.created_at_ms);
    if (name == "run_at_ms") return Num(v, &j.run_at_ms);
    if (name == "reserved_until_ms") return Num(v, &j.reserved_until_ms);
    if (name == "state") {
      std::string text;
      if (!Text(v, &text)) return false;
      auto st = ParseState(text);
      if (st) j.state = *st;
      has_state = st.has_value();
      return has_state;
    }
    return true;  // a field this client does not know
  });
  if (!s.ok()) return s;
  if (!has_state || j.id.empty()) return Malformed("GET", "a job with id and state", reply);
  return j;
}

Result<TopicInfo> ParseTopic(const Reply& reply) {
  if (reply.is_error()) return StatusOf(reply);
  TopicInfo t;
  Status s = Pairs("STATS topic", reply, [&](const std::string& name, const Reply& v) {
    if (name == "topic") return Text(v, &t.name);
    if (name == "delayed") return Num(v, &t.delayed);
    if (name == "ready") return Num(v, &t.ready);
    if (name == "reserved") return Num(v, &t.reserved);
    if (name == "buried") return Num(v, &t.buried);
    if (name == "waiting") return Num(v, &t.waiting);
    if (name == "paused_for_ms") return Num(v, &t.paused_for_ms);
    if (name == "paused") {
      int paused = 0;
      if (!Num(v, &paused)) return false;
      t.paused = paused != 0;
    }
    return true;
  });
  if (!s.ok()) return s;
  return t;
}

Result<QueueStats> ParseStats(const Reply& reply) {
  if (reply.is_error()) return StatusOf(reply);
  QueueStats q;
  const std::pair<std::string_view, uint64_t*> fields[] = {
      {"jobs", &q.jobs},         {"delayed", &q.delayed},     {"ready", &q.ready},
      {"reserved", &q.reserved}, {"buried", &q.buried},       {"topics", &q.topics},
      {"waiting", &q.waiting},   {"added", &q.added},         {"replaced", &q.replaced},
      {"reserves", &q.reserves}, {"finished", &q.finished},   {"deleted", &q.deleted},
      {"released", &q.released}, {"timed_out", &q.timed_out}, {"buried_total", &q.buried_total},
      {"kicked", &q.kicked},
  };
  Status s = Pairs("STATS", reply, [&](const std::string& name, const Reply& v) {
    for (const auto& [field, out] : fields) {
      if (name == field) return Num(v, out);
    }
    return true;  // the server's own figures (connections, lateness, the store's)
  });
  if (!s.ok()) return s;
  return q;
}

Result<std::vector<std::string>> ParseNames(const Reply& reply) {
  if (reply.is_error()) return StatusOf(reply);
  if (!reply.is_array()) return Malformed("TOPICS", "an array of names", reply);
  std::vector<std::string> names;
  for (const Reply& e : reply.elements()) {
    if (!e.is_string()) return Malformed("TOPICS", "a topic name", e);
    names.push_back(e.str());
  }
  return names;
}

Result<uint64_t> ParseCount(std::string_view command, const Reply& reply) {
  if (reply.is_error()) return StatusOf(reply);
  if (!reply.is_integer() || reply.integer() < 0) return Malformed(command, "a count", reply);
  return static_cast<uint64_t>(reply.integer());
}

}  // namespace delayq::client
