"""The model endpoint a reproduction asks: its settings from the environment, one request (`ask`), and
the one line that says what went wrong with it (`model_error`). The endpoint is an OpenAI-compatible
chat-completions API, asked through the `openai` client, which retries 408, 409, 429, 5xx, timeouts and
broken connections (`max_retries`)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from domain.errors import ChatrecordError

if TYPE_CHECKING:  # openai is imported by the calls that use it: every command imports this module
    import openai

MODEL_URL = "CHATRECORD_MODEL_URL"
MODEL_NAME = "CHATRECORD_MODEL"
MODEL_KEY = "CHATRECORD_MODEL_KEY"
DEFAULT_CONCURRENCY = 4
DEFAULT_TIMEOUT = 120.0
DEFAULT_RETRIES = 3
MOST_ANSWER_CHARS = 200_000
"""The longest answer kept, in characters (a longer one ends the run, kept nowhere)."""


class AnswerTooLong(ValueError):
    """An answer longer than MOST_ANSWER_CHARS; its length in `chars`."""

    def __init__(self, chars: int) -> None:
        super().__init__(f"an answer of {chars:,} characters")
        self.chars = chars


class ModelNotSet(ChatrecordError):
    """Raised when no model endpoint or model is configured (CHATRECORD_MODEL_URL, CHATRECORD_MODEL)."""


@dataclass(frozen=True)
class ModelSettings:
    """Where the answers come from and how they are asked for."""

    url: str
    model: str
    key: str = ""
    timeout: float = DEFAULT_TIMEOUT
    retries: int = DEFAULT_RETRIES
    concurrency: int = DEFAULT_CONCURRENCY
    temperature: float | None = None
    max_tokens: int | None = None
    judge: str | None = None
    """The model that judges each answer (MODEL_RUBRIC) on the same endpoint; None: the rule-based judge only."""

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> ModelSettings:
        """Returns the settings of the environment (`MODEL_URL`, `MODEL_NAME`, the key from
        `MODEL_KEY` or OPENAI_API_KEY), with `overrides` (None values ignored). Raises ModelNotSet."""
        env = os.environ if environ is None else environ
        given = {k: v for k, v in overrides.items() if v is not None}
        url = given.pop("url", None) or env.get(MODEL_URL, "")
        model = given.pop("model", None) or env.get(MODEL_NAME, "")
        if not url or not model:
            said = {
                MODEL_URL: "the OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1 for vLLM, "
                "http://127.0.0.1:8080/v1 for llama.cpp's server, http://127.0.0.1:11434/v1 for Ollama)",
                MODEL_NAME: "the model it serves",
            }
            missing = [name for name, value in ((MODEL_URL, url), (MODEL_NAME, model)) if not value]
            raise ModelNotSet(f"set {' and '.join(missing)}: " + " and ".join(said[name] for name in missing))
        key = given.pop("key", None) or env.get(MODEL_KEY) or env.get("OPENAI_API_KEY") or ""
        return cls(url=url, model=model, key=key, **given)

    def parameters(self) -> dict[str, Any]:
        """Returns what the answers were asked with, as a reproduction keeps it."""
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "timeout": self.timeout,
            "retries": self.retries,
            "concurrency": self.concurrency,
            "judge": self.judge,
        }


RETRIED_STATUSES = frozenset({408, 409, 429})
"""The statuses the openai client tries again (besides every 5xx, a timeout and a broken connection)."""


def model_error(error: Exception, settings: ModelSettings) -> str:
    """Returns the one line that says what went wrong with the endpoint, and what to do."""
    import openai

    where = f"the model endpoint {shown_url(settings.url)}"
    retried = f"retried up to {settings.retries} time{'' if settings.retries == 1 else 's'}"
    if isinstance(error, openai.APITimeoutError):
        return f"{where} did not answer within {settings.timeout:g} s ({retried}); raise --timeout or check the server"
    if isinstance(error, openai.APIConnectionError):
        cause = type(error.__cause__ or error).__name__
        if "Connect" in cause:  # httpx's ConnectError, ConnectTimeout: nothing listens there
            return f"{where} does not answer ({cause}); start the server or set {MODEL_URL}"
        return f"{where} broke the connection off before an answer was whole ({cause}, {retried})"
    if isinstance(error, (openai.AuthenticationError, openai.PermissionDeniedError)):
        return f"{where} refused the key (HTTP {error.status_code}); set {MODEL_KEY} to a key it accepts"
    if isinstance(error, openai.NotFoundError):
        if "model" not in error.message.lower():  # a path the server does not serve, not a model it does not know
            return (
                f"{where} has no chat completions at {shown_url(settings.url).rstrip('/')}/chat/completions (HTTP 404); "
                f"set {MODEL_URL} to the API's base, e.g. ending in /v1"
            )
        judged = f" or the judge model {settings.judge!r}" if settings.judge else ""
        return f"{where} does not know the model {settings.model!r}{judged} (HTTP 404); set {MODEL_NAME} to a model it serves"
    if isinstance(error, openai.RateLimitError):
        return f"{where} kept refusing for too many requests (HTTP 429, {retried}); lower --concurrency or wait"
    if isinstance(error, openai.APIStatusError):
        tried = retried if error.status_code >= 500 or error.status_code in RETRIED_STATUSES else "not retried"
        return f"{where} answered HTTP {error.status_code} ({tried}): {_short(error.message)}"
    if isinstance(error, AnswerTooLong):
        return (
            f"{where} answered {error.chars:,} characters, more than the {MOST_ANSWER_CHARS:,} an answer may hold "
            "(not kept); ask the model for shorter answers (its max_tokens)"
        )
    if isinstance(error, json.JSONDecodeError):
        return (
            f"{where} answered a body that is not JSON ({error.msg} at character {error.pos + 1}); "
            f"check that {MODEL_URL} is an OpenAI-compatible API's base"
        )
    return f"{where} answered with no chat completion ({_short(str(error)) or type(error).__name__})"


def shown_url(url: str) -> str:
    """Returns the endpoint's URL as a reproduction keeps it: without a user name or password."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    return urlunsplit(parts._replace(netloc=host + (f":{parts.port}" if parts.port else "")))


def _short(text: str, most: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= most else line[: most - 1] + "…"


def ask(
    client: openai.OpenAI, settings: ModelSettings, messages: list[dict[str, str]]
) -> tuple[str, dict[str, Any], str | None, int]:
    """Sends `messages` once and returns the answer's text, usage, finish reason and latency
    (ms). Raises openai's errors, ValueError for a response without an answer's text, AnswerTooLong for
    one longer than MOST_ANSWER_CHARS."""
    extra: dict[str, Any] = {}
    if settings.temperature is not None:
        extra["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        extra["max_tokens"] = settings.max_tokens
    began = time.monotonic()
    completion = client.chat.completions.create(model=settings.model, messages=messages, **extra)  # type: ignore[arg-type]  # the roles are the API's
    latency = int((time.monotonic() - began) * 1000)
    choices = getattr(completion, "choices", None)
    if not isinstance(choices, list) or not choices or getattr(choices[0].message, "content", None) is None:
        raise ValueError("the response holds no answer's text")
    text = choices[0].message.content
    if len(text) > MOST_ANSWER_CHARS:
        raise AnswerTooLong(len(text))
    usage = completion.usage.model_dump(exclude_none=True, warnings=False) if completion.usage is not None else {}
    return text, usage_counts(usage), choices[0].finish_reason, latency


MOST_COUNT = 2**53
"""The largest token count kept: a count above it, like one below 0 or of another type, is no count."""


def usage_counts(usage: Mapping[str, Any]) -> dict[str, Any]:
    """Returns the counts of an endpoint's `usage` that are whole numbers from 0 to MOST_COUNT
    (`prompt_tokens`, …), one level of nested counts (`completion_tokens_details`) included;
    any other value is left out, unknown rather than wrong, so the endpoint cannot make the
    kept answer unstorable."""
    kept: dict[str, Any] = {}
    for name, value in usage.items():
        if isinstance(value, Mapping):
            nested = {k: v for k, v in value.items() if _count(v)}
            if nested:
                kept[name] = nested
        elif _count(value):
            kept[name] = value
    return kept


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MOST_COUNT
