"""The domain: events, value objects and the Conversation aggregate. Pure: no I/O."""
