"""Readable value types in `--help`: `INTEGER`, `TEXT`, `PATH`, none for a flag. Typer's own are `<int
range>`, `<str>`, `<list[Path]>`, `<bool>`. The names differ between typer versions, and no public
setting changes them. `install()` hooks the one place each version takes the name from: `display_type`
from 0.28, the vendored click's `ParamType.get_metavar` before. Any other version is left as it is. An
explicit `metavar` wins."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any, get_args, get_origin

import typer.core

NAMES = {
    "text": "TEXT",
    "str": "TEXT",
    "integer": "INTEGER",
    "int": "INTEGER",
    "integer range": "INTEGER",
    "int range": "INTEGER",
    "float": "FLOAT",
    "float range": "FLOAT",
    "boolean": "BOOLEAN",
    "bool": "BOOLEAN",
    "path": "PATH",
    "file": "FILE",
    "directory": "DIRECTORY",
    "uuid": "UUID",
    "datetime": "DATETIME",
}
"""Type names as typer or click give them, and how help shows them (click's classic names)."""


def readable(name: str) -> str:
    """Returns how help shows the type named `name` (`int range` -> `INTEGER`)."""
    return NAMES.get(name.strip("<>").lower(), name.strip("<>").upper())


def _annotation_name(annotation: Any) -> str:
    if get_origin(annotation) in (list, tuple) and get_args(annotation):
        return _annotation_name(get_args(annotation)[0])
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "path"
    return getattr(annotation, "__name__", str(annotation))


def _display_type(self: Any, ctx: Any) -> str:
    """typer >= 0.28: the type column of a parameter; nothing for a flag."""
    if getattr(self, "is_flag", False) or getattr(self, "count", False):
        return ""
    descriptor = self.type_descriptor
    if descriptor.is_choice and descriptor.choices is not None:
        return "[" + "|".join(str(getattr(c, "value", c)) for c in descriptor.choices) + "]"
    if getattr(descriptor, "is_ranged", False):
        return readable(f"{descriptor.ranged_type_name} range")
    return readable(_annotation_name(descriptor.annotation))


def _get_metavar(original: Any) -> Any:
    """typer < 0.28: click's type name, readable, where the type gives no metavar of its own."""

    def get_metavar(self: Any, param: Any, ctx: Any) -> str | None:
        given: str | None = original(self, param, ctx)
        if given is not None:
            return given
        return readable(self.name)

    return get_metavar


_INSTALLED = False


def install() -> None:
    """Makes help show readable types, once per process (see the module)."""
    global _INSTALLED
    if _INSTALLED:
        return
    _INSTALLED = True
    if hasattr(typer.core.TyperOption, "display_type"):
        for cls in (typer.core.TyperOption, typer.core.TyperArgument):
            setattr(cls, "display_type", _display_type)  # noqa: B010 - typer's own method, replaced
        return
    base = _vendored_param_type()
    if base is None:
        return  # typer on click itself prints click's own names (INTEGER, TEXT) already
    setattr(base, "get_metavar", _get_metavar(base.get_metavar))  # noqa: B010 - click's own method, wrapped


def _vendored_param_type() -> Any:
    """typer < 0.28: the base of the vendored click's parameter types, found through an option's public
    `type`. None where typer runs on click itself."""
    make_option: Any = typer.core.TyperOption  # its arguments differ between versions (0.28 adds type_descriptor)
    param_type = type(make_option(param_decls=["--probe"]).type)
    if not param_type.__module__.startswith("typer."):
        return None
    return next((cls for cls in param_type.__mro__ if cls.__name__ == "ParamType"), None)


_EXAMPLE = re.compile(r"\n(?=Example[^\n]*:\n)")
"""Where a help's example part begins: a line `Example:` or `Example (…):`."""


def _split_example(doc: str) -> tuple[str, str] | None:
    """Returns `doc` cut before its last example part: (the help, the example), or None."""
    parts = _EXAMPLE.split(doc)
    if len(parts) < 2:
        return None
    return "\n".join(parts[:-1]).rstrip(), parts[-1].rstrip()


def examples_last(app: typer.Typer) -> None:
    """Moves each command's last `Example:` or `Example (…):` part into its epilog, so help ends with the
    example. Nested groups too. A command with an epilog is left."""
    for info in app.registered_commands:
        doc = info.help if isinstance(info.help, str) else (inspect.getdoc(info.callback) if info.callback is not None else None)
        split = _split_example(doc) if doc and info.epilog is None else None
        if split is not None:
            info.help, info.epilog = split
    for group in app.registered_groups:
        instance = group.typer_instance
        if instance is None:
            continue
        for holder in (group, instance.info):
            if isinstance(holder.help, str) and not isinstance(holder.epilog, str):
                split = _split_example(inspect.cleandoc(holder.help))
                if split is not None:
                    holder.help, holder.epilog = split
        examples_last(instance)
