"""`chatrecord`: the store on the command line (typer, rich).

Each command (a module `cmd_NAME.py`) parses its arguments, opens `adapters.api.Chatrecord`, calls one
method and prints text or `--json`. Output holds no control characters from the data and no trailing
spaces. Exit status: 0 success; 1 bad input, a missing file, an unknown conversation or an unusable
setting (one line `error: …` on stderr); 2 wrong usage. Any other exception is a bug and keeps its
traceback."""

from __future__ import annotations

import sys

from adapters.api import store_errors
from adapters.cli import (  # noqa: F401 - registers (verify and erase below)
    cmd_audit,
    cmd_demo,
    cmd_erase,
    cmd_export,
    cmd_ingest,
    cmd_init,
    cmd_keys,
    cmd_list,
    cmd_rebuild,
    cmd_replay,
    cmd_reproduce,
    cmd_serve,
    cmd_timeline,
    cmd_traces,
    cmd_usage,
    cmd_verify,
    helptypes,
)
from adapters.cli.app import app, warn
from domain.errors import ChatrecordError

app.command()(cmd_verify.verify)  # last, in this order, as --help has always listed them
app.command()(cmd_erase.erase)
app.add_typer(cmd_keys.keys_app, name="keys")
helptypes.examples_last(app)  # after every command is registered

__all__ = ["app", "main"]


def main() -> None:
    """Runs the command line; a user's mistake ends as one line `error: …` and exit status 1. So does a
    database error a setting or another process caused (`store_problem`). Any other database error keeps
    its traceback."""
    try:
        with store_errors():  # the library's, or a backend's driver's
            app()
    except ChatrecordError as error:
        warn(f"error: {error}")
        sys.exit(1)


if __name__ == "__main__":
    main()
