# -*- coding: utf-8 -*-
# Copyright: kubevirt_ops.rebalance contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The files a run leaves on the controller (reports, evidence, backups and their directories), written by the
`output_file` action plugin in the process that runs the task: a builtin file, stat, copy or slurp task starts a module
process each (a copy two), about a fifth of a second of CPU for a few bytes on the same machine.

Pure file operations with the builtin modules' semantics that the roles relied on: a file is written to a temporary
file in its directory and renamed over the destination (a reader never sees half a report), with its mode; an
unchanged file with the right mode is left alone (a second run changes nothing); `force: false` never writes over an
existing file. Each function takes `check` (plan only) and returns what it did or would do as a plain dict; a problem
raises OutputFileError with the path and the fix."""

from __future__ import annotations

import os
import stat
import tempfile
from typing import Dict, List, Optional


class OutputFileError(Exception):
    """A file or directory that cannot be written: the message names the path, the problem and the fix."""


def parse_mode(mode) -> int:
    """An octal mode as roles write it ("0644", "644", or an int as YAML reads 0644) -> its permission bits."""
    if isinstance(mode, int) and not isinstance(mode, bool):
        value = mode
    elif isinstance(mode, str) and mode.strip() and all(c in "01234567" for c in mode.strip()):
        value = int(mode.strip(), 8)
    else:
        raise OutputFileError("mode {0!r} is not an octal mode. Fix: quote it as a string of octal digits, e.g. mode: \"0644\".".format(mode))
    if value < 0 or value > 0o7777:
        raise OutputFileError("mode {0!r} is out of range. Fix: give permission bits such as \"0644\" or \"0700\".".format(mode))
    return value


def _current_mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _problem(action: str, path: str, error: OSError) -> OutputFileError:
    return OutputFileError("cannot {0} {1}: {2}. Fix: choose a path this user can write, or create it with the right owner first.".format(
        action, path, error.strerror or error))


def missing_parents(path: str) -> List[str]:
    """The directories of `path` that do not exist yet, outermost first, `path` included when it is missing."""
    missing = []
    current = os.path.abspath(path)
    while not os.path.isdir(current):
        if os.path.lexists(current):
            raise OutputFileError("{0} exists and is not a directory. Fix: move it away or choose another directory.".format(current))
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return list(reversed(missing))


def _chmod(path: str, mode: int) -> None:
    try:
        os.chmod(path, mode)
    except OSError as error:
        raise _problem("set the mode of", path, error) from error


def ensure_directory(path: str, mode: int, existing_mode: str = "keep", check: bool = False) -> Dict:
    """`path` a directory: created with `mode` when missing, and so is each missing parent; an existing one keeps its mode
    (`existing_mode: keep`, a directory such as /tmp that is not the run's own) or is given `mode` (`set`)."""
    if existing_mode not in ("keep", "set"):
        raise OutputFileError("existing_mode {0!r} is neither keep nor set. Fix: existing_mode: keep (leave an existing directory's mode) "
                              "or set (give it `mode`).".format(existing_mode))
    created = missing_parents(path)
    result = {"path": path, "state": "directory", "created": created, "changed": bool(created), "mode": "{0:04o}".format(mode)}
    if not created:
        before = _current_mode(path)
        if existing_mode == "set" and before != mode:
            result.update(changed=True, mode_before="{0:04o}".format(before))
            if not check:
                _chmod(path, mode)
        elif existing_mode == "keep":
            result["mode"] = "{0:04o}".format(before)
        return result
    if not check:
        for directory in created:
            try:
                os.mkdir(directory, mode)
                os.chmod(directory, mode)   # mkdir's mode passes through the umask; the role asked for exactly this one
            except FileExistsError:
                continue   # another run made it meanwhile
            except OSError as error:
                raise _problem("create the directory", directory, error) from error
    return result


def _read(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise _problem("read", path, error) from error


def _replace(path: str, data: bytes, mode: int) -> None:
    """Write `data` next to `path` and rename it over `path`, so that a reader sees the old file or the new one."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        handle, temporary = tempfile.mkstemp(prefix=".{0}.".format(os.path.basename(path)), dir=directory)
    except OSError as error:
        raise _problem("write a file in", directory, error) from error
    try:
        with os.fdopen(handle, "wb") as output:
            output.write(data)
            output.flush()
            os.fsync(output.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except OSError as error:
        raise _problem("write", path, error) from error
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def write_file(path: str, content: str, mode: int, force: bool = True, verify: bool = False, check: bool = False) -> Dict:
    """`path` holding `content` (UTF-8) with `mode`. An existing file with other content is replaced unless `force` is
    false (then it is left exactly as it is: `existed` says so). `verify` reads a file written now back and fails
    unless it holds exactly `content` (a backup that does not read back is not a backup). The result carries `before`
    and `after` for a diff."""
    if not check and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        # in check mode the directory may be one that the run would have made before
        raise OutputFileError("the directory of {0} does not exist. Fix: create it first (state: directory) or choose another path.".format(path))
    if os.path.isdir(path):
        raise OutputFileError("{0} is a directory. Fix: give the path of a file in it.".format(path))
    data = content.encode("utf-8")
    before = _read(path)
    result = {"path": path, "state": "file", "existed": before is not None, "written": False, "changed": False,
              "mode": "{0:04o}".format(mode), "size": len(data)}
    if before is not None and not force:
        result.update(mode=_octal(path), size=len(before))
        return result
    if before == data:
        current = _current_mode(path)
        if current != mode:
            result.update(changed=True, mode_before="{0:04o}".format(current))
            if not check:
                _chmod(path, mode)
        return result
    # a diff only for a text that changes: an existing file's text decoded only then
    result.update(changed=True, written=not check, diff={"before_header": path, "after_header": path, "after": content,
                                                         "before": before.decode("utf-8", "replace") if before is not None else ""})
    if check:
        return result
    _replace(path, data, mode)
    if verify and _read(path) != data:
        raise OutputFileError("{0} does not read back as what was written. Fix: check the disk and the file system; nothing was changed "
                              "in the cluster.".format(path))
    return result


def _octal(path: str) -> str:
    return "{0:04o}".format(_current_mode(path))
