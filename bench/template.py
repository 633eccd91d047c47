"""The tiny template format of RESULTS.md's sections: format fields, and lines for ifs and loops.

A template is markdown. In it:

- ``{path}`` or ``{path:spec}``: a figure, formatted by :func:`format` with
  ``spec`` (``{rate:,.0f}``). ``path`` is a name followed by ``.attribute``
  or ``[key]`` steps, as in :meth:`str.format`:
  ``{tidemark.append.events_per_s:,.0f}``, ``{targets[append]}``.
- ``{path!j:SEP|ITEM}``: the items of a sequence joined by ``SEP``, each
  written by the template ``ITEM``, in which ``{0}`` is the item (and
  ``{0}``, ``{1}`` ... its parts when it is a tuple; a mapping gives its
  items): ``{outages!j:, |{0:.2f}}``, ``{cpu!j:, |{0} {1:.2f} µs}``.
- ``{{`` and ``}}``: a literal brace.
- a line ``% if PATH`` (or ``% if not PATH``), an optional ``% else`` line,
  and ``% end``: the lines between are kept when the figure is true (false).
- a line ``% for NAME in PATH`` (``% for A, B in PATH`` for pairs; a mapping
  gives its items) and ``% end``: the lines between are repeated for each
  item, with ``{loop.index}`` counting from 1.

Directive lines leave nothing in the output; every other line is kept as it
is, its fields filled. A field naming no figure raises :class:`TemplateError`
naming the template, the line and the field.
"""

from __future__ import annotations

import re
import string
from collections import ChainMap
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["TemplateError", "fields", "render"]

_DIRECTIVE = re.compile(r"^%\s*(\w+)\s*(.*?)\s*$")
_FOR = re.compile(r"^(\w+(?:\s*,\s*\w+)*)\s+in\s+(\S+)$")
_IF = re.compile(r"^(not\s+)?(\S+)$")
_PARSER = string.Formatter()
_FIRST_NAME = re.compile(r"[^.\[]*")


class TemplateError(Exception):
    """A template that cannot be read, or a field in it that names no figure."""


@dataclass(frozen=True)
class _Line:
    number: int
    text: str


@dataclass(frozen=True)
class _If:
    number: int
    path: str
    negated: bool
    then: list[_Node] = field(default_factory=list)
    otherwise: list[_Node] = field(default_factory=list)


@dataclass(frozen=True)
class _For:
    number: int
    names: tuple[str, ...]
    path: str
    body: list[_Node] = field(default_factory=list)


_Node = _Line | _If | _For


@dataclass(frozen=True)
class _Loop:
    """What ``{loop.index}`` reads inside a ``% for`` block."""

    index: int


def render(text: str, figures: Mapping[str, Any], name: str = "template") -> str:
    """``text`` with its directives applied and its fields filled from ``figures``.

    ``name`` names the template in errors. Raises :class:`TemplateError` for
    an unknown directive, an unclosed block, or a field naming no figure.
    """
    lines: list[str] = []
    _emit(_parse(text, name), ChainMap({}, figures), name, lines)
    return "\n".join(lines)


def fields(text: str, name: str = "template") -> set[str]:
    """The names a template reads from its figures: each field's and directive's first name.

    Names bound by a ``% for`` line are left out inside its block, as is
    ``loop``; positional fields (``{0}`` of a joined item) are left out.
    """
    found: set[str] = set()
    _collect(_parse(text, name), frozenset({"loop"}), found)
    return found


# --- parsing -----------------------------------------------------------------------------


def _parse(text: str, name: str) -> list[_Node]:
    root: list[_Node] = []
    # Each open block: where its lines go now, the block, and whether it had an ``else``.
    stack: list[tuple[list[_Node], _If | _For]] = []
    into = root
    for number, line in enumerate(text.split("\n"), 1):
        directive = _DIRECTIVE.match(line)
        if directive is None:
            into.append(_Line(number, line))
            continue
        word, rest = directive.groups()
        if word == "if":
            condition = _IF.match(rest)
            if condition is None:
                raise _error(name, number, f"expected `% if [not] PATH`, got {line!r}")
            block: _If | _For = _If(number, condition.group(2), bool(condition.group(1)))
        elif word == "for":
            loop = _FOR.match(rest)
            if loop is None:
                raise _error(name, number, f"expected `% for NAME in PATH`, got {line!r}")
            names = tuple(n.strip() for n in loop.group(1).split(","))
            block = _For(number, names, loop.group(2))
        elif word == "else":
            if not stack or not isinstance(stack[-1][1], _If) or into is stack[-1][1].otherwise:
                raise _error(name, number, "`% else` outside an `% if` block")
            into = stack[-1][1].otherwise
            continue
        elif word == "end":
            if not stack:
                raise _error(name, number, "`% end` with no block open")
            into = stack.pop()[0]
            continue
        else:
            raise _error(name, number, f"unknown directive {word!r} (if, else, for, end)")
        into.append(block)
        stack.append((into, block))
        into = block.then if isinstance(block, _If) else block.body
    if stack:
        raise _error(name, stack[-1][1].number, "block not closed by `% end`")
    return root


def _error(name: str, number: int, what: str) -> TemplateError:
    return TemplateError(f"{name}, line {number}: {what}")


# --- rendering ---------------------------------------------------------------------------


def _emit(nodes: list[_Node], scope: ChainMap[str, Any], name: str, out: list[str]) -> None:
    for node in nodes:
        if isinstance(node, _Line):
            out.append(_format(node.text, scope, (), name, node.number))
        elif isinstance(node, _If):
            value = _lookup(node.path, scope, (), name, node.number)
            _emit(node.then if bool(value) != node.negated else node.otherwise, scope, name, out)
        else:
            items = _lookup(node.path, scope, (), name, node.number)
            for index, item in enumerate(_items(items), 1):
                bound = dict(zip(node.names, _unpacked(item, node, name), strict=True))
                _emit(node.body, scope.new_child({**bound, "loop": _Loop(index)}), name, out)


def _items(value: Any) -> Iterable[Any]:
    return value.items() if isinstance(value, Mapping) else value


def _unpacked(item: Any, node: _For, name: str) -> tuple[Any, ...]:
    if len(node.names) == 1:
        return (item,)
    parts = tuple(item)
    if len(parts) != len(node.names):
        what = f"{len(parts)} values in an item of {node.path!r} for {len(node.names)} names"
        raise _error(name, node.number, what)
    return parts


def _format(
    text: str, scope: Mapping[str, Any], args: tuple[Any, ...], name: str, number: int
) -> str:
    out = []
    for literal, path, spec, conversion in _parsed(text, name, number):
        out.append(literal)
        if path is None:
            continue
        value = _lookup(path, scope, args, name, number)
        if conversion == "j":
            separator, _, item = (spec or "").partition("|")
            out.append(
                separator.join(
                    _format(item, scope, part if isinstance(part, tuple) else (part,), name, number)
                    for part in _items(value)
                )
            )
            continue
        if conversion:
            value = _PARSER.convert_field(value, conversion)
        try:
            out.append(format(value, spec or ""))
        except (TypeError, ValueError) as error:
            what = f"{{{path}:{spec}}} cannot format {value!r}: {error}"
            raise _error(name, number, what) from None
    return "".join(out)


def _parsed(text: str, name: str, number: int) -> Iterator[tuple[str, str | None, str, str]]:
    try:
        yield from _PARSER.parse(text)
    except ValueError as error:
        raise _error(name, number, f"{error} in {text!r}") from None


def _lookup(
    path: str, scope: Mapping[str, Any], args: tuple[Any, ...], name: str, number: int
) -> Any:
    try:
        return _PARSER.get_field(path, args, scope)[0]
    except (KeyError, AttributeError, IndexError, TypeError) as error:
        raise _error(name, number, f"no figure {path!r} ({error!r})") from None


# --- the names a template reads ----------------------------------------------------------


def _collect(nodes: list[_Node], bound: frozenset[str], found: set[str]) -> None:
    for node in nodes:
        if isinstance(node, _Line):
            _collect_text(node.text, bound, found)
            continue
        _add(node.path, bound, found)
        if isinstance(node, _If):
            _collect(node.then, bound, found)
            _collect(node.otherwise, bound, found)
        else:
            _collect(node.body, bound | set(node.names), found)


def _collect_text(text: str, bound: frozenset[str], found: set[str]) -> None:
    for _literal, path, spec, conversion in _PARSER.parse(text):
        if path is None:
            continue
        _add(path, bound, found)
        if conversion == "j":
            _collect_text((spec or "").partition("|")[2], bound, found)


def _add(path: str, bound: frozenset[str], found: set[str]) -> None:
    first = _FIRST_NAME.match(path).group()  # type: ignore[union-attr]  # it matches ""
    if first and not first.isdigit() and first not in bound:
        found.add(first)
