"""What a path is, before anything opens it: a trace must be a regular file (or a link to one).

Opening a FIFO blocks until something writes to it, and a device such as ``/dev/zero`` never
ends, so the reader, the folder search and the manifest reader ask :func:`unreadable_file` first
and take the answer as the file's problem, one line naming the real cause (issue 40).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

# The kinds of file a trace cannot be, by the stat mode test that recognises each.
SPECIAL = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
           (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder"))


def _link_problem(path: Path, exc: OSError) -> str:
    """Why a symbolic link cannot be followed: broken (its target is missing) or a loop."""
    if exc.errno == errno.ELOOP:
        return "a symbolic link that loops (too many levels of links)"
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return f"a broken symbolic link (to {target}, which does not exist)"


def unreadable_file(path: Path | str) -> str | None:
    """Why ``path`` cannot be read as a trace file without opening it, or None where it is a
    regular file (or a link to one) that may be opened.

    Returns:
        None, or one of: "no such file"; "a broken symbolic link (to T, which does not exist)";
        "a symbolic link that loops ..."; "a FIFO (named pipe), not a trace file" (likewise a
        character or block device, a socket, a folder); "cannot be examined (<strerror>)" for
        another error of ``stat`` (permission denied on a folder above it...). The caller maps them
        to exit code NOT_FOUND (3): no file it could open.
    """
    path = Path(path)
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if os.path.islink(path):
            return _link_problem(path, exc)
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return "no such file"
        return f"cannot be examined ({(exc.strerror or str(exc)).lower()})"
    for test, kind in SPECIAL:
        if test(mode):
            return f"{kind}, not a trace file"
    return None


def size_or_zero(path: Path) -> int:
    """``path``'s size in bytes, 0 where it cannot be examined (its reader then says why)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
