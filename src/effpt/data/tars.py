"""Tar shards: write them so that none passes for complete unless it is, and read them so
that one which stops early is an error.

Python's :mod:`tarfile` raises when the first header is invalid, but after the first
member it stops reading at any block that is not a valid header and returns what it
read so far as if the archive had ended there. A shard cut at a
512-byte block boundary, or one whose member header was overwritten, therefore reads
as a shorter, complete shard. :func:`iter_members` checks what follows the last member:
a real archive ends with two zero blocks and nothing but zeros after them.
"""

from __future__ import annotations

import os
import tarfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

import numpy as np

from effpt._validate import check_int
from effpt.data.errors import CorruptItemError

BLOCK = tarfile.BLOCKSIZE  # 512 bytes
#: Largest extended header (pax, GNU long name or long link) :func:`iter_members` reads.
MAX_EXTENDED_HEADER = 1 << 20
_EXTENDED = frozenset(
    {
        tarfile.XHDTYPE,
        tarfile.XGLTYPE,
        tarfile.SOLARIS_XHDTYPE,
        tarfile.GNUTYPE_LONGNAME,
        tarfile.GNUTYPE_LONGLINK,
    }
)


class _BoundedTarInfo(tarfile.TarInfo):
    """A TarInfo that refuses an extended header larger than MAX_EXTENDED_HEADER.

    tarfile reads an extended header's whole declared size into memory before it parses
    it; a damaged or hostile size (2**40) would make it read the rest of the shard.
    """

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _EXTENDED and self.size > MAX_EXTENDED_HEADER:
            msg = (
                f"an extended header at byte {self.offset} declares {self.size} bytes, "
                f"more than the {MAX_EXTENDED_HEADER} an extended header may hold"
            )
            raise tarfile.ReadError(msg)
        return super()._proc_member(tarfile_)


def write_tar_shards(
    paths: Sequence[str | Path], out_dir: str | Path, shards: int | Sequence[int]
) -> list[Path]:
    """Pack files into tar shards named ``shard-000.tar``, ``shard-001.tar``, ...

    Each file becomes the member ``<class folder>/<file name>``, in the order given, in
    the POSIX pax format: plain ustar headers, plus an extended header only for a name
    that ustar cannot hold (over 100 bytes, or not ASCII). Owner and time stamps are
    left out, so the same files give the same bytes. ``shards`` is the number of shards
    (sizes as equal as possible, at least one file each) or the list of their sizes,
    which must add up to ``len(paths)``.

    Each shard is written under a temporary name and renamed when complete: a write
    that fails leaves no ``shard-*.tar`` behind, and the error names the file it was
    packing. Shards of an earlier call in ``out_dir`` that this call does not rewrite
    are left as they are.

    Examples
    --------
    >>> import tempfile
    >>> from effpt.data import write_image_folder
    >>> images = write_image_folder(tempfile.mkdtemp(), 5, size=16)
    >>> [p.name for p in write_tar_shards(images, tempfile.mkdtemp(), [3, 2])]
    ['shard-000.tar', 'shard-001.tar']
    >>> write_tar_shards(images, tempfile.mkdtemp(), [3, 3])
    Traceback (most recent call last):
    ...
    ValueError: shard sizes [3, 3] add up to 6, but 5 paths were given

    A file reached through a symbolic link is packed with the link's name and class
    folder (and the target's bytes): a dataset of links into a content store keeps
    its labels.
    """
    if isinstance(paths, (str, Path)):
        msg = f"paths must be a list of files, got the single path {str(paths)!r}"
        raise TypeError(msg)
    paths = [Path(p) for p in paths]
    if not paths:
        msg = "paths must list at least one file, got an empty list"
        raise ValueError(msg)
    if isinstance(shards, bool) or not isinstance(shards, (int, Sequence)):
        msg = f"shards must be an int or a list of ints, got {type(shards).__name__}"
        raise TypeError(msg)
    if isinstance(shards, int):
        check_int("shards", shards, 1)
        if shards > len(paths):
            msg = f"shards={shards} but only {len(paths)} paths: every shard needs a file"
            raise ValueError(msg)
        sizes = [len(part) for part in np.array_split(np.arange(len(paths)), shards)]
    else:
        sizes = [check_int("shard size", s, 1) for s in shards]
        if sum(sizes) != len(paths):
            msg = f"shard sizes {sizes} add up to {sum(sizes)}, but {len(paths)} paths were given"
            raise ValueError(msg)
    names = _member_names(paths)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written, start = [], 0
    for k, n in enumerate(sizes):
        shard = out / f"shard-{k:03d}.tar"
        partial = shard.with_name(f".{shard.name}.partial")
        try:
            with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT, dereference=True) as tar:
                for path, name in zip(
                    paths[start : start + n], names[start : start + n], strict=True
                ):
                    try:
                        tar.add(path, arcname=name, filter=_anonymous)
                    except OSError as exc:  # keeps its type: FileNotFoundError, ...
                        msg = f"cannot pack '{path}' into '{shard}': {exc}"
                        raise type(exc)(msg) from exc
                    except (ValueError, tarfile.TarError) as exc:
                        msg = f"cannot pack '{path}' into '{shard}': {exc}"
                        raise ValueError(msg) from exc
            partial.replace(shard)  # atomic: a reader sees the whole shard or none
        finally:
            partial.unlink(missing_ok=True)
        written.append(shard)
        start += n
    return written


def _member_names(paths: list[Path]) -> list[str]:
    """``<class folder>/<file name>`` of each path; an error for a clash or a non-file."""
    names, seen = [], {}
    for path in paths:
        if not path.is_file():
            msg = f"'{path}' is not a file"
            raise FileNotFoundError(msg)
        # The folder the path names, not the one a symbolic link points into: a link
        # ds/square/x.png -> store/triangle/0.png is a square. abspath drops "." and
        # ".." without following links.
        folder = Path(os.path.abspath(path)).parent.name  # noqa: PTH100  (resolve follows links)
        if not folder:
            msg = f"'{path}' has no class folder: files must sit in <root>/<class>/"
            raise ValueError(msg)
        name = f"{folder}/{path.name}"
        if name in seen:
            msg = f"'{seen[name]}' and '{path}' both become member '{name}'"
            raise ValueError(msg)
        seen[name] = path
        names.append(name)
    return names


def _anonymous(member: tarfile.TarInfo) -> tarfile.TarInfo:
    """Drop owner and time from a member, so equal files make byte-identical shards."""
    member.uid = member.gid = member.mtime = 0
    member.uname = member.gname = ""
    return member


def iter_members(
    shard: str | Path, stride: int = 1, offset: int = 0
) -> Iterator[tuple[str, bytes | None]]:
    """Yield ``(name, data)`` for the members at positions ``offset``, ``offset + stride``, ...

    Reads ``shard`` front to back (no seeking while members are read). Positions count
    every member that is not a directory; ``data`` is None for a member that is not a
    regular file (a link, a device), which the caller reports. A shard that is damaged,
    cut short, or does not end with an end-of-archive marker raises
    :class:`~effpt.data.CorruptItemError` naming the shard and the last member
    read intact, after the members before the damage have been yielded. So does a
    member whose header declares more data than the file holds, at its header, in
    every reader (skipping it would otherwise read on for as long as the size says),
    and a shard that holds no member at all (a file of zero bytes, or only an
    end-of-archive marker: :func:`write_tar_shards` never writes one, so it is a
    copy that failed or a file allocated and never written). An extended header (pax,
    GNU long name) that declares more than 1 MiB (``MAX_EXTENDED_HEADER``) is refused
    before tarfile reads it, so a damaged size cannot make it read the shard into memory.

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from effpt.data import write_image_folder
    >>> images = write_image_folder(tempfile.mkdtemp(), 3, size=16)
    >>> [shard] = write_tar_shards(images, tempfile.mkdtemp(), 1)
    >>> [name for name, _ in iter_members(shard)] == [f"{p.parent.name}/{p.name}" for p in images]
    True
    >>> cut = Path(tempfile.mkdtemp()) / "cut.tar"  # cut where the third header starts
    >>> _ = cut.write_bytes(shard.read_bytes()[: 2 * 512 + 2 * 512 * 2])
    >>> [name for name, _ in iter_members(cut)]
    Traceback (most recent call last):
    ...
    effpt.data.errors.CorruptItemError: shard '...cut.tar' stops after member '...' ...
    >>> _ = cut.write_bytes(bytes(10 * 512))  # zeros only: an archive without members
    >>> list(iter_members(cut))
    Traceback (most recent call last):
    ...
    effpt.data.errors.CorruptItemError: shard '...cut.tar' holds no member: ...
    """
    check_int("stride", stride, 1)
    if check_int("offset", offset, 0) >= stride:
        msg = f"offset must be < stride={stride}, got {offset}"
        raise ValueError(msg)
    last: str | None = None  # the last member whose header was read
    position, end, stage = 0, 0, "header"
    with Path(shard).open("rb") as raw:
        size = os.fstat(raw.fileno()).st_size
        try:
            # "r|": a stream, no seeking; extended headers bounded before tarfile reads them
            with tarfile.open(fileobj=raw, mode="r|", tarinfo=_BoundedTarInfo) as tar:
                members = iter(tar)
                while True:
                    stage = "header"
                    member = next(members, None)  # None where tarfile sees no more headers
                    if member is None:
                        break
                    last = member.name
                    if member.offset_data + member.size > size:
                        msg = (
                            f"shard '{shard}' is truncated or damaged at member "
                            f"'{member.name}' (its header declares {member.size} bytes of "
                            f"data, but the file holds {max(0, size - member.offset_data)} "
                            "after it)"
                        )
                        raise CorruptItemError(msg)
                    if member.isdir():
                        continue
                    mine, position = position % stride == offset, position + 1
                    if mine:
                        stage = "data"
                        data = tar.extractfile(member).read() if member.isfile() else None
                        yield member.name, data
                end = tar.offset  # where tarfile found no further header
        except (tarfile.TarError, EOFError, OSError) as exc:
            where = f"at member '{last}'" if stage == "data" else _after(last)
            msg = f"shard '{shard}' is truncated or damaged {where} ({exc})"
            raise CorruptItemError(msg) from exc
        problem = _end_of_archive_problem(raw, end)
    if last is None and not problem:
        msg = (
            f"shard '{shard}' holds no member: only zero bytes ({size}), an end-of-archive "
            "marker and nothing before it (a copy that failed, or a file never written)"
        )
        raise CorruptItemError(msg)
    if problem:
        msg = (
            f"shard '{shard}' stops {_after(last)} without an end-of-archive marker "
            f"({problem}): the file is truncated, or the next member's header is damaged"
        )
        raise CorruptItemError(msg)


def _after(last: str | None) -> str:
    return "at its start" if last is None else f"after member '{last}'"


def _end_of_archive_problem(raw: BinaryIO, end: int) -> str | None:
    """None if the bytes from ``end`` on are two zero blocks and then only zeros."""
    raw.seek(0, os.SEEK_END)
    size = raw.tell()
    raw.seek(end)
    marker = raw.read(2 * BLOCK)
    if not marker:
        return f"the file ends there, at byte {end}"
    if marker.strip(b"\0"):
        return f"the block at byte {end} of {size} is not a valid header"
    if len(marker) < 2 * BLOCK:
        return f"only {len(marker)} zero bytes follow, at byte {end} of {size}"
    while chunk := raw.read(1 << 16):
        if chunk.strip(b"\0"):
            return f"non-zero bytes follow the zero blocks at byte {end} of {size}"
    return None
