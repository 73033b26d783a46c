"""sessionlog: embedded storage for AI-agent sessions.

A :class:`Store` keeps many sessions in one directory, on a segmented, checksummed log whose
commits from many threads share one ``fdatasync``. A session is an append-only sequence of
typed events (see :mod:`sessionlog.build`); the messages a model sees are derived from it
(:meth:`Store.view`).

The native calls release the GIL while they wait on the disk, so threads writing different
sessions group-commit. The ``*_async`` methods run the same calls on the event loop's default
executor, so they never block the loop.

Errors are :class:`SessionlogError` subclasses chosen by what went wrong:
:class:`RefusedError` (input refused, nothing changed), :class:`NotFoundError`,
:class:`BusyError` (held by another process or handle), :class:`DamagedError` (stored data
does not verify) and :class:`StorageError` (I/O, a poisoned or closed store, bad options).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Sequence, TypeVar, Union

from . import _native, build
from ._native import (
    BusyError,
    DamagedError,
    NotFoundError,
    RefusedError,
    SessionlogError,
    StorageError,
    StoredEvent,
)

__all__ = [
    "BusyError",
    "DamagedError",
    "NotFoundError",
    "RefusedError",
    "SessionHandle",
    "SessionlogError",
    "StorageError",
    "Store",
    "StoredEvent",
    "View",
    "build",
]

_T = TypeVar("_T")

Event = Union[build.Builder, dict, str]


async def _in_executor(fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, functools.partial(fn, *args, **kwargs))


@dataclass(frozen=True)
class View:
    """A session's derived state as of its last event."""

    name: str
    messages: list
    """The model messages derived from the current surface, as dicts."""


class SessionHandle:
    """The one writer of a session.

    Appends are validated and folded in memory, written to the log's buffer, and made durable
    by :meth:`commit`. A refused event raises :class:`RefusedError` and changes nothing. Use it
    as a context manager, or call :meth:`close`, to free the session for another writer.
    """

    __slots__ = ("_native",)

    def __init__(self, native: _native.SessionHandle) -> None:
        self._native = native

    @property
    def name(self) -> str:
        """The session's name in the store."""
        return self._native.name

    def append(self, event: Event) -> int:
        """Appends one event (a :mod:`sessionlog.build` event, or a raw envelope as a dict or
        JSON text with ``type``, ``data`` and optional ``time``, ``ignorable``, ``surfaceOp``,
        ``sourceEventSeqs``); returns its seq. Durable after the next :meth:`commit`."""
        return self._native.append(event)

    def append_atomic(self, events: Sequence[Union[dict, str]], *, commit: bool = False) -> list:
        """Appends raw envelopes as one atomic batch (after a crash all or none are there);
        returns their seqs. If one is refused, none is appended. With ``commit=True`` the batch
        is durable when this returns (as with a following :meth:`commit`, in one native call)."""
        return self._native.append_atomic(list(events), commit=commit)

    def commit(self) -> None:
        """Makes every event appended so far durable. The GIL is released while it waits, and
        commits from concurrent threads share one sync."""
        self._native.commit()

    async def append_async(self, event: Event) -> int:
        """:meth:`append` on the loop's executor."""
        return await _in_executor(self._native.append, event)

    async def commit_async(self) -> None:
        """:meth:`commit` on the loop's executor: the loop runs on while the disk syncs."""
        await _in_executor(self._native.commit)

    def next_seq(self) -> int:
        """The seq the next event will take."""
        return self._native.next_seq()

    def pressure(self) -> dict:
        """Context pressure of the next request: ``estimated_prompt_tokens`` (always an
        estimate), ``anchored_on`` and ``anchor_prompt_tokens`` (the settlement with exact
        usage it starts from, if any), ``context_window`` and ``ratio``."""
        return self._native.pressure()

    def compact(
        self,
        summarizer: Optional[Callable[[dict], Union[str, dict]]] = None,
        *,
        trigger_fraction: float = 0.0,
        keep_recent_tokens: Optional[int] = None,
        keep_recent_fraction: float = 0.25,
    ) -> dict:
        """Runs one summary compaction now, durably. ``summarizer`` gets the request as a
        dict (``messages``, ``max_summary_tokens``, ``attempt``, ...) and returns the summary
        text or a dict with ``text``, ``provider`` and ``model``; without one a deterministic
        summarizer is used. Returns ``{"outcome": "compacted" | "skipped" | "failed", ...}``.
        The shadowed events stay in the log."""
        return self._native.compact(
            summarizer,
            trigger_fraction=trigger_fraction,
            keep_recent_tokens=keep_recent_tokens,
            keep_recent_fraction=keep_recent_fraction,
        )

    def close(self) -> None:
        """Frees the session's writer slot. Events not committed stay in the log's buffer and
        become durable with the store's next commit."""
        self._native.close()

    def __enter__(self) -> "SessionHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<sessionlog.SessionHandle {self.name!r}>"


class Store:
    """A store: many sessions in one log directory.

    ``Store(path)`` opens the store in ``path``, creating it when the directory is absent or
    empty (``create=False`` refuses to create). ``read_only=True`` takes no lock and writes
    nothing, so it works beside a live writer in another process. ``segment_bytes`` bounds the
    size of each segment file (64 MiB by default); ``strict=True`` makes any damage an error
    instead of cutting a torn, never-acknowledged tail. ``compression_level`` (a zstd level, 1
    to 19) makes :meth:`reclaim` compress the sealed segments it finds uncompressed.
    ``kept_events_bytes`` bounds how much text of the events they appended the store's open
    session handles keep in memory together, for compaction and look-backs (each at most
    256 KiB; 64 MiB in all by default; 0 keeps none, and every look-back reads the log).
    """

    __slots__ = ("_native",)

    def __init__(
        self,
        path: Union[str, os.PathLike],
        *,
        read_only: bool = False,
        create: bool = True,
        segment_bytes: Optional[int] = None,
        preallocate: Optional[bool] = None,
        strict: bool = False,
        compression_level: Optional[int] = None,
        kept_events_bytes: Optional[int] = None,
    ) -> None:
        self._native = _native.Store(
            os.fspath(path),
            read_only=read_only,
            create=create,
            segment_bytes=segment_bytes,
            preallocate=preallocate,
            strict=strict,
            compression_level=compression_level,
            kept_events_bytes=kept_events_bytes,
        )

    @property
    def path(self) -> str:
        """The store directory."""
        return self._native.path

    @property
    def read_only(self) -> bool:
        """Whether the store was opened read-only."""
        return self._native.read_only

    def create_session(self, name: str, *, cwd: Optional[str] = None) -> SessionHandle:
        """Creates an empty session (durably) and returns its writer.
        Raises :class:`RefusedError` when the name is taken or not allowed."""
        return SessionHandle(self._native.create_session(name, cwd))

    def open_session(self, name: str, *, repair: bool = True) -> SessionHandle:
        """Opens a session for writing. With ``repair`` (the default) a final turn a crash
        left open gets its closing events appended, as new events. Raises
        :class:`BusyError` when another handle writes it."""
        return SessionHandle(self._native.open_session(name, repair=repair))

    def flush(self) -> None:
        """Makes every event appended so far, by every writer of the store, durable: one
        group commit shared with any running at once. The GIL is released while it waits."""
        self._native.flush()

    def flush_sessions(self, handles: "list[SessionHandle]") -> "list[int]":
        """:meth:`flush` for writers that append without committing: notes where each
        handle stands, flushes, then writes each session's checkpoints that are due (as a
        commit would), with the GIL released once for all of it. Returns one mark per
        handle: every event of ``handles[i]`` with a seq below ``marks[i]`` is durable (0
        for a closed handle)."""
        return self._native.flush_sessions([h._native for h in handles])

    def session_names(self) -> list:
        """Names of all sessions, sorted."""
        return self._native.session_names()

    def list_sessions(
        self, *, after: Optional[str] = None, prefix: Optional[str] = None, limit: int = 1000
    ) -> list:
        """Up to ``limit`` ``(name, events)`` pairs in name order after ``after``, optionally
        only names starting with ``prefix``."""
        return self._native.list_sessions(after=after, prefix=prefix, limit=limit)

    def delete_session(self, name: str) -> None:
        """Deletes a session (durably). Its name is free at once; its events stay on disk
        until :meth:`reclaim`."""
        self._native.delete_session(name)

    def reclaim(self, *, seal_active: bool = False) -> dict:
        """Gives the space of deleted sessions back: removes the sealed segments that hold
        nothing live and rewrites those that are mostly dead (and, with ``compression_level``
        set, compresses every sealed segment not compressed yet). Every event of a live
        session stays, the originals a compaction shadowed included. ``seal_active=True``
        seals the active segment first, so a store at rest is compressed whole.

        Returns ``segments_removed``, ``segments_rewritten`` and ``segments_compressed``
        (segment numbers), ``bytes_removed``, ``bytes_freed_by_rewrites``,
        ``live_bytes_copied`` and ``stopped_at`` (``(segment, why)`` for the first sealed
        segment that had to stay, or ``None``). Commits of other threads go on meanwhile;
        the GIL is released. Raises on a read-only store."""
        return self._native.reclaim(seal_active=seal_active)

    def event_count(self, name: str) -> int:
        """Events in session ``name``."""
        return self._native.event_count(name)

    def events(self, name: str, start: int = 0, stop: Optional[int] = None) -> list:
        """The stored events of a session with ``start <= seq < stop`` (to the end when
        ``stop`` is None), in order."""
        return self._native.events(name, start, stop)

    def events_at(self, name: str, seqs: Iterable[int]) -> list:
        """The stored events of a session with the given seqs, in the order asked."""
        return self._native.events_at(name, list(seqs))

    def payloads_at(self, name: str, seqs: Iterable[int]) -> list:
        """The payloads (``data``, as JSON text byte for byte) of a session's events with the
        given seqs, in the order asked."""
        return self._native.payloads_at(name, list(seqs))

    def payloads_json_at(self, name: str, seqs: Iterable[int]) -> str:
        """The same payloads as :meth:`payloads_at`, as the text of one JSON array."""
        return self._native.payloads_json_at(name, list(seqs))

    def view(self, name: str) -> View:
        """The session's derived state: the model messages of its current surface."""
        return View(name=name, messages=json.loads(self._native.messages_json(name)))

    async def view_async(self, name: str) -> View:
        """:meth:`view` on the loop's executor."""
        return await _in_executor(self.view, name)

    def import_dsh(self, data: Union[bytes, str, os.PathLike], *, name: Optional[str] = None):
        """Imports a DeepSeek Harness ``session.jsonl`` (its bytes, or a path) as a session,
        named ``name`` or the header's id; returns ``(name, events)``. The file is validated
        whole before anything is written."""
        if not isinstance(data, (bytes, bytearray)):
            with open(data, "rb") as f:
                data = f.read()
        return self._native.import_dsh(bytes(data), name)

    def export_dsh(self, name: str) -> bytes:
        """The session as DeepSeek Harness JSONL."""
        return self._native.export_dsh(name)

    def raw_append(self, name: str, payloads: Sequence[bytes], *, durable: bool = True) -> list:
        """Appends opaque ``payloads`` to the raw stream ``name`` (created if missing) as one
        atomic batch; returns their seqs. Raw streams live beside sessions and never reach
        one."""
        return self._native.raw_append(name, list(payloads), durable=durable)

    def raw_read(self, name: str, start: int = 0, stop: Optional[int] = None) -> list:
        """``(seq, bytes)`` of the raw stream's records with ``start <= seq < stop``."""
        return self._native.raw_read(name, start, stop)

    def raw_stream_names(self) -> list:
        """Names of the raw streams, sorted."""
        return self._native.raw_stream_names()

    def raw_delete(self, name: str) -> bool:
        """Deletes the raw stream ``name`` durably; returns whether there was one. The name is
        free at once (a later append starts a new stream at seq 0), and :meth:`reclaim` gives
        its records' space back."""
        return self._native.raw_delete(name)

    def close(self) -> None:
        """Closes the store. Later calls raise :class:`StorageError`."""
        self._native.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<sessionlog.Store {self.path!r}>"
