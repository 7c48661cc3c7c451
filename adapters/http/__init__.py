"""The HTTP service (`chatrecord serve`): `create_app(chatrecord_factory, settings)` in
`adapters.http.app`, problems in `adapters.http.problems`, kept idempotency keys in
`adapters.store.idempotency`, the server's start in `adapters.http.server`."""
