"""The store: the application, serialisation, settings, the history index, the hash chain and the data
keys. Each backend's own part is in `adapters.backends`."""
