// `delayq`: the server and (later) the client command line.
//
//   delayq serve [options]      every option also reads DELAYQ_<NAME>
#include <pthread.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "delayq/queue.h"
#include "net/event_loop.h"
#include "server/resp_server.h"

namespace {

struct ServeOptions {
  std::string store = "memory";
  std::string resp_host = "127.0.0.1";
  int resp_port = 7701;
  std::string auth_token;
  size_t max_body = delayq::kDefaultMaxBodyBytes;
  size_t max_connections = 10'000;
};

int Serve(const ServeOptions& o) {
  // SIGTERM / SIGINT arrive as readable data on a signalfd in the loop. They
  // are blocked before any thread starts, so every thread inherits the mask.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  signal(SIGPIPE, SIG_IGN);

  delayq::QueueOptions qo;
  qo.store = o.store;
  qo.limits.max_body_bytes = o.max_body;
  auto queue = delayq::OpenQueue(qo);
  if (!queue.ok()) {
    std::fprintf(stderr, "delayq: %s\n", queue.status().ToString().c_str());
    return 1;
  }
  auto loop = delayq::net::EventLoop::Create();
  if (!loop.ok()) {
    std::fprintf(stderr, "delayq: %s\n", loop.status().ToString().c_str());
    return 1;
  }
  delayq::server::RespServerOptions ro;
  ro.host = o.resp_host;
  ro.port = o.resp_port;
  ro.auth_token = o.auth_token;
  ro.max_connections = o.max_connections;
  ro.parser.max_bulk_bytes = o.max_body + 1024;
  auto resp = delayq::server::RespServer::Create(loop->get(), queue->get(), ro);
  if (!resp.ok()) {
    std::fprintf(stderr, "delayq: %s\n", resp.status().ToString().c_str());
    return 1;
  }

  int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  delayq::net::EventLoop* l = loop->get();
  (void)l->Add(sfd, 0x001 /* EPOLLIN */, [l](uint32_t) { l->Stop(); });

  std::fprintf(stderr, "delayq: serving RESP on %s:%d (store %s)\n", o.resp_host.c_str(),
               (*resp)->port(), o.store.c_str());
  std::fflush(stderr);
  (*loop)->Run();
  std::fprintf(stderr, "delayq: stopping\n");
  resp->reset();   // closes connections, withdraws waiting reserves
  queue->reset();  // answers anything still waiting
  l->Remove(sfd);
  close(sfd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"delayq: a delay queue server"};
  app.require_subcommand(1);
  ServeOptions o;
  CLI::App* serve = app.add_subcommand("serve", "run the server");
  serve->add_option("--store", o.store, "where jobs live: memory")
      ->envname("DELAYQ_STORE")
      ->capture_default_str();
  serve->add_option("--resp-host", o.resp_host, "address the Redis protocol listens on")
      ->envname("DELAYQ_RESP_HOST")
      ->capture_default_str();
  serve->add_option("--resp-port", o.resp_port, "port of the Redis protocol (0: any free port)")
      ->envname("DELAYQ_RESP_PORT")
      ->capture_default_str();
  serve->add_option("--auth-token", o.auth_token, "clients must AUTH with this token")
      ->envname("DELAYQ_AUTH_TOKEN");
  serve->add_option("--max-body", o.max_body, "largest job body, bytes")
      ->envname("DELAYQ_MAX_BODY")
      ->capture_default_str();
  serve->add_option("--max-connections", o.max_connections, "connections at most")
      ->envname("DELAYQ_MAX_CONNECTIONS")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (serve->parsed()) return Serve(o);
  return 2;
}
