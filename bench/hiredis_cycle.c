/* hiredis_cycle: add -> reserve -> finish cycles against delayq's Redis protocol through
 * hiredis, the plain C Redis client library (Debian's libhiredis-dev), as an application
 * would use it: one blocking redisContext per connection, commands queued with
 * redisAppendCommand and their replies read with redisGetReply (hiredis's pipelining).
 *
 * One thread drives every connection in stages: for each connection it queues --depth
 * ADDs, then sends every connection's (redisBufferWrite) and reads their replies; then --depth
 * RESERVE COUNT 1 the same way; then a FINISH of each job reserved. So the server sees
 * all connections' batches at once, like many application threads each with a
 * pipeline. Nothing here is delayq's code. Prints one JSON object.
 *
 *   cc -O2 -o build/bin/hiredis_cycle bench/hiredis_cycle.c -lhiredis
 *   build/bin/hiredis_cycle --port 7701 --connections 50 --depth 16 --seconds 10
 */
#define _GNU_SOURCE
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define MAX_DEPTH 256

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
         ru.ru_stime.tv_usec / 1e6;
}

static void die(const char* what, redisContext* c) {
  fprintf(stderr, "hiredis_cycle: %s: %s\n", what, c ? c->errstr : "");
  exit(1);
}

struct conn {
  redisContext* ctx;
  char topic[64];
  int held;
  char *id[MAX_DEPTH], *receipt[MAX_DEPTH];
};

static unsigned long long errors;
static char first_error[256];

static void note_error(const redisReply* r) {
  if (!errors++) snprintf(first_error, sizeof first_error, "%s", r->str);
}

/* Sends what every connection has queued (redisGetReply would send a
   connection's own only when its replies are read, one connection at a time). */
static void send_all(struct conn* cs, int n) {
  for (int i = 0; i < n; i++) {
    int done = 0;
    while (!done) {
      if (redisBufferWrite(cs[i].ctx, &done) != REDIS_OK) die("write", cs[i].ctx);
    }
  }
}

/* Reads one reply of c; counts an error reply. */
static redisReply* reply(struct conn* c) {
  void* r = NULL;
  if (redisGetReply(c->ctx, &r) != REDIS_OK || !r) die("reply", c->ctx);
  redisReply* rr = r;
  if (rr->type == REDIS_REPLY_ERROR) note_error(rr);
  return rr;
}

int main(int argc, char** argv) {
  const char* host = "127.0.0.1";
  int port = 7701, conns = 50, depth = 16, body_len = 100;
  double seconds = 10, warmup = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--host"))
      host = argv[i + 1];
    else if (!strcmp(argv[i], "--port"))
      port = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--connections"))
      conns = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--depth"))
      depth = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--body"))
      body_len = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seconds"))
      seconds = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--warmup-seconds"))
      warmup = atof(argv[i + 1]);
    else {
      fprintf(stderr, "hiredis_cycle: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (argc % 2 == 0 || conns < 1 || depth < 1 || depth > MAX_DEPTH || body_len < 1 || port < 1 ||
      seconds <= 0 || warmup < 0) {
    fprintf(stderr,
            "usage: hiredis_cycle [--host H] [--port 7701] [--connections 50] [--depth 16] "
            "[--body 100] [--seconds 10] [--warmup-seconds 1]\n");
    return 2;
  }
  char* body = malloc((size_t)body_len);
  for (int i = 0; i < body_len; i++) body[i] = (char)('a' + i % 26);
  struct conn* cs = calloc((size_t)conns, sizeof *cs);
  for (int i = 0; i < conns; i++) {
    cs[i].ctx = redisConnect(host, port);
    if (!cs[i].ctx || cs[i].ctx->err) die("connect", cs[i].ctx);
    snprintf(cs[i].topic, sizeof cs[i].topic, "hiredis%d-%d", (int)getpid(), i);
  }

  double t0 = now_s(), t_warm = t0 + warmup, t_end = t_warm + seconds, cpu0 = -1;
  unsigned long long cycles = 0, commands = 0, empty = 0;
  for (;;) {
    double t = now_s();
    if (cpu0 < 0 && t >= t_warm) cpu0 = cpu_s();
    if (t >= t_end) break;
    int counting = t >= t_warm;
    /* Adds. */
    for (int i = 0; i < conns; i++) {
      for (int k = 0; k < depth; k++) {
        redisAppendCommand(cs[i].ctx, "ADD %s * 0 60000 %b", cs[i].topic, body, (size_t)body_len);
      }
    }
    send_all(cs, conns);
    for (int i = 0; i < conns; i++) {
      for (int k = 0; k < depth; k++) freeReplyObject(reply(&cs[i]));
    }
    /* Reserves, one job each. */
    for (int i = 0; i < conns; i++) {
      for (int k = 0; k < depth; k++) {
        redisAppendCommand(cs[i].ctx, "RESERVE TIMEOUT 1000 COUNT 1 FROM %s", cs[i].topic);
      }
    }
    send_all(cs, conns);
    for (int i = 0; i < conns; i++) {
      struct conn* c = &cs[i];
      c->held = 0;
      for (int k = 0; k < depth; k++) {
        redisReply* r = reply(c);
        if (r->type == REDIS_REPLY_ARRAY && r->elements > 0 &&
            r->element[0]->type == REDIS_REPLY_ARRAY && r->element[0]->elements >= 4) {
          redisReply* job = r->element[0];
          c->id[c->held] = strdup(job->element[0]->str);
          c->receipt[c->held] = strdup(job->element[3]->str);
          c->held++;
        } else if (r->type != REDIS_REPLY_ERROR) {
          empty++;
        }
        freeReplyObject(r);
      }
    }
    /* Finishes of what was reserved. */
    for (int i = 0; i < conns; i++) {
      for (int k = 0; k < cs[i].held; k++) {
        redisAppendCommand(cs[i].ctx, "FINISH %s %s", cs[i].id[k], cs[i].receipt[k]);
      }
    }
    send_all(cs, conns);
    unsigned long long done = 0;
    for (int i = 0; i < conns; i++) {
      for (int k = 0; k < cs[i].held; k++) {
        redisReply* r = reply(&cs[i]);
        if (r->type == REDIS_REPLY_STATUS) done++;
        freeReplyObject(r);
        free(cs[i].id[k]);
        free(cs[i].receipt[k]);
      }
    }
    if (counting) {
      cycles += done;
      commands += (unsigned long long)conns * depth * 2 + done;
    }
  }
  double cpu = cpu_s() - cpu0;
  printf(
      "{\"client\":\"hiredis\",\"connections\":%d,\"depth\":%d,\"body\":%d,\"seconds\":%g,"
      "\"cycles\":%llu,\"cycles_per_s\":%.1f,\"commands_per_s\":%.1f,\"empty_reserves\":%llu,"
      "\"errors\":%llu,\"first_error\":",
      conns, depth, body_len, seconds, cycles, cycles / seconds, commands / seconds, empty, errors);
  if (errors) {
    putchar('"');
    for (const char* p = first_error; *p; p++) {
      if (*p == '"' || *p == '\\') putchar('\\');
      if ((unsigned char)*p >= 0x20) putchar(*p);
    }
    putchar('"');
  } else {
    printf("null");
  }
  printf(",\"client_cpu_s\":%.2f}\n", cpu);
  for (int i = 0; i < conns; i++) redisFree(cs[i].ctx);
  return errors ? 1 : 0;
}
