"""Where a key or value stands in a TOML file, so that every error about a
budget file names its line and column."""

from __future__ import annotations

import re
from typing import Iterable

# --- locating keys in TOML source ------------------------------------------------------------

BARE_KEY = r"[A-Za-z0-9_-]+"
_BASIC = r'"(?:[^"\\\n]|\\.)*"'
_LITERAL = r"'[^'\n]*'"
_KEY_PART = f"(?:{BARE_KEY}|{_BASIC}|{_LITERAL})"
_DOTTED = f"{_KEY_PART}(?:\\s*\\.\\s*{_KEY_PART})*"
_TOKEN = re.compile(f"(?P<key>{_DOTTED})\\s*=(?!=)|(?P<str>{_BASIC}|{_LITERAL})|(?P<open>\\{{)|(?P<close>\\}})|(?P<other>.)")
_HEADER = re.compile(f"^\\s*(\\[\\[?)\\s*({_DOTTED})\\s*\\]\\]?")


_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", "e": "\x1b", '"': '"', "\\": "\\"}
_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|x([0-9A-Fa-f]{2})|(.))")


def _basic_string(quoted: str) -> str:
    """A TOML basic string's value (tomllib has accepted the file): its escapes, and the
    tabs it may hold as they are (JSON's decoder refused them: a key with a tab in it
    stopped the budget's parser with a JSONDecodeError)."""
    def unescape(match: re.Match) -> str:
        code = match.group(1) or match.group(2) or match.group(3)
        if code:
            try:
                return chr(int(code, 16))
            except ValueError:  # past U+10FFFF: tomllib refuses it first
                return match.group(0)
        return _ESCAPES.get(match.group(4), match.group(0))
    return _ESCAPE.sub(unescape, quoted[1:-1])


def _split_key(text: str) -> tuple[str, ...]:
    parts = []
    for match in re.finditer(_KEY_PART, text):
        part = match.group(0)
        if part.startswith('"'):
            part = _basic_string(part)
        elif part.startswith("'"):
            part = part[1:-1]
        parts.append(part)
    return tuple(parts)


class TomlLocator:
    """Line and column of the tables and keys of a TOML text.

    tomllib reports positions only for syntax errors; a valid file with a wrong key or
    a bad size still deserves a message naming its line. This scans the text once
    (headers, `key =` lines, one-line inline tables) into a map from key paths, with
    array-of-tables indices, to positions. Best effort: what it cannot place falls back
    to the nearest enclosing table.
    """

    def __init__(self, text: str):
        self.positions: dict[tuple, tuple[int, int]] = {}
        self._arrays: dict[tuple, int] = {}
        self._scan(text)

    def find(self, path: Iterable) -> tuple[int, int] | None:
        path = tuple(path)
        while path:
            if path in self.positions:
                return self.positions[path]
            path = path[:-1]
        return None

    def _resolve(self, parts: tuple[str, ...]) -> tuple:
        out: list = []
        for part in parts:
            out.append(part)
            count = self._arrays.get(tuple(out))
            if count:
                out.append(count - 1)
        return tuple(out)

    def _scan(self, text: str) -> None:
        table: tuple = ()
        in_multiline = None
        for number, line in enumerate(text.splitlines(), start=1):
            if in_multiline:
                if line.count(in_multiline) % 2 == 1:
                    in_multiline = None
                continue
            header = _HEADER.match(line)
            if header:
                table = self._header(header, number)
                continue
            self._key_line(line, number, table)
            for quote in ('"""', "'''"):
                if line.count(quote) % 2 == 1:
                    in_multiline = quote

    def _header(self, match: re.Match, number: int) -> tuple:
        parts = _split_key(match.group(2))
        column = match.start(2) + 1 + [m.start() for m in re.finditer(_KEY_PART, match.group(2))][-1]
        if match.group(1) == "[[":
            array = self._resolve(parts[:-1]) + (parts[-1],)
            self._arrays[array] = self._arrays.get(array, 0) + 1
            self.positions.setdefault(array, (number, column))
            table = array + (self._arrays[array] - 1,)
        else:
            table = self._resolve(parts)
        self.positions[table] = (number, column)
        return table

    def _key_line(self, line: str, number: int, table: tuple) -> None:
        stack, pending, position = [table], None, 0
        while position < len(line):
            token = _TOKEN.match(line, position)
            position = token.end()
            if token.group("key") is not None:
                if pending is not None and stack[-1] == table and len(stack) == 1:
                    return  # a second `=` on a plain line: inside a value, stop
                pending = stack[-1] + _split_key(token.group("key"))
                self.positions.setdefault(pending, (number, token.start("key") + 1))
            elif token.group("open"):
                stack.append(pending if pending is not None else stack[-1])
            elif token.group("close") and len(stack) > 1:
                stack.pop()
            elif token.group("other") == "#":
                return
            elif token.group("other") == "[" and pending is None:
                return
