/*
 * lockstep: a load generator that behaves like an independent client (issue 14).
 *
 * One thread, one epoll set, many non-blocking TCP_NODELAY connections, each
 * with ONE command in flight: the next is written only once the reply to the
 * previous one has been read whole. Each connection loops add -> reserve ->
 * finish (beanstalkd: put -> reserve-with-timeout -> delete) on its own topic
 * (tube). No delayq code and nothing shared with the bench/ C++ sources: libc and Linux
 * epoll only, so the figures do not depend on delayq's own client code.
 *
 *   cc -O2 -std=c11 -o build/bin/lockstep bench/lockstep.c
 *   build/bin/lockstep --proto resp --port 7701 --connections 50 --seconds 10
 *
 * Prints one JSON object on stdout (see bench/README.md). Exit code 0; 1 when
 * the server answered errors, a connection closed, a reply was not the
 * protocol's, or a connection got no reply for 10 s (plus the reserve's own
 * wait); 2 for bad options.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* ---- options ---------------------------------------------------------------------------- */

enum proto { PROTO_RESP, PROTO_BEANSTALK };

static struct {
  enum proto proto;
  const char* host;
  int port;
  int connections;
  double seconds;
  double warmup_seconds;
  int body;
  int topics; /* 0: one per connection */
  const char* fsync_probe;
  int depth; /* commands of one kind written together per connection */
} opt = {PROTO_RESP, "127.0.0.1", 0, 50, 10, 1, 100, 0, NULL, 1};

static void usage(FILE* f) {
  fprintf(f,
          "usage: lockstep [--proto resp|beanstalk] [--host 127.0.0.1] [--port N]\n"
          "                [--connections 50] [--seconds 10] [--warmup-seconds 1] [--body 100]\n"
          "                [--topics N] [--depth 1] [--fsync-probe DIR]\n"
          "  Each connection loops add -> reserve -> finish on its own topic (--topics N:\n"
          "  connection i uses topic i mod N), one command in flight. One JSON object on stdout.\n"
          "  --depth N: N adds written together, then N reserves (COUNT 1), then a finish of\n"
          "  each job they got, each batch once all replies of the previous one are in\n"
          "  (a client library's pipeline, one stage at a time).\n"
          "  --port defaults to 7701 (resp) or 11300 (beanstalk).\n"
          "  --fsync-probe DIR: time 200 fdatasyncs of 3 KB writes in a file in DIR, before\n"
          "  and after the load (fdatasync_p50_us, fdatasync_p99_us).\n");
}

_Noreturn static void bad_option(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("lockstep: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  usage(stderr);
  exit(2);
}

static long parse_long(const char* name, const char* v, long lo, long hi) {
  char* end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi)
    bad_option("%s: expected an integer %ld..%ld, got '%s'", name, lo, hi, v);
  return x;
}

static double parse_double(const char* name, const char* v, double lo, double hi) {
  char* end;
  errno = 0;
  double x = strtod(v, &end);
  if (errno || end == v || *end || !(x >= lo && x <= hi))
    bad_option("%s: expected a number %g..%g, got '%s'", name, lo, hi, v);
  return x;
}

static void parse_options(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      exit(0);
    }
    if (strncmp(a, "--", 2)) bad_option("unexpected argument '%s'", a);
    char name[64];
    const char* v;
    const char* eq = strchr(a, '=');
    if (eq) {
      size_t n = (size_t)(eq - a);
      if (n >= sizeof name) bad_option("unknown option '%s'", a);
      memcpy(name, a, n);
      name[n] = 0;
      v = eq + 1;
    } else {
      if (strlen(a) >= sizeof name) bad_option("unknown option '%s'", a);
      strcpy(name, a);
      if (i + 1 >= argc) bad_option("%s needs a value", a);
      v = argv[++i];
    }
    if (!strcmp(name, "--proto")) {
      if (!strcmp(v, "resp"))
        opt.proto = PROTO_RESP;
      else if (!strcmp(v, "beanstalk"))
        opt.proto = PROTO_BEANSTALK;
      else
        bad_option("--proto: resp or beanstalk, got '%s'", v);
    } else if (!strcmp(name, "--host")) {
      opt.host = v;
    } else if (!strcmp(name, "--port")) {
      opt.port = (int)parse_long(name, v, 1, 65535);
    } else if (!strcmp(name, "--connections")) {
      opt.connections = (int)parse_long(name, v, 1, 100000);
    } else if (!strcmp(name, "--seconds")) {
      opt.seconds = parse_double(name, v, 0.001, 86400);
    } else if (!strcmp(name, "--warmup-seconds")) {
      opt.warmup_seconds = parse_double(name, v, 0, 86400);
    } else if (!strcmp(name, "--body")) {
      opt.body = (int)parse_long(name, v, 1, 16 << 20);
    } else if (!strcmp(name, "--topics")) {
      opt.topics = (int)parse_long(name, v, 0, 100000);
    } else if (!strcmp(name, "--depth")) {
      opt.depth = (int)parse_long(name, v, 1, 256);
    } else if (!strcmp(name, "--fsync-probe")) {
      opt.fsync_probe = v;
    } else {
      bad_option("unknown option '%s'", name);
    }
  }
  if (!opt.port) opt.port = opt.proto == PROTO_RESP ? 7701 : 11300;
  if (opt.topics == 0 || opt.topics > opt.connections) opt.topics = opt.connections;
}

/* ---- time, failure ---------------------------------------------------------------------- */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

_Noreturn static void die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("lockstep: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

/* ---- latency histogram: log-linear, 64 sub-buckets per power of two (<= 1.6 % off), ns -- */

#define SUB_BITS 6
#define SUB (1u << SUB_BITS)
#define MAX_SHIFT 40 /* values up to 2^46 ns, ~19 h */
#define NBUCKETS (2 * SUB + MAX_SHIFT * SUB)

struct hist {
  uint64_t count;
  uint64_t b[NBUCKETS];
};

static unsigned bucket_of(uint64_t v) {
  if (v < 2 * SUB) return (unsigned)v;
  unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= SUB_BITS + 1 */
  unsigned shift = e - SUB_BITS;
  if (shift > MAX_SHIFT) return NBUCKETS - 1;
  return 2 * SUB + (shift - 1) * SUB + (unsigned)((v >> shift) - SUB);
}

/* The middle of bucket i, ns. */
static double bucket_value(unsigned i) {
  if (i < 2 * SUB) return i;
  unsigned shift = (i - 2 * SUB) / SUB + 1;
  uint64_t m = (i - 2 * SUB) % SUB + SUB;
  return (double)(m << shift) + (double)(1ull << shift) / 2;
}

static void hist_add(struct hist* h, uint64_t v) {
  h->b[bucket_of(v)]++;
  h->count++;
}

/* The p-quantile (0 < p <= 1, nearest rank), microseconds; -1 when empty. */
static double hist_us(const struct hist* h, double p) {
  if (!h->count) return -1;
  uint64_t rank = (uint64_t)(p * (double)h->count + 0.999999);
  if (rank < 1) rank = 1;
  uint64_t seen = 0;
  for (unsigned i = 0; i < NBUCKETS; i++) {
    seen += h->b[i];
    if (seen >= rank) return bucket_value(i) / 1000.0;
  }
  return bucket_value(NBUCKETS - 1) / 1000.0;
}

/* ---- connections -------------------------------------------------------------------------- */

enum kind { K_ADD, K_RESERVE, K_FINISH, K_SETUP };
static const char* kind_name[] = {"add", "reserve", "finish", "setup"};

#define MAX_TOKEN 256 /* ids and receipts */

struct conn {
  int fd, index;
  enum kind kind; /* of the commands in flight */
  int setup_step; /* beanstalk: use, watch, ignore */
  int in_flight;  /* replies still to come of the batch written */
  int held;       /* jobs the reserves of this round got: ids[0..held) */
  uint64_t sent_ns;
  char* rbuf;
  size_t rlen, rcap;
  char* wbuf;
  size_t wlen, woff, wcap;
  int want_out;
  char topic[64];
  size_t topic_len;
  char (*id)[MAX_TOKEN], (*receipt)[MAX_TOKEN]; /* [depth] */
  size_t *id_len, *receipt_len;
};

static int epfd;
static char* body;
static struct hist lat[3], lat_all;
static uint64_t t_warm, t_end;
static uint64_t cycles, replies, errors, empty_reserves;
static char first_error[512];

static void count_error(struct conn* c, const char* text, size_t len) {
  errors++;
  if (!first_error[0]) {
    while (len && (text[len - 1] == '\r' || text[len - 1] == '\n')) len--;
    if (len > sizeof first_error - 1) len = sizeof first_error - 1;
    memcpy(first_error, text, len);
    first_error[len] = 0;
    fprintf(stderr, "lockstep: connection %d, %s: server error: %s\n", c->index, kind_name[c->kind],
            first_error);
  }
}

static void wput(struct conn* c, const void* p, size_t n) {
  memcpy(c->wbuf + c->wlen, p, n); /* wcap covers the largest request */
  c->wlen += n;
}
static void wstr(struct conn* c, const char* s) { wput(c, s, strlen(s)); }
static void wnum(struct conn* c, unsigned long long x) {
  char t[24];
  int n = snprintf(t, sizeof t, "%llu", x);
  wput(c, t, (size_t)n);
}
/* A RESP bulk string. */
static void wbulk(struct conn* c, const char* p, size_t n) {
  wstr(c, "$");
  wnum(c, n);
  wstr(c, "\r\n");
  wput(c, p, n);
  wstr(c, "\r\n");
}

static void set_events(struct conn* c, int out) {
  if (c->want_out == out) return;
  struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c};
  if (epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev)) die("epoll_ctl: %s", strerror(errno));
  c->want_out = out;
}

static void flush(struct conn* c) {
  while (c->woff < c->wlen) {
    ssize_t n = write(c->fd, c->wbuf + c->woff, c->wlen - c->woff);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        set_events(c, 1);
        return;
      }
      die("connection %d: write: %s", c->index, strerror(errno));
    }
    c->woff += (size_t)n;
  }
  set_events(c, 0);
}

/* Writes one command of kind c->kind (c->setup_step); `i`: the job, for a finish. */
static void write_command(struct conn* c, int i) {
  if (opt.proto == PROTO_RESP) {
    switch (c->kind) {
      case K_ADD:
        wstr(c, "*6\r\n$3\r\nADD\r\n");
        wbulk(c, c->topic, c->topic_len);
        wstr(c, "$1\r\n*\r\n$1\r\n0\r\n$5\r\n60000\r\n");
        wbulk(c, body, (size_t)opt.body);
        break;
      case K_RESERVE:
        wstr(c,
             "*7\r\n$7\r\nRESERVE\r\n$7\r\nTIMEOUT\r\n$4\r\n1000\r\n$5\r\nCOUNT\r\n$1\r\n1\r\n"
             "$4\r\nFROM\r\n");
        wbulk(c, c->topic, c->topic_len);
        break;
      case K_FINISH:
        wstr(c, "*3\r\n$6\r\nFINISH\r\n");
        wbulk(c, c->id[i], c->id_len[i]);
        wbulk(c, c->receipt[i], c->receipt_len[i]);
        break;
      case K_SETUP:
        break;
    }
  } else {
    switch (c->kind) {
      case K_SETUP:
        wstr(c, c->setup_step == 0 ? "use " : c->setup_step == 1 ? "watch " : "ignore default");
        if (c->setup_step < 2) wput(c, c->topic, c->topic_len);
        wstr(c, "\r\n");
        break;
      case K_ADD:
        wstr(c, "put 1024 0 60 ");
        wnum(c, (unsigned long long)opt.body);
        wstr(c, "\r\n");
        wput(c, body, (size_t)opt.body);
        wstr(c, "\r\n");
        break;
      case K_RESERVE:
        wstr(c, "reserve-with-timeout 1\r\n");
        break;
      case K_FINISH:
        wstr(c, "delete ");
        wput(c, c->id[i], c->id_len[i]);
        wstr(c, "\r\n");
        break;
    }
  }
}

/* Writes the next batch of kind c->kind, timed from now: one setup command; --depth adds
   or reserves; a finish of each job the reserves got. */
static void send_next(struct conn* c, uint64_t now) {
  c->wlen = c->woff = 0;
  int n = c->kind == K_SETUP ? 1 : c->kind == K_FINISH ? c->held : opt.depth;
  for (int i = 0; i < n; i++) write_command(c, i);
  if (c->kind == K_RESERVE) c->held = 0;
  c->sent_ns = now;
  c->in_flight = n;
  flush(c);
}

/* The batch after one whose replies are all in. */
static enum kind next_kind(const struct conn* c) {
  switch (c->kind) {
    case K_SETUP:
      return c->setup_step == 3 ? K_ADD : K_SETUP;
    case K_ADD:
      return K_RESERVE;
    case K_RESERVE:
      return c->held > 0 ? K_FINISH : K_ADD;
    case K_FINISH:
      break;
  }
  return K_ADD;
}

/* ---- reply parsers: 1 a whole reply (*used set), 0 not yet, -1 not the protocol's -------- */

/* The end of the line starting at pos: the index of its '\r', or -1 when no CRLF yet. */
static long line_end(const char* b, size_t n, size_t pos) {
  for (size_t i = pos; i + 1 < n; i++) {
    const char* r = memchr(b + i, '\r', n - 1 - i);
    if (!r) return -1;
    i = (size_t)(r - b);
    if (b[i + 1] == '\n') return (long)i;
  }
  return -1;
}

static int parse_int(const char* p, const char* e, long long* out) {
  int neg = 0;
  long long x = 0;
  if (p < e && *p == '-') neg = 1, p++;
  if (p == e || e - p > 18) return -1;
  for (; p < e; p++) {
    if (*p < '0' || *p > '9') return -1;
    x = x * 10 + (*p - '0');
  }
  *out = neg ? -x : x;
  return 0;
}

struct resp_reply {
  char type;        /* of the top-level value */
  long long n;      /* array length, -1 null */
  const char* text; /* a top-level line's text (+, -, :) */
  size_t text_len;
  const char* job[2]; /* the first job's id and receipt (elements 0 and 3) */
  size_t job_len[2];
};

/* One value at *pos; path: i0 = index in the top array, i1 = in the job array. */
static int resp_value(const char* b, size_t n, size_t* pos, int depth, long long i0, long long i1,
                      struct resp_reply* r) {
  if (depth > 8) return -1;
  if (*pos >= n) return 0;
  char t = b[*pos];
  long e = line_end(b, n, *pos);
  if (e < 0) return n - *pos > 4096 ? -1 : 0;
  const char *p = b + *pos + 1, *pe = b + e;
  size_t next = (size_t)e + 2;
  const char* val = NULL;
  size_t vlen = 0;
  long long len;
  switch (t) {
    case '+':
    case '-':
    case ':':
    case ',':
    case '#':
    case '(':
      val = p, vlen = (size_t)(pe - p);
      *pos = next;
      break;
    case '_':
      *pos = next;
      break;
    case '$':
      if (parse_int(p, pe, &len) || len < -1) return -1;
      if (len >= 0) {
        if (n < next + (size_t)len + 2) return 0;
        if (b[next + len] != '\r' || b[next + len + 1] != '\n') return -1;
        val = b + next, vlen = (size_t)len;
        next += (size_t)len + 2;
      }
      *pos = next;
      break;
    case '*':
      if (parse_int(p, pe, &len) || len < -1) return -1;
      *pos = next;
      if (depth == 0) r->n = len;
      for (long long i = 0; i < len; i++) {
        int rc = resp_value(b, n, pos, depth + 1, depth == 0 ? i : i0, depth == 1 ? i : -1, r);
        if (rc <= 0) return rc;
      }
      break;
    default:
      return -1;
  }
  if (depth == 0) {
    r->type = t;
    r->text = val, r->text_len = vlen;
  } else if (depth == 2 && i0 == 0 && (i1 == 0 || i1 == 3) && val) {
    r->job[i1 == 3] = val, r->job_len[i1 == 3] = vlen;
  }
  return 1;
}

static void take(char* dst, size_t* dst_len, const char* src, size_t n, struct conn* c) {
  if (n > MAX_TOKEN) die("connection %d: an id or receipt of %zu bytes", c->index, n);
  memcpy(dst, src, n);
  *dst_len = n;
}

/* Handles a RESP reply; returns the bytes it took (0: not whole yet). */
static size_t resp_reply(struct conn* c) {
  struct resp_reply r = {0};
  r.n = -2;
  size_t pos = 0;
  int rc = resp_value(c->rbuf, c->rlen, &pos, 0, -1, -1, &r);
  if (rc < 0)
    die("connection %d: %s reply is not RESP: '%.80s'", c->index, kind_name[c->kind], c->rbuf);
  if (rc == 0) return 0;
  if (r.type == '-') {
    count_error(c, r.text - 1, r.text_len + 1);
    return pos;
  }
  switch (c->kind) {
    case K_ADD:
      if (r.type != '$' || !r.text) goto unexpected;
      break;
    case K_RESERVE:
      if (r.type == '_' || (r.type == '*' && r.n <= 0)) {
        empty_reserves++;
        break;
      }
      if (r.type != '*' || !r.job[0] || !r.job[1]) goto unexpected;
      take(c->id[c->held], &c->id_len[c->held], r.job[0], r.job_len[0], c);
      take(c->receipt[c->held], &c->receipt_len[c->held], r.job[1], r.job_len[1], c);
      c->held++;
      break;
    case K_FINISH:
      if (r.type != '+') goto unexpected;
      break;
    case K_SETUP:
      goto unexpected;
  }
  return pos;
unexpected:
  die("connection %d: unexpected reply to %s: '%.*s'", c->index, kind_name[c->kind], (int)pos,
      c->rbuf);
}

static int starts(const char* p, size_t n, const char* s) {
  size_t k = strlen(s);
  return n >= k && !memcmp(p, s, k);
}

/* Handles a beanstalkd reply; returns the bytes it took (0: not whole yet). */
static size_t beanstalk_reply(struct conn* c) {
  long e = line_end(c->rbuf, c->rlen, 0);
  if (e < 0) {
    if (c->rlen > 4096) die("connection %d: a reply line of over 4096 bytes", c->index);
    return 0;
  }
  const char* l = c->rbuf;
  size_t n = (size_t)e, used = n + 2;
  switch (c->kind) {
    case K_SETUP:
      if (!(c->setup_step == 0 ? starts(l, n, "USING ") : starts(l, n, "WATCHING ")))
        die("connection %d: setup step %d answered '%.*s'", c->index, c->setup_step, (int)n, l);
      ++c->setup_step;
      return used;
    case K_ADD:
      if (!starts(l, n, "INSERTED ")) break;
      return used;
    case K_RESERVE:
      if (starts(l, n, "TIMED_OUT") || starts(l, n, "DEADLINE_SOON")) {
        empty_reserves++;
        return used;
      }
      if (!starts(l, n, "RESERVED ")) break;
      {
        const char *id = l + 9, *sp = memchr(id, ' ', n - 9);
        long long bytes;
        if (!sp || sp == id || parse_int(sp + 1, l + n, &bytes) || bytes < 0)
          die("connection %d: bad reply '%.*s'", c->index, (int)n, l);
        if (c->rlen < used + (size_t)bytes + 2) {
          if (used + (size_t)bytes + 2 > c->rcap)
            die("connection %d: a job of %lld bytes does not fit the buffer", c->index, bytes);
          return 0;
        }
        if (c->rbuf[used + bytes] != '\r' || c->rbuf[used + bytes + 1] != '\n')
          die("connection %d: RESERVED data not ended by CRLF", c->index);
        take(c->id[c->held], &c->id_len[c->held], id, (size_t)(sp - id), c);
        c->held++;
        return used + (size_t)bytes + 2;
      }
    case K_FINISH:
      if (!starts(l, n, "DELETED")) break;
      return used;
  }
  count_error(c, l, n); /* NOT_FOUND, BURIED, OUT_OF_MEMORY, BAD_FORMAT, ... */
  return used;
}

/* Reads what the socket has; for a whole reply, counts it and writes the next command. */
static void on_readable(struct conn* c) {
  if (c->rlen == c->rcap) die("connection %d: a reply larger than %zu bytes", c->index, c->rcap);
  ssize_t n = read(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return;
    die("connection %d: read: %s", c->index, strerror(errno));
  }
  if (n == 0) die("connection %d: closed by the server", c->index);
  uint64_t now = now_ns(); /* one clock read per read(2) */
  c->rlen += (size_t)n;
  if (!c->in_flight) die("connection %d: %zd bytes nobody asked for", c->index, n);
  enum kind k = c->kind;
  size_t off = 0;
  while (c->in_flight > 0 && off < c->rlen) {
    /* The parsers read from the front of rbuf: shift what is left there. */
    if (off) {
      memmove(c->rbuf, c->rbuf + off, c->rlen - off);
      c->rlen -= off;
      off = 0;
    }
    uint64_t errors0 = errors;
    size_t used = opt.proto == PROTO_RESP ? resp_reply(c) : beanstalk_reply(c);
    if (!used) break;
    off = used;
    c->in_flight--;
    if (k != K_SETUP && now >= t_warm && now < t_end) {
      uint64_t d = now - c->sent_ns;
      hist_add(&lat[k], d);
      hist_add(&lat_all, d);
      replies++;
      if (k == K_FINISH && errors == errors0) cycles++;
    }
  }
  if (off) {
    memmove(c->rbuf, c->rbuf + off, c->rlen - off);
    c->rlen -= off;
  }
  if (c->in_flight > 0) return;
  if (c->rlen) die("connection %d: more replies than commands", c->index);
  c->kind = next_kind(c);
  if (now < t_end) send_next(c, now);
}

static int connect_to(const struct sockaddr* sa, socklen_t len) {
  int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket: %s", strerror(errno));
  int one = 1;
  if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one))
    die("TCP_NODELAY: %s", strerror(errno));
  if (connect(fd, sa, len)) die("connect to %s:%d: %s", opt.host, opt.port, strerror(errno));
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)) die("O_NONBLOCK: %s", strerror(errno));
  return fd;
}

/* ---- fsync probe -------------------------------------------------------------------------- */

#define PROBE_SYNCS 200
#define PROBE_WRITE 3072
#define PROBE_FILE (1 << 20)

static uint64_t probe_ns[2 * PROBE_SYNCS];
static int probe_n;

/* In a new file in dir: 1 MiB written and synced, then PROBE_SYNCS times a 3 KB
 * pwrite at the next offset + fdatasync, each fdatasync timed. */
static void fsync_probe(const char* dir) {
  char path[4096];
  if (snprintf(path, sizeof path, "%s/lockstep-fsync-probe.XXXXXX", dir) >= (int)sizeof path)
    die("--fsync-probe: path too long");
  int fd = mkstemp(path);
  if (fd < 0) die("--fsync-probe: cannot create a file in %s: %s", dir, strerror(errno));
  static char buf[65536];
  memset(buf, 0, sizeof buf);
  for (off_t off = 0; off < PROBE_FILE; off += (off_t)sizeof buf)
    if (pwrite(fd, buf, sizeof buf, off) != (ssize_t)sizeof buf)
      die("--fsync-probe: write %s: %s", path, strerror(errno));
  if (fsync(fd)) die("--fsync-probe: fsync %s: %s", path, strerror(errno));
  memset(buf, 'p', PROBE_WRITE);
  for (int i = 0; i < PROBE_SYNCS; i++) {
    buf[0] = (char)i;
    if (pwrite(fd, buf, PROBE_WRITE, (off_t)i * PROBE_WRITE) != PROBE_WRITE)
      die("--fsync-probe: write %s: %s", path, strerror(errno));
    uint64_t t0 = now_ns();
    if (fdatasync(fd)) die("--fsync-probe: fdatasync %s: %s", path, strerror(errno));
    probe_ns[probe_n++] = now_ns() - t0;
  }
  close(fd);
  unlink(path);
}

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

static double probe_us(double p) {
  size_t rank = (size_t)(p * probe_n + 0.999999);
  if (rank < 1) rank = 1;
  return probe_ns[rank - 1] / 1000.0;
}

/* ---- main --------------------------------------------------------------------------------- */

static void json_str(const char* s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\')
      printf("\\%c", ch);
    else if (ch < 0x20)
      printf("\\u%04x", ch);
    else
      putchar(ch);
  }
  putchar('"');
}

static void json_us(const char* name, double us) {
  if (us < 0)
    printf(",\"%s\":null", name);
  else
    printf(",\"%s\":%.1f", name, us);
}

int main(int argc, char** argv) {
  parse_options(argc, argv);
  signal(SIGPIPE, SIG_IGN);

  if (opt.fsync_probe) fsync_probe(opt.fsync_probe);

  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
  char port[16];
  snprintf(port, sizeof port, "%d", opt.port);
  int gai = getaddrinfo(opt.host, port, &hints, &ai);
  if (gai) die("%s: %s", opt.host, gai_strerror(gai));

  body = malloc((size_t)opt.body);
  if (!body) die("out of memory");
  for (int i = 0; i < opt.body; i++) body[i] = (char)('a' + i % 26);

  epfd = epoll_create1(EPOLL_CLOEXEC);
  if (epfd < 0) die("epoll_create1: %s", strerror(errno));
  int nc = opt.connections;
  struct conn* conns = calloc((size_t)nc, sizeof *conns);
  if (!conns) die("out of memory");
  size_t rcap = ((size_t)opt.body + 8192) * (size_t)opt.depth;
  if (rcap < 65536) rcap = 65536;
  size_t wcap = ((size_t)opt.body + 1024) * (size_t)opt.depth;
  for (int i = 0; i < nc; i++) {
    struct conn* c = &conns[i];
    c->index = i;
    c->fd = connect_to(ai->ai_addr, ai->ai_addrlen);
    c->rbuf = malloc(rcap), c->rcap = rcap;
    c->wbuf = malloc(wcap), c->wcap = wcap;
    c->id = calloc((size_t)opt.depth, sizeof *c->id);
    c->receipt = calloc((size_t)opt.depth, sizeof *c->receipt);
    c->id_len = calloc((size_t)opt.depth, sizeof *c->id_len);
    c->receipt_len = calloc((size_t)opt.depth, sizeof *c->receipt_len);
    if (!c->rbuf || !c->wbuf || !c->id || !c->receipt || !c->id_len || !c->receipt_len)
      die("out of memory");
    /* Topic names valid for both servers; the pid keeps runs apart. */
    c->topic_len =
        (size_t)snprintf(c->topic, sizeof c->topic, "lockstep%d-%d", (int)getpid(), i % opt.topics);
    c->want_out = -1;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev)) die("epoll_ctl: %s", strerror(errno));
    c->want_out = 0;
  }
  freeaddrinfo(ai);

  uint64_t t0 = now_ns();
  t_warm = t0 + (uint64_t)(opt.warmup_seconds * 1e9);
  t_end = t_warm + (uint64_t)(opt.seconds * 1e9);
  for (int i = 0; i < nc; i++) {
    conns[i].kind = opt.proto == PROTO_BEANSTALK ? K_SETUP : K_ADD;
    send_next(&conns[i], t0);
  }

  /* A command without a reply for this long ends the run (plus the reserve's own wait). */
  const uint64_t stall_ns = 10000000000ull, reserve_wait_ns = 1000000000ull;
  double cpu0 = opt.warmup_seconds > 0 ? -1 : cpu_s();
  uint64_t last_scan = t0;
  struct epoll_event evs[256];
  for (;;) {
    uint64_t now = now_ns();
    if (cpu0 < 0 && now >= t_warm) cpu0 = cpu_s();
    if (now >= t_end) break;
    if (now - last_scan >= 100000000ull) {
      last_scan = now;
      for (int i = 0; i < nc; i++) {
        struct conn* c = &conns[i];
        uint64_t limit = stall_ns + (c->kind == K_RESERVE ? reserve_wait_ns : 0);
        if (c->in_flight && now - c->sent_ns > limit)
          die("connection %d: no reply to %s for %.1f s", i, kind_name[c->kind],
              (now - c->sent_ns) / 1e9);
      }
    }
    uint64_t left_ms = (t_end - now) / 1000000 + 1;
    if (now < t_warm && (t_warm - now) / 1000000 + 1 < left_ms)
      left_ms = (t_warm - now) / 1000000 + 1;
    int timeout = left_ms < 100 ? (int)left_ms : 100;
    int n = epoll_wait(epfd, evs, (int)(sizeof evs / sizeof evs[0]), timeout);
    if (n < 0) {
      if (errno == EINTR) continue;
      die("epoll_wait: %s", strerror(errno));
    }
    for (int i = 0; i < n; i++) {
      struct conn* c = evs[i].data.ptr;
      if (evs[i].events & EPOLLOUT) flush(c);
      if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) on_readable(c);
    }
  }
  double cpu = cpu_s() - (cpu0 < 0 ? cpu_s() : cpu0);
  for (int i = 0; i < nc; i++) close(conns[i].fd);

  if (opt.fsync_probe) {
    fsync_probe(opt.fsync_probe);
    qsort(probe_ns, (size_t)probe_n, sizeof probe_ns[0], cmp_u64);
  }

  double s = opt.seconds;
  printf(
      "{\"proto\":\"%s\",\"connections\":%d,\"depth\":%d,\"topics\":%d,\"body\":%d,"
      "\"seconds\":%g",
      opt.proto == PROTO_RESP ? "resp" : "beanstalk", nc, opt.depth, opt.topics, opt.body, s);
  printf(",\"cycles\":%llu,\"cycles_per_s\":%.1f,\"commands_per_s\":%.1f",
         (unsigned long long)cycles, cycles / s, replies / s);
  json_us("add_p50_us", hist_us(&lat[K_ADD], 0.50));
  json_us("add_p99_us", hist_us(&lat[K_ADD], 0.99));
  json_us("reserve_p50_us", hist_us(&lat[K_RESERVE], 0.50));
  json_us("reserve_p99_us", hist_us(&lat[K_RESERVE], 0.99));
  json_us("finish_p50_us", hist_us(&lat[K_FINISH], 0.50));
  json_us("finish_p99_us", hist_us(&lat[K_FINISH], 0.99));
  json_us("command_p50_us", hist_us(&lat_all, 0.50));
  json_us("command_p99_us", hist_us(&lat_all, 0.99));
  printf(",\"empty_reserves\":%llu,\"errors\":%llu,\"first_error\":",
         (unsigned long long)empty_reserves, (unsigned long long)errors);
  if (first_error[0])
    json_str(first_error);
  else
    printf("null");
  printf(",\"client_cpu_s\":%.2f", cpu);
  if (opt.fsync_probe) {
    json_us("fdatasync_p50_us", probe_us(0.50));
    json_us("fdatasync_p99_us", probe_us(0.99));
    printf(",\"fdatasync_samples\":%d", probe_n);
  }
  printf("}\n");
  fflush(stdout);
  return errors ? 1 : 0;
}
