"""OpenTelemetry GenAI traces: the mapping from stored facts (`spans`, pure) and the export (`otlp`)."""
