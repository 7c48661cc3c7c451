"""The HTTP service (`chatrecord serve`): the app (`app.create_app`), problems (`problems`), the server's
start (`server`). Idempotency keys are `adapters.store.idempotency`'s."""
