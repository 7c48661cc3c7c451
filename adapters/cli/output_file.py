"""The file a command's `-o FILE` names: never the store, written whole or not at all. `check_output`
refuses the configured SQLite store and its `-wal`, `-shm`, `-journal` files, by resolved path and by
inode. `write_output` writes a temporary file in FILE's folder and renames it over FILE; a device or pipe
is written directly. It says on stderr what it wrote. `-o -` or no -o is standard output."""

from __future__ import annotations

import os
import stat
import sys
import tempfile
from pathlib import Path

import typer

from adapters.api import DEFAULT_DB
from adapters.cli.app import warn
from domain.errors import ChatrecordError

STORE_COMPANIONS = ("", "-wal", "-shm", "-journal")
"""The suffixes of the files SQLite keeps beside a store file (the file itself first)."""


class UnwritableFile(ChatrecordError):
    """Raised when the file `-o` names cannot be written."""


class OutputIsTheStore(UnwritableFile):
    """Raised when `-o` names the configured store file or one of its companion files."""


def is_stdout(output: Path | None) -> bool:
    """Returns True when `-o` is missing or `-`: standard output."""
    return output is None or str(output) == "-"


def store_files(environ: dict[str, str] | None = None) -> list[Path]:
    """Returns the configured SQLite store file and its companions (none for PostgreSQL)."""
    environ = dict(os.environ) if environ is None else environ
    if environ.get("CHATRECORD_DATABASE_URL"):
        return []
    store = environ.get("CHATRECORD_DB") or DEFAULT_DB
    return [Path(store + suffix) for suffix in STORE_COMPANIONS]


def _same(output: Path, other: Path) -> bool:
    if os.path.realpath(output) == os.path.realpath(other):
        return True
    try:
        return os.path.samefile(output, other)  # a hard link, or another name of the same file
    except OSError:  # one of them does not exist
        return False


def output_path(value: str) -> Path:
    """Parses an -o value; refuses an empty name, which a path would read as `.`."""
    if not value.strip():
        raise typer.BadParameter("the name is empty; name a file (or -: standard output)")
    return Path(value)


def check_output(output: Path | None, environ: dict[str, str] | None = None) -> None:
    """Raises OutputIsTheStore when `output` is the configured store or a companion file. Raises
    UnwritableFile when it is a folder. Standard output (None, `-`) passes."""
    if output is None or is_stdout(output):
        return
    for store in store_files(environ):
        if _same(output, store):
            raise OutputIsTheStore(
                f"-o {output}: that is the store's file {store} (CHATRECORD_DB); "
                "writing there would destroy the store; name another file"
            )
    if output.is_dir():
        raise UnwritableFile(f"-o {output}: is a folder; name a file in it")


def write_output(data: bytes, output: Path | None, what: str) -> None:
    """Writes `data` whole to standard output or the file `output`, through a renamed temporary file. Keeps
    an existing file's permission bits. Says `FILE: WHAT, N bytes` on stderr. Raises as `check_output`.
    Raises UnwritableFile when the file cannot be written, leaving it unchanged."""
    if output is None or is_stdout(output):
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    check_output(output)
    try:
        if _exists_but_not_a_file(output):  # a device or a pipe (/dev/stdout, a FIFO): nothing to replace
            with output.open("wb") as stream:  # by the name given: /dev/stdout's link resolves to no path
                stream.write(data)
        else:
            _replace(Path(os.path.realpath(output)), data)  # a symlink's target is written, the link kept
    except OSError as error:
        raise UnwritableFile(f"{output}: cannot be written ({error.strerror or error})") from None
    warn(f"{output}: {what}, {len(data):,} bytes")


def _exists_but_not_a_file(output: Path) -> bool:
    """Says whether `output` (its links followed, as opening it does) exists and is not a regular file."""
    try:
        return not stat.S_ISREG(os.stat(output).st_mode)
    except OSError:  # missing, or a link to nothing
        return False


def _replace(target: Path, data: bytes) -> None:
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    descriptor, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
