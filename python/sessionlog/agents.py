"""An OpenAI Agents SDK ``Session`` on a sessionlog store.

``SessionlogSession(session_id, db_path)`` takes the place of ``agents.SQLiteSession``: same
constructor, same behaviour, durable on return from every mutation. ``db_path`` is a store
directory (created if missing); ``":memory:"`` gives a private store in a temporary directory
that is removed when the session is closed.

Storage: the conversation is the sessionlog session named ``session_id``. Each
``add_items`` call is one turn, written as one atomic batch, with one surface event per item:
an item made by the model (assistant message, tool call, reasoning) is an
``assistant/message``, any other a ``user/message``. The message content is the item's
visible text and ``source.item`` holds the item itself, so ``get_items`` returns exactly what
was added. Nothing is ever deleted: ``pop_item`` writes a surface replacement that shadows
the newest item and ``clear_session`` one that shadows them all (an empty assistant
message, which derives no model message). So ``Store.view(session_id).messages``, a DSH
export and ``get_items`` agree on the current items, and the log keeps every item ever
added.

``run_compaction`` compacts through sessionlog's summary compaction: the oldest items are
shadowed by one summary message (returned by ``get_items`` as a user item), the newest
quarter of the estimated tokens kept verbatim. See :meth:`SessionlogSession.run_compaction`.

Several ``SessionlogSession`` objects of one process on the same ``db_path`` share one open
store; objects with the same ``session_id`` share one writer, whose state knows the current
items, so ``get_items(limit=N)`` reads only the N newest items from the log.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Callable, Optional, Union

from agents.memory.session import SessionABC
from agents.memory.session_settings import SessionSettings, resolve_session_limit

try:  # the SDK's own settings coercion (dicts, unknown keys refused)
    from agents.memory.session_settings import coerce_session_settings
except ImportError:  # pragma: no cover - older SDKs
    coerce_session_settings = None

from . import NotFoundError, Store

__all__ = ["SessionlogSession"]


#: The largest number of items ``get_items`` without a limit first tries to answer from
#: memory on the loop (as many as the writer keeps in memory: a copy of each, no decoding).
_READ_NOW_ALL = 4096

#: The newest items read into memory when a process opens a conversation.
_PREFETCH_ITEMS = 64

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)


def _encode_items(items: list) -> str:
    """``_encoder.encode(items)``: the same C encoder ``JSONEncoder.encode`` builds for a
    list (a new circular-reference check each call), without the Python frames around it."""
    if _c_make_encoder is None:  # pragma: no cover - a Python without the C accelerator
        return _encoder.encode(items)
    encode = _c_make_encoder(
        {}, _encoder.default, json.encoder.encode_basestring, None, ":", ",", False, False, True
    )
    return "".join(encode(items, 0))


def _settle(futures: list, error: Optional[BaseException]) -> None:
    for future in futures:
        if future.done():
            continue
        if error is None:
            future.set_result(None)
        else:
            future.set_exception(error)


class _Flusher:
    """Makes the appends of every session of one store durable for the coroutines awaiting
    them: one thread, one ``Store.flush`` (a group commit) per round for every append made
    before the round started, and one callback per event loop to wake its waiters. So N
    sessions adding at once cost one sync and two thread hand-offs, not N of each."""

    def __init__(self, store: Store) -> None:
        self._store = store
        # the waiters and the flags, under a plain lock (cheap on the event loop's path)
        self._lock = threading.Lock()
        self._waiting: list = []  # (loop, future, conversation)
        self._thread: Optional[threading.Thread] = None
        self._closed = False
        # one token queued while the thread has a round to start (or must stop); the thread
        # blocks on it with the GIL released
        self._wake: "queue.SimpleQueue[None]" = queue.SimpleQueue()
        self._woken = False

    def wait(self, conversation: "_Conversation") -> "asyncio.Future[None]":
        """A future set once everything appended before this call is durable."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            if self._closed:
                raise RuntimeError("the store is closed")
            self._waiting.append((loop, future, conversation))
            conversation.unflushed += 1
            wake = not self._woken
            self._woken = True
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="sessionlog-agents-flusher", daemon=True
                )
                self._thread.start()
        if wake:
            self._wake.put(None)
        return future

    def _run(self) -> None:
        while True:
            self._wake.get()
            with self._lock:
                self._woken = False
                if not self._waiting:
                    if self._closed:
                        return
                    continue
                batch, self._waiting = self._waiting, []
            conversations = list({id(c): c for _, _, c in batch}.values())
            error: Optional[BaseException] = None
            try:
                # Every append that ended before these marks is covered by the flush after;
                # the checkpoints a commit would write are written after it. One native call,
                # so this thread takes the GIL back once per round, not once per session.
                marks = self._store.flush_sessions([c.handle for c in conversations])
            except BaseException as e:  # every waiter gets the failure of its sync
                error = e
            with self._lock:
                for _, _, conversation in batch:
                    conversation.unflushed -= 1
            if error is None:
                for conversation, mark in zip(conversations, marks):
                    conversation.durable_through(mark)
            by_loop: dict = {}
            for loop, future, _ in batch:
                by_loop.setdefault(loop, []).append(future)
            for loop, futures in by_loop.items():
                try:
                    loop.call_soon_threadsafe(_settle, futures, error)
                except RuntimeError:  # that loop is closed: nobody waits any more
                    pass

    def close(self) -> None:
        """Finishes the rounds already asked for, then stops the thread."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._wake.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join()


async def _in_thread(fn: Callable, *args: Any) -> Any:
    """``fn(*args)`` on the loop's default executor."""
    return await asyncio.get_running_loop().run_in_executor(None, fn, *args)


class _Conversation:
    """One session's writer, shared by every object of the process that names the same
    store and session id. Each call below is one native call, atomic on the writer, that
    releases the GIL while it works."""

    def __init__(self, store: Store, name: str) -> None:
        self.store = store
        self.name = name
        self.users = 0
        try:
            handle = store.open_session(name)
        except NotFoundError:
            handle = store.create_session(name)
        self.handle: Any = handle
        self.native: Any = handle._native
        #: Appends waiting for a flush, and the seq below which every event is durable
        #: (both changed under the flusher's lock; the seq also after each commit).
        self.unflushed = 0
        self.durable_below = self.native.next_seq()
        self.durable_lock = threading.Lock()
        # the newest items in memory, so the first small get_items needs no read of the log
        self.native.agents_items_json(_PREFETCH_ITEMS)

    def committed(self) -> None:
        """Notes a commit: every event appended so far is durable."""
        self.durable_through(self.native.next_seq())

    def durable_through(self, next_seq: int) -> None:
        """Notes that every event with a seq below ``next_seq`` is durable."""
        with self.durable_lock:
            self.durable_below = max(self.durable_below, next_seq)

    def visible_below(self) -> Optional[int]:
        """The bound a read keeps to while appends wait for a flush (None: no bound), so a
        read shows only durable items."""
        return self.durable_below if self.unflushed else None

    def add(self, items_json: str) -> None:
        self.native.agents_add_items(items_json)
        self.committed()

    def append_now(self, items_json: str) -> bool:
        """Appends the items (not yet durable) if no other call holds the session."""
        return self.native.agents_append_items_now(items_json) is not None

    def read(self, limit: Optional[int]) -> list:
        return json.loads(self.native.agents_items_json(limit, self.visible_below()))

    def read_now(self, limit: Optional[int]) -> Optional[list]:
        """The newest ``limit`` items (all when None) if the writer's memory answers at once
        (no write holds the session, no item must be read from the log, at most
        ``_READ_NOW_ALL`` items), else None. Each item is decoded once and kept; every call
        returns fresh copies, so a caller may change what it gets."""
        return self.native.agents_items_now(limit, _READ_NOW_ALL, self.visible_below())

    def pop(self) -> Any:
        item = self.native.agents_pop_item()
        if item is None:
            return None
        self.committed()  # the pop committed every event appended before it
        return json.loads(item)

    def clear(self) -> None:
        self.native.agents_clear()
        if self.unflushed:  # the clear shadowed those appends, and committed them
            self.committed()

    def compact(self, summarizer: Optional[Callable], keep_recent_fraction: float) -> dict:
        outcome = self.handle.compact(summarizer, keep_recent_fraction=keep_recent_fraction)
        if outcome.get("outcome") != "skipped":  # a compaction that wrote events committed
            self.committed()
        return outcome

    def estimated_tokens(self) -> int:
        return int(self.handle.pressure()["estimated_prompt_tokens"])

    def close(self) -> None:
        self.handle.close()


class _OpenStore:
    def __init__(self, store: Store, temp_dir: Optional[str]) -> None:
        self.store = store
        self.temp_dir = temp_dir
        self.conversations: dict = {}
        self.users = 0
        self.flusher = _Flusher(store)


_registry_lock = threading.Lock()
_stores: dict = {}


def _acquire(key: Optional[str], options: dict, session_id: str):
    """The shared store and conversation for (key, session_id); a key of None is a private
    temporary store."""
    with _registry_lock:
        entry = _stores.get(key) if key is not None else None
        if entry is None:
            temp_dir = None
            path = key
            if key is None:
                temp_dir = tempfile.mkdtemp(prefix="sessionlog-agents-")
                path = os.path.join(temp_dir, "store")
            entry = _OpenStore(Store(path, **options), temp_dir)
            if key is not None:
                _stores[key] = entry
        conversation = entry.conversations.get(session_id)
        if conversation is None:
            conversation = _Conversation(entry.store, session_id)
            entry.conversations[session_id] = conversation
        conversation.users += 1
        entry.users += 1
        return entry, conversation


def _release(key: Optional[str], entry: _OpenStore, conversation: _Conversation) -> None:
    with _registry_lock:
        conversation.users -= 1
        if conversation.users == 0:
            conversation.close()
            entry.conversations.pop(conversation.name, None)
        entry.users -= 1
        if entry.users == 0:
            if key is not None:
                _stores.pop(key, None)
            entry.flusher.close()
            entry.store.close()
            if entry.temp_dir is not None:
                shutil.rmtree(entry.temp_dir, ignore_errors=True)


class SessionlogSession(SessionABC):
    """An Agents SDK session stored in a sessionlog store (see the module docstring).

    The constructor is ``SQLiteSession``'s: ``sessions_table`` and ``messages_table`` are
    accepted for compatibility and unused (a store keeps each conversation as its own
    session). ``session_settings.limit`` is the default ``limit`` of :meth:`get_items`.
    The keyword-only arguments configure :meth:`run_compaction`: ``summarizer`` (a callable
    as for :meth:`sessionlog.SessionHandle.compact`; a deterministic one when None),
    ``context_window`` (tokens; without it only a forced compaction runs),
    ``compaction_trigger_fraction`` and ``keep_recent_fraction``.
    """

    #: Keyword arguments for :class:`sessionlog.Store` when this class opens a store.
    store_options: dict = {}

    session_settings: Optional[SessionSettings] = None

    def __init__(
        self,
        session_id: str,
        db_path: Union[str, Path] = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: Union[SessionSettings, dict, None] = None,
        *,
        summarizer: Optional[Callable[[dict], Union[str, dict]]] = None,
        context_window: Optional[int] = None,
        compaction_trigger_fraction: float = 0.8,
        keep_recent_fraction: float = 0.25,
    ) -> None:
        if session_settings is None:
            settings = SessionSettings()
        elif coerce_session_settings is not None:
            settings = coerce_session_settings(session_settings)
        else:  # pragma: no cover
            settings = session_settings
        self.session_id = session_id
        self.session_settings = settings
        self.db_path = db_path
        self.sessions_table = sessions_table
        self.messages_table = messages_table
        self.summarizer = summarizer
        self.context_window = context_window
        self.compaction_trigger_fraction = compaction_trigger_fraction
        self.keep_recent_fraction = keep_recent_fraction
        #: What the last :meth:`run_compaction` did (``{"outcome": ...}``), None before one.
        self.last_compaction: Optional[dict] = None
        self._key = None if str(db_path) == ":memory:" else os.path.realpath(os.fspath(db_path))
        self._entry, self._conversation = _acquire(self._key, dict(self.store_options), session_id)
        self._closed = False

    @property
    def store(self) -> Store:
        """The store this session lives in."""
        return self._entry.store

    def _check_not_closed(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")

    async def get_items(self, limit: Optional[int] = None) -> list:
        """The latest ``limit`` items (default ``session_settings.limit``; None: all), oldest
        first."""
        self._check_not_closed()
        session_limit = resolve_session_limit(limit, self.session_settings)
        if session_limit is not None and session_limit <= 0:
            if session_limit == 0:
                return []
            session_limit = None  # SQLiteSession's LIMIT semantics: negative is no limit
        # Recent items are usually in the writer's memory: answered on the loop thread in
        # microseconds, cheaper than the hop to a worker thread. Anything that would wait (a
        # write holding the session, a read of the log) goes to a worker.
        items = self._conversation.read_now(session_limit)
        if items is not None:
            return items
        return await _in_thread(self._conversation.read, session_limit)

    async def add_items(self, items: list) -> None:
        """Appends ``items`` as one atomic batch (one turn); durable when this returns."""
        self._check_not_closed()
        if not items:
            return
        items_json = _encode_items(list(items))
        conversation = self._conversation
        # Appending takes microseconds and is done here; the wait for durability is shared
        # with every session of the store adding at the same time (one sync). When another
        # call holds the session, the whole add runs on a worker instead.
        if conversation.append_now(items_json):
            await self._entry.flusher.wait(conversation)
        else:
            await _in_thread(conversation.add, items_json)

    async def pop_item(self) -> Any:
        """Takes back the most recent item and returns it (None when there is none). The item
        stays in the log, shadowed by a surface replacement."""
        self._check_not_closed()
        return await _in_thread(self._conversation.pop)

    async def clear_session(self) -> None:
        """Shadows every item with one surface replacement. The items stay in the log."""
        self._check_not_closed()
        await _in_thread(self._conversation.clear)

    async def run_compaction(self, args: Optional[dict] = None) -> None:
        """Compacts the session through sessionlog's summary compaction (the SDK's
        compaction-aware session protocol; the Runner calls it after each turn).

        With ``args["force"]`` true it compacts now. Otherwise it compacts when the
        estimated tokens of the current items reach ``compaction_trigger_fraction`` of
        ``context_window``, and never when no ``context_window`` was given. A compaction
        shadows the oldest items with one summary message (written by ``summarizer``) and
        keeps the newest ``keep_recent_fraction`` of the estimated tokens verbatim; the
        shadowed items stay in the log. ``response_id``, ``store`` and ``compaction_mode``
        name the OpenAI server-side history, which a local store does not use. The outcome
        is kept in :attr:`last_compaction`.
        """
        self._check_not_closed()
        force = bool(args.get("force", False)) if args else False
        conversation = self._conversation
        if not force:
            if self.context_window is None:
                self.last_compaction = {"outcome": "skipped", "reason": "no_context_window"}
                return
            tokens = await _in_thread(conversation.estimated_tokens)
            if tokens < self.compaction_trigger_fraction * self.context_window:
                self.last_compaction = {"outcome": "skipped", "reason": "below_trigger"}
                return
        self.last_compaction = await _in_thread(
            conversation.compact, self.summarizer, self.keep_recent_fraction
        )

    def close(self) -> None:
        """Releases this object's share of the store (closed with its last user)."""
        if self._closed:
            return
        self._closed = True
        _release(self._key, self._entry, self._conversation)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
