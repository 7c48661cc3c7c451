"""A small OpenAI-compatible chat-completions server for the tests of `chatrecord reproduce`
(issue 40): a FastAPI app on a free loopback port (uvicorn in a thread) that answers each
request as scripted: an answer, a slow answer, an HTTP status (429, 500, 401, 404), a body that
is not JSON, or a connection dropped in the middle of the body.

    with ModelServer() as server:
        server.script = [Scripted(text="Nichts gespeichert."), Scripted(status=429), ...]
        ...  # CHATRECORD_MODEL_URL=server.url

Once the script runs out every request gets `server.default`. Each request's body is kept
(`server.requests`), so a test sees what was sent.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse


@dataclass(frozen=True)
class Scripted:
    """One scripted reply: `text` after `delay` seconds, or HTTP `status`, or a body that is
    not JSON (`malformed`), or a connection dropped mid-body (`drop`)."""

    text: str = "Ich habe den Seitentitel von Seite 42 gespeichert."
    delay: float = 0.0
    status: int = 200
    malformed: bool = False
    drop: bool = False
    usage: dict[str, Any] | None = None
    """The reply's `usage` as sent, in place of the counts of `text`."""
    finish_reason: str = "stop"
    """The choice's `finish_reason`: "length" is an answer the endpoint cut at its token limit."""


def completion(text: str, model: str, usage: dict[str, Any] | None = None, finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason}],
        "usage": usage
        if usage is not None
        else {"prompt_tokens": 120, "completion_tokens": len(text.split()), "total_tokens": 120 + len(text.split())},
    }


class ModelServer:
    """The scripted server, started on entering and stopped on leaving."""

    MODEL = "test-model"
    JUDGE = "judge-model"
    """A second model, the judge: it answers the rubric's JSON, `judge_replies` first (then a denial
    where the judged answer says "nichts" or "nothing", else none), each naming the writes."""
    KEY = "test-key"

    def __init__(self) -> None:
        self.script: list[Scripted] = []
        self.default = Scripted()
        self.requests: list[dict[str, Any]] = []
        self.judge_replies: list[str] = []
        self.lock = threading.Lock()
        self.app = self._app()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="critical"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def next(self) -> Scripted:
        with self.lock:
            return self.script.pop(0) if self.script else self.default

    def _app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Response:
            body = await request.json()
            if request.headers.get("authorization") != f"Bearer {self.KEY}":
                return JSONResponse({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}, 401)
            if body.get("model") == self.JUDGE:
                with self.lock:
                    reply_text = self.judge_replies.pop(0) if self.judge_replies else None
                if reply_text is None:
                    judged = body["messages"][-1]["content"].split("Answer:", 1)[-1].lower()
                    denies = "nichts" in judged or "nothing" in judged
                    reply_text = f'{{"denies": {str(denies).lower()}, "names_writes": true}}'
                return JSONResponse(completion(reply_text, self.JUDGE))
            if body.get("model") != self.MODEL:
                return JSONResponse({"error": {"message": f"The model `{body.get('model')}` does not exist"}}, 404)
            reply = self.next()
            with self.lock:
                self.requests.append(body)
            if reply.delay:
                await asyncio.sleep(reply.delay)
            if reply.status != 200:
                return JSONResponse({"error": {"message": f"scripted {reply.status}"}}, reply.status)
            if reply.malformed:
                return Response(b'{"id": "chatcmpl-test", "choices": [', media_type="application/json")
            if reply.drop:

                async def broken() -> AsyncIterator[bytes]:
                    yield b'{"id": "chatcmpl-test", '
                    raise ConnectionResetError("scripted drop")

                return StreamingResponse(broken(), media_type="application/json", headers={"content-length": "4096"})
            return JSONResponse(completion(reply.text, self.MODEL, reply.usage, reply.finish_reason))

        return app

    def __enter__(self) -> ModelServer:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the scripted model server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
