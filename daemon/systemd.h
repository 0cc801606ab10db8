// systemd integration without libsystemd: the sd_notify datagram protocol, the watchdog
// interval and socket activation (sd_notify(3), sd_watchdog_enabled(3), sd_listen_fds(3)).
//
// Typical daemon flow:
//   DI_ASSIGN_OR_RETURN(std::vector<int> fds, ListenFds());  // first thing in main()
//   NotifyStatus("loading model");  ...  NotifyReady();
//   if (auto wd = WatchdogInterval(); wd.ok() && *wd) ping NotifyWatchdog() every *wd / 2
//   on SIGTERM: NotifyStopping(); on SIGHUP: NotifyReloading(); ...; NotifyReady();
#pragma once

#include <chrono>
#include <optional>
#include <string_view>
#include <vector>

#include "engine/common/status.h"

namespace deepinfer::daemon {

/// Sends `state` (newline-separated VAR=value assignments, e.g. "READY=1") as one datagram to
/// $NOTIFY_SOCKET: an absolute path, or an abstract socket name written with a leading '@'.
/// Ok and a no-op when $NOTIFY_SOCKET is unset or empty. InvalidArgument for an address of
/// another form (e.g. vsock:), IoError when the send fails. Thread-safe as long as nobody
/// modifies the environment concurrently.
Status SdNotify(std::string_view state);

/// READY=1: the model is loaded, warm, and the socket is accepting.
Status NotifyReady();
/// STATUS=<text> (newlines become spaces, so the text cannot inject assignments).
Status NotifyStatus(std::string_view text);
/// STOPPING=1: draining has begun.
Status NotifyStopping();
/// RELOADING=1 with MONOTONIC_USEC=<CLOCK_MONOTONIC now> (required by Type=notify-reload);
/// send NotifyReady() when the reload is done.
Status NotifyReloading();
/// WATCHDOG=1: the engine loop made progress.
Status NotifyWatchdog();
/// EXTEND_TIMEOUT_USEC=<usec>: a long start phase (model load) needs this much more time.
Status NotifyExtendTimeout(std::chrono::microseconds extra);

/// The watchdog interval from $WATCHDOG_USEC, or nullopt when the watchdog is off: variable
/// unset, or $WATCHDOG_PID set to another process. Send WATCHDOG=1 at least every half
/// interval. InvalidArgument when either variable is malformed or WATCHDOG_USEC is 0.
Result<std::optional<std::chrono::microseconds>> WatchdogInterval();

/// The first file descriptor passed by socket activation (SD_LISTEN_FDS_START).
inline constexpr int kListenFdsStart = 3;

/// Socket activation: the fds [3, 3 + $LISTEN_FDS) when $LISTEN_PID is this process, else an
/// empty vector (not activated). Sets FD_CLOEXEC on each fd, and always unsets LISTEN_PID,
/// LISTEN_FDS and LISTEN_FDNAMES so children do not inherit them. Call once, early, before
/// other threads exist (it modifies the environment). InvalidArgument when the variables are
/// malformed or an fd is not a listening AF_UNIX stream socket; the fds stay open then, and
/// the manager keeps its own copies, so callers must never shutdown() them.
Result<std::vector<int>> ListenFds();

}  // namespace deepinfer::daemon
