"""Ingestion for the command line: the service layer's (`adapters.api.Chatrecord.ingest`),
re-exported under the names the CLI has used."""

from __future__ import annotations

from adapters.api import DEMO_CONVERSATION, DEMO_FILE, demo_lines
from adapters.service.lines import IngestReport

__all__ = ["DEMO_CONVERSATION", "DEMO_FILE", "IngestReport", "demo_lines"]
