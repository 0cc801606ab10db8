#include "ipc/peer.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace deepinfer::ipc {

Result<PeerCredentials> GetPeerCredentials(int fd) {
  struct ucred cred;
  std::memset(&cred, 0, sizeof(cred));
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    const int err = errno;
    return IoError("getsockopt(SO_PEERCRED) on fd " + std::to_string(fd) + ": " +
                   std::strerror(err));
  }
  if (len != sizeof(cred)) {
    return IoError("getsockopt(SO_PEERCRED) on fd " + std::to_string(fd) + ": short answer (" +
                   std::to_string(len) + " bytes)");
  }
  // An AF_UNIX socket that never connected reports pid 0 and uid/gid -1: no peer to trust.
  if (cred.pid == 0) {
    return IoError("getsockopt(SO_PEERCRED) on fd " + std::to_string(fd) + ": no peer");
  }
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

}  // namespace deepinfer::ipc
