#include "server/sockets.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>

namespace ditto {
namespace {

// Calls fn(fd, local_port, peer address, peer port) for each TCP socket of this process (peer
// address empty and port -1 for one that is not connected, e.g. listening) until fn returns true.
// cpp-httplib 0.11 does not expose its sockets, so they are found in /proc/self/fd.
void for_each_socket(const std::function<bool(int fd, int local_port, const std::string& peer, int peer_port)>& fn) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = std::atoi(e->d_name);
    if (fd == dirfd(dir)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0) continue;
    auto port_of = [](const sockaddr_storage& a) {
      return a.ss_family == AF_INET    ? ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port)
             : a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port)
                                       : -1;
    };
    if (port_of(local) < 0) continue;
    char addr[INET6_ADDRSTRLEN] = {};
    int peer_port = -1;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) == 0) {
      if (peer.ss_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&peer)->sin_addr, addr, sizeof addr);
      else if (peer.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&peer)->sin6_addr, addr, sizeof addr);
      peer_port = port_of(peer);
    }
    if (fn(fd, port_of(local), addr, peer_port)) break;
  }
  closedir(dir);
}

}  // namespace

// The file descriptor of the connection `req` came on, found by its (peer address, peer port,
// local port). The fd stays open while the handler runs (httplib closes it afterwards), even if
// the peer hangs up. -1 when not found.
int connection_fd(const std::string& remote_addr, int remote_port, int local_port) {
  int found = -1;
  for_each_socket([&](int fd, int port, const std::string& peer, int peer_port) {
    if (peer_port != remote_port || port != local_port || peer != remote_addr) return false;
    found = fd;
    return true;
  });
  return found;
}

// cpp-httplib 0.11 listens with a backlog of 5 (compiled into the library), so a burst of a few
// dozen connects overflows it and clients see resets. Linux lets listen() be called again on a
// listening socket to change its backlog: find ours by its local port and do that.
void widen_listen_backlog(int port, int backlog) {
  for_each_socket([&](int fd, int local_port, const std::string&, int) {
    int listening = 0;
    socklen_t len = sizeof listening;
    if (local_port == port && getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening)
      ::listen(fd, backlog);
    return false;
  });
}

void listening_socket_options(int fd) {
  int yes = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

std::string bind_failure(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) return gai_strerror(rc);
  std::string why;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    listening_socket_options(fd);
    const bool bound = ::bind(fd, a->ai_addr, a->ai_addrlen) == 0;
    why = bound ? "" : std::strerror(errno);
    ::close(fd);
    if (bound) break;
  }
  freeaddrinfo(found);
  return why;
}

// True when the peer of `fd` has hung up (or the socket failed). Pipelined data is left unread.
bool peer_closed(int fd) {
  if (fd < 0) return false;
  pollfd p{fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace ditto
