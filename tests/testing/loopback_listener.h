// A listening TCP socket on 127.0.0.1 and a port the kernel picked, for
// tests that play a server (a fake one, or one that never answers).
#ifndef DELAYQ_TESTS_TESTING_LOOPBACK_LISTENER_H_
#define DELAYQ_TESTS_TESTING_LOOPBACK_LISTENER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace delayq::testing_net {

// The listening descriptor (close it when done), its port in *port; -1 if
// a call failed (errno says why).
inline int ListenOnLoopback(int* port, int backlog = 16) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

}  // namespace delayq::testing_net

#endif  // DELAYQ_TESTS_TESTING_LOOPBACK_LISTENER_H_
