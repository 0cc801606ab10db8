// Who is on the other end of a Unix socket: the kernel's SO_PEERCRED record, taken when the peer
// connected (or called socketpair), so it cannot be forged by what the peer sends later.
#pragma once

#include <sys/types.h>

#include "engine/common/status.h"

namespace deepinfer::ipc {

struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;

  bool operator==(const PeerCredentials&) const = default;
};

/// The credentials of the peer of a connected AF_UNIX socket. IoError (with errno's text) when
/// `fd` is not such a socket.
Result<PeerCredentials> GetPeerCredentials(int fd);

}  // namespace deepinfer::ipc
