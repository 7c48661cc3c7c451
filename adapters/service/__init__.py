"""The service layer: the use cases behind `adapters.api.Chatrecord`. Lines into the store (`record_lines`),
batched ingest, replay, the list, export, the timeline, the master key, traces."""
