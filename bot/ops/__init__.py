"""Run it like a service: probes and Prometheus metrics on a small HTTP server (``ops:``)."""
