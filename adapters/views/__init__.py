"""The read models as rows: what a backend gives them and the projections kept current per conversation."""
