"""What the commands (``heaptype ...``) share: their error, and loading a profile
with its warnings on stderr."""

from __future__ import annotations

import sys
from pathlib import Path


class CommandError(Exception):
    """A user-facing error: printed as ``heaptype: error: ...``, exit status 2."""


def warn(message: str) -> None:
    print(f"heaptype: warning: {message}", file=sys.stderr)


# Profiles the command loaded, with the warnings already printed: reading the events
# (by the first view) can find more, e.g. a damaged record (see warn_found_later).
_loaded: list = []


def load_profile(path: str, map_files: dict[str, str] | None = None):
    """The profile at ``path``, its warnings printed; CommandError when it cannot be read."""
    from ..analyze.profile import ProfileError, load

    if not Path(path).exists():
        raise CommandError(f"{path}: no such profile file")
    try:
        profile = load(path, map_files=map_files)
    except ProfileError as e:
        raise CommandError(str(e)) from None
    for warning in profile.warnings:
        warn(warning)
    _loaded.append((profile, set(profile.warnings)))
    return profile


def warn_found_later() -> None:
    """Prints, once, what the views found wrong while reading the profiles' events:
    damage must never pass in silence, even when the figures print fine."""
    while _loaded:
        profile, shown = _loaded.pop()
        for warning in profile.warnings:
            if warning not in shown:
                shown.add(warning)
                warn(warning if warning.startswith(profile.path) else f"{profile.path}: {warning}")
