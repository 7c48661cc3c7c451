"""The HTTP service's reproductions. `POST /v1/conversations/{id}/reproductions` sends a recorded turn to
the configured model again (`Chatrecord.reproduce`); `GET` lists the kept ones.

No `from __future__ import annotations` here: FastAPI reads the handlers' annotations."""

from typing import Annotated, Any

from fastapi import APIRouter, Body, Response

from adapters.http import schemas
from adapters.http.reads import Conversation, Service, json_response


def add_reproductions(
    v1: APIRouter, of_a_conversation: dict[int | str, dict[str, Any]], model_errors: dict[int | str, dict[str, Any]]
) -> None:
    """Adds the reproductions to the `/v1` router. `model_errors`: the problems of an unset or unusable
    model."""

    @v1.post(
        "/conversations/{conversation:path}/reproductions",
        response_model=schemas.ReproductionReport,
        status_code=201,
        response_description="The answers kept, counted per rule set",
        responses=of_a_conversation | model_errors,
    )
    def reproduce(
        chatrecord: Service,
        conversation: Conversation,
        asked: Annotated[schemas.ReproductionRequest, Body()] = schemas.ReproductionRequest(),  # noqa: B008 - a constant
    ) -> Response:
        """Sends the turn's model input (byte for byte the replay's) to the model the server is
        configured with (CHATRECORD_MODEL_URL, CHATRECORD_MODEL, CHATRECORD_MODEL_KEY) `n` times
        under each rule set, keeps each complete answer in a reproduction of its own (its text
        sealed with the conversation's data key) and answers the table: `chatrecord reproduce
        --json`. A model that is not configured is a 409 (model-not-set); an endpoint that does
        not answer, refuses the key, does not know the model or fails after its retries a 502
        (model-unavailable), the answers completed before it kept."""
        report = chatrecord.reproduce(
            conversation, list(asked.rules) if asked.rules else None, asked.turn, asked.n, judge=asked.judge_model
        )
        return json_response(report.to_json(), status=201)

    @v1.get(
        "/conversations/{conversation:path}/reproductions",
        response_model=list[schemas.Reproduction],
        response_description="The kept reproductions, oldest first",
        responses=of_a_conversation,
    )
    def reproductions(chatrecord: Service, conversation: Conversation) -> Response:
        """The conversation's kept reproductions with their answers (`chatrecord reproduce --kept
        --json`); an erased conversation's answers read [erased]."""
        return json_response([done.to_json() for done in chatrecord.reproductions(conversation)])
