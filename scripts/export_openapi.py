"""Writes the HTTP service's OpenAPI document to stdout, as `/openapi.json` serves it.

python -m scripts.export_openapi > docs/openapi.json
"""

from __future__ import annotations

import json
import sys

from adapters.api import Chatrecord
from adapters.http.app import HttpSettings, create_app


def main() -> None:
    app = create_app(Chatrecord, HttpSettings(token="unused"))
    sys.stdout.write(json.dumps(app.openapi(), indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
