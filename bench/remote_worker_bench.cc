// A Worker over the network client against a running `delayq serve`, fed by
// producer threads, in steady state: what bench/bullmq/lifecycle.js measures
// of BullMQ. The producers' "pipeline" mode speaks RESP itself on a
// blocking socket (a batch of ADDs in one write, then their replies): the
// public Queue has no batch add, and BullMQ's producers send addBulk as one
// pipeline too, so neither side's adds are a round trip per job.
#include "remote_worker_bench.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "delayq/queue.h"
#include "delayq/worker.h"

namespace delayq::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// What the producers and the Worker share.
struct Shared {
  std::atomic<uint64_t> reserved_adds{0};  // adds taken from the window (sent or about to be)
  std::atomic<uint64_t> answered{0};       // adds answered with an id
  std::atomic<uint64_t> handled{0};        // handler calls (before their finish)
  std::atomic<uint64_t> add_errors{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::string first_error;  // GUARDED_BY(mu)

  void Error(const std::string& e) {
    add_errors.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mu);
    if (first_error.empty()) first_error = e;
  }
};

// Takes n adds from the window: waits while more than `window` would be
// outstanding (added, not yet handled). False once stopping.
bool TakeWindow(Shared& s, uint64_t window, uint64_t n) {
  for (;;) {
    if (s.stop.load(std::memory_order_relaxed)) return false;
    uint64_t taken = s.reserved_adds.load(std::memory_order_relaxed);
    if (taken + n <= s.handled.load(std::memory_order_relaxed) + window) {
      if (s.reserved_adds.compare_exchange_weak(taken, taken + n)) return true;
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));  // the window is full
  }
}

// g++ 12 warns at -O3 that this concatenation may memcpy 2^63 bytes onto
// itself: a false alarm (GCC PRs 105329, 105651).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wrestrict"
std::string Bulk(const std::string& s) {
  return "$" + std::to_string(s.size()) + "\r\n" + s + "\r\n";
}
#pragma GCC diagnostic pop

// A connected blocking TCP socket to the first of `servers`, or -1.
int Connect(const std::string& servers) {
  std::string first = servers.substr(0, servers.find(','));
  size_t colon = first.rfind(':');
  std::string host = colon == std::string::npos ? first : first.substr(0, colon);
  std::string port = colon == std::string::npos ? "7701" : first.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &res) != 0) return -1;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  int one = 1;
  if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// Reads until n replies of ADD are in (bulk ids or errors).
bool ReadReplies(int fd, uint32_t n, Shared& s) {
  std::string in;
  size_t pos = 0;
  char buf[65536];
  uint32_t got = 0;
  while (got < n) {
    size_t eol = in.find("\r\n", pos);
    if (eol != std::string::npos) {
      char kind = in[pos];
      if (kind == '$') {
        long len = std::strtol(in.c_str() + pos + 1, nullptr, 10);
        size_t end = eol + 2 + static_cast<size_t>(len < 0 ? 0 : len + 2);
        if (end <= in.size()) {
          ++got;
          if (len > 0) s.answered.fetch_add(1, std::memory_order_relaxed);
          pos = end;
          continue;
        }
      } else {
        if (kind == '-') s.Error(in.substr(pos + 1, eol - pos - 1));
        ++got;
        pos = eol + 2;
        continue;
      }
    }
    ssize_t r = read(fd, buf, sizeof(buf));
    if (r <= 0) return false;
    in.append(buf, static_cast<size_t>(r));
  }
  return true;
}

void PipelineProducer(const RemoteWorkerBenchOptions& o, const std::string& topic, Shared& s) {
  int fd = Connect(o.servers);
  if (fd < 0) {
    s.Error("cannot connect to " + o.servers);
    return;
  }
  std::string one = "*6\r\n" + Bulk("ADD") + Bulk(topic) + Bulk("*") + Bulk("0") + Bulk("60000") +
                    Bulk(std::string(o.body_bytes, 'x'));
  std::string batch;
  for (uint32_t i = 0; i < o.batch; ++i) batch += one;
  while (TakeWindow(s, o.window, o.batch)) {
    for (size_t off = 0; off < batch.size();) {
      ssize_t w = write(fd, batch.data() + off, batch.size() - off);
      if (w <= 0) {
        s.Error("write failed");
        close(fd);
        return;
      }
      off += static_cast<size_t>(w);
    }
    if (!ReadReplies(fd, o.batch, s)) {
      s.Error("connection closed");
      break;
    }
  }
  close(fd);
}

void ClientProducer(const RemoteWorkerBenchOptions& o, Queue& q, const std::string& topic,
                    Shared& s) {
  JobSpec spec;
  spec.topic = topic;
  spec.ttr_ms = 60'000;
  spec.body.assign(o.body_bytes, 'x');
  while (TakeWindow(s, o.window, 1)) {
    auto added = q.Add(spec);
    if (added.ok()) {
      s.answered.fetch_add(1, std::memory_order_relaxed);
    } else {
      s.Error(added.status().ToString());
    }
  }
}

std::unique_ptr<Queue> OpenRemote(const std::string& servers) {
  QueueOptions qo;
  qo.store = StoreKind::kRemote;
  qo.servers = servers;
  auto q = OpenQueue(qo);
  if (!q.ok()) {
    std::fprintf(stderr, "open: %s\n", q.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(q).value();
}

double Since(SteadyClock::time_point t) {
  return std::chrono::duration<double>(SteadyClock::now() - t).count();
}

void SleepSeconds(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

}  // namespace

int RunRemoteWorkerBench(const RemoteWorkerBenchOptions& o) {
  const bool client_mode = o.add_mode == "client";
  if (!client_mode && o.add_mode != "pipeline") {
    std::fprintf(stderr, "--add-mode is pipeline or client\n");
    return 2;
  }
  const std::string topic = "bench-rw-" + std::to_string(getpid());
  auto queue = OpenRemote(o.servers);
  std::unique_ptr<Queue> producer_queue = client_mode ? OpenRemote(o.servers) : nullptr;
  Shared s;
  WorkerOptions wo;
  wo.threads = o.threads;
  auto worker = Worker::Create(*queue, wo);
  if (!worker.ok()) {
    std::fprintf(stderr, "worker: %s\n", worker.status().ToString().c_str());
    return 2;
  }
  Status st = (*worker)->Handle(topic, [&s](const Delivery&) {
    s.handled.fetch_add(1, std::memory_order_relaxed);
    return Outcome::Success();
  });
  if (st.ok()) st = (*worker)->Start();
  if (!st.ok()) {
    std::fprintf(stderr, "worker: %s\n", st.ToString().c_str());
    return 2;
  }
  std::vector<std::thread> producers;
  for (uint32_t i = 0; i < o.producers; ++i) {
    producers.emplace_back([&] {
      if (client_mode) {
        ClientProducer(o, *producer_queue, topic, s);
      } else {
        PipelineProducer(o, topic, s);
      }
    });
  }

  SleepSeconds(o.warmup_seconds);
  const WorkerStats w0 = (*worker)->Stats();
  const uint64_t adds0 = s.answered.load();
  const double cpu0 = CpuSeconds();
  const auto t0 = SteadyClock::now();
  SleepSeconds(o.seconds);
  const WorkerStats w1 = (*worker)->Stats();
  const uint64_t adds1 = s.answered.load();
  const double cpu1 = CpuSeconds();
  const double wall = Since(t0);

  s.stop = true;
  for (std::thread& t : producers) t.join();
  const auto drain_end = SteadyClock::now() + std::chrono::duration<double>(o.drain_seconds);
  while ((*worker)->Stats().succeeded < s.answered.load() && SteadyClock::now() < drain_end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  (*worker)->Stop(5000);
  const WorkerStats end = (*worker)->Stats();
  const uint64_t left = s.answered.load() - std::min(s.answered.load(), end.succeeded);

  const uint64_t lifecycles = w1.succeeded - w0.succeeded;
  const uint64_t errors = s.add_errors.load() + end.errors;
  std::string first_error;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    first_error = !s.first_error.empty() ? s.first_error : end.last_error;
  }
  for (char& c : first_error) {
    if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  std::printf(
      "{\"bench\":\"remote-worker\",\"servers\":\"%s\",\"threads\":%u,\"producers\":%u,"
      "\"add_mode\":\"%s\",\"batch\":%u,\"window\":%llu,\"body_bytes\":%zu,\"seconds\":%.2f,"
      "\"warmup_s\":%.2f,\"lifecycles\":%llu,\"lifecycles_per_s\":%.0f,\"adds_per_s\":%.0f,"
      "\"client_cpu_s\":%.2f,\"reserves_per_job\":%.3f,\"touched\":%llu,\"errors\":%llu,"
      "\"first_error\":\"%s\",\"left_outstanding\":%llu}\n",
      o.servers.c_str(), o.threads, o.producers, o.add_mode.c_str(), client_mode ? 1 : o.batch,
      static_cast<unsigned long long>(o.window), o.body_bytes, wall, o.warmup_seconds,
      static_cast<unsigned long long>(lifecycles), static_cast<double>(lifecycles) / wall,
      static_cast<double>(adds1 - adds0) / wall, cpu1 - cpu0,
      lifecycles != 0
          ? static_cast<double>(w1.reserves - w0.reserves) / static_cast<double>(lifecycles)
          : 0.0,
      static_cast<unsigned long long>(end.touched), static_cast<unsigned long long>(errors),
      first_error.c_str(), static_cast<unsigned long long>(left));
  return errors != 0 || left != 0 ? 1 : 0;
}

}  // namespace delayq::bench
