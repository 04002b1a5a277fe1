// The server's own sockets, found in /proc/self/fd: cpp-httplib 0.11 does not expose them, and the
// server needs them to notice a client that hung up and to widen the listen backlog.
// Thread-safety: each function may run on any thread.
#pragma once

#include <string>

namespace ditto {

// The file descriptor of the TCP connection from (remote_addr, remote_port) to local_port, or -1
// when not found. The fd stays open while httplib's handler runs, even if the peer hangs up.
int connection_fd(const std::string& remote_addr, int remote_port, int local_port);

// Calls listen(fd, backlog) on this process's listening socket on `port` (Linux allows it on a
// listening socket): httplib listens with a compiled-in backlog of 5, and bursts of connects
// then see resets.
void widen_listen_backlog(int port, int backlog);

// Sets `fd` up as the server's listening socket before it binds: SO_REUSEADDR only, so that a
// restarted server binds while the old one's connections linger in TIME_WAIT, but a port another
// process listens on stays its own (no SO_REUSEPORT, which cpp-httplib sets by default and which
// lets two servers share a port and split its connections between them).
void listening_socket_options(int fd);

// Why binding (host, port) fails, as the operating system says it ("Address already in use"),
// found by trying it on a socket of our own; "" when it would succeed now.
std::string bind_failure(const std::string& host, int port);

// True when the peer of `fd` has hung up (or the socket failed). Pipelined data is left unread.
bool peer_closed(int fd);

}  // namespace ditto
