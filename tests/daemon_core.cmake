# tests for daemon_core
