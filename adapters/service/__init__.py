"""The service layer's helpers: one path for lines into the store (`record_lines`), batched ingest,
replay, the conversations list and export, the timeline, the master key and the traces."""
