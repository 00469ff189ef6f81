"""The files Reflex writes, replaces or deletes in a folder someone named: regular files inside
it, reached through no symlink.

The folder itself may be reached through a symlink (whoever named it chose so); nothing below it
may be one. A folder of lesson files checked out from a repository, or a site folder someone else
can write to, could otherwise hold a symlink that leads a write, or a stale file's removal, to any
file the user may change. The folder is opened once and every name below it is opened relative to
it with ``O_NOFOLLOW``, so a symlink swapped in after a check is refused, never followed. A file is
written to a new temp file beside it, then renamed over it: a reader sees the old file or the new
one, and a rename replaces a name, never the file a symlink points to.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import TextIO

from reflex_actions.bounded import excerpt
from reflex_actions.errors import ReflexError

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
#: What opening a symlink with O_NOFOLLOW fails with (Linux says ENOTDIR with O_DIRECTORY).
_REFUSED = (errno.ELOOP, errno.ENOTDIR)


class UnsafePathError(ReflexError):
    """A path Reflex will not write, replace or delete: a symlink, or not a folder or file."""


def _refusal(folder: Path, parts: Sequence[str], wanted: str, *, symlink: bool) -> UnsafePathError:
    """Named by its path inside the folder, then the folder (each bounded)."""
    where = f"{excerpt('/'.join(parts))} in {excerpt(str(folder))}"
    if symlink:
        return UnsafePathError(f"{where} is a symlink; Reflex writes and deletes through none")
    return UnsafePathError(f"{where} is not a {wanted}")


def _parts(relative: str) -> tuple[str, ...]:
    """The names of a path below the folder; refused if it could lead out of it."""
    path = PurePosixPath(relative)
    if path.is_absolute() or ".." in path.parts:
        raise UnsafePathError(f"{excerpt(relative)} is not a path inside the folder")
    return path.parts


def _file_parts(relative: str) -> tuple[str, ...]:
    """The names of a file's path below the folder; at least its own."""
    parts = _parts(relative)
    if not parts:
        raise UnsafePathError(f"{excerpt(relative)} names no file")
    return parts


class Folder:
    """A named folder, opened once: the files Reflex writes, replaces or deletes in it.

    Where a command writes many files it calls :meth:`check_file` for each first, so a refusal
    leaves nothing written; each write and removal checks again as it goes.
    """

    def __init__(self, path: Path, *, create: bool = False) -> None:
        if create:
            path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    def __enter__(self) -> Folder:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        os.close(self._fd)

    def check_file(self, relative: str) -> None:
        """Refuse now what writing or removing ``relative`` would: a symlink or a file on its
        way, or a target that is there and not a regular file."""
        parts = _file_parts(relative)
        with self._subfolder(parts[:-1], create=False) as folder:
            if folder is not None:
                self._check_target(folder, parts)

    def write_file(self, relative: str, text: str) -> None:
        """Write ``relative`` whole (its folders created as needed), replacing a regular file."""
        parts = _file_parts(relative)
        with self._subfolder(parts[:-1], create=True) as folder:
            assert folder is not None  # created
            self._check_target(folder, parts)
            temp = f".{parts[-1]}.{os.urandom(6).hex()}.tmp"  # hidden, named after its file
            handle = os.open(temp, _NEW_FILE, 0o666, dir_fd=folder)
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as file:
                    file.write(text)
                os.replace(temp, parts[-1], src_dir_fd=folder, dst_dir_fd=folder)
            except BaseException:
                with suppress(FileNotFoundError):
                    os.unlink(temp, dir_fd=folder)
                raise

    def regular_files(self, relative: str = "") -> dict[str, os.stat_result]:
        """The regular files in the folder ``relative`` (none if it is missing), by name, each
        with its status; a symlink or a folder in it is no file of Reflex's and is not listed."""
        with self._subfolder(_parts(relative), create=False) as folder:
            if folder is None:
                return {}
            with os.scandir(folder) as entries:
                found = {entry.name: entry.stat(follow_symlinks=False) for entry in entries}
        return {
            name: status for name, status in sorted(found.items()) if stat.S_ISREG(status.st_mode)
        }

    def remove_file(self, relative: str) -> None:
        """Delete ``relative`` if it is a regular file; refused if it is anything else."""
        parts = _file_parts(relative)
        with self._subfolder(parts[:-1], create=False) as folder:
            if folder is not None:
                self._check_target(folder, parts)
                with suppress(FileNotFoundError):
                    os.unlink(parts[-1], dir_fd=folder)

    def _check_target(self, folder: int, parts: Sequence[str]) -> None:
        try:
            status = os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(status.st_mode):
            symlink = stat.S_ISLNK(status.st_mode)
            raise _refusal(self.path, parts, "regular file", symlink=symlink)

    @contextmanager
    def _subfolder(self, parts: Sequence[str], *, create: bool) -> Iterator[int | None]:
        """The open folder ``parts`` below this one, each step a real folder (None if one is
        missing and ``create`` is off)."""
        opened: list[int] = []
        try:
            folder = self._fd
            for depth, name in enumerate(parts):
                if create:
                    with suppress(FileExistsError):  # mkdir never follows a symlink either
                        os.mkdir(name, dir_fd=folder)
                try:
                    folder = os.open(name, _FOLDER, dir_fd=folder)
                except FileNotFoundError:
                    if create:
                        raise
                    yield None
                    return
                except OSError as error:
                    if error.errno not in _REFUSED:
                        raise
                    symlink = _is_symlink(name, folder)
                    raise _refusal(
                        self.path, parts[: depth + 1], "folder", symlink=symlink
                    ) from None
                opened.append(folder)
            yield folder
        finally:
            for folder in opened:
                os.close(folder)


def _is_symlink(name: str, folder: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:  # gone since: the refusal still stands
        return False


def check_file(path: Path) -> None:
    """Refuse now what :func:`write_file` would (its folder must exist)."""
    with Folder(path.parent) as folder:
        folder.check_file(path.name)


def write_file(path: Path, text: str) -> None:
    """Write the file ``path`` names whole, in its folder: never through a symlink."""
    with Folder(path.parent) as folder:
        folder.write_file(path.name, text)


def is_regular_file(path: Path) -> bool:
    """Whether ``path`` names a regular file itself, not a symlink to one."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def open_lock_file(path: Path) -> TextIO:
    """The lock file ``path`` open to read and write, created if missing, as a regular file
    beside the file it locks: never through a symlink, since its holder may truncate it."""
    try:
        handle = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as error:
        if error.errno != errno.ELOOP:
            raise
        raise _refusal(path.parent, [path.name], "regular file", symlink=True) from None
    if not stat.S_ISREG(os.fstat(handle).st_mode):
        os.close(handle)
        raise _refusal(path.parent, [path.name], "regular file", symlink=False)
    return os.fdopen(handle, "r+", encoding="ascii", errors="replace")
