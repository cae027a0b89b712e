"""Run it like a service: OpenTelemetry traces of runs, exported over OTLP/HTTP (``telemetry:``)."""
