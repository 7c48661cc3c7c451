"""The store: the eventsourcing application, serialisation, settings (which backend), the
history index, the hash chain and the data keys; each backend's own part is in `adapters.backends`."""
