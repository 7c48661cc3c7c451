"""The store: the eventsourcing application, serialisation, settings, backends (factories),
the history index, the hash chain and the data keys."""
