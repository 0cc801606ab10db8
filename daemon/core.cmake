# deepinfer_daemon_core: configuration (flags and config file) and systemd integration.
