"""OpenTelemetry GenAI traces of what ran: the mapping from stored facts (`spans`, pure) and
its hand-over to the official SDK and exporters (`otlp`)."""
