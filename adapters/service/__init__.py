"""The service layer's helpers: one path for lines into the store, and the results it returns."""
