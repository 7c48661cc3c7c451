"""The read models as rows: the tables per backend and the projections kept current per conversation."""
