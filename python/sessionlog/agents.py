"""An OpenAI Agents SDK ``Session`` on a sessionlog store.

``SessionlogSession(session_id, db_path)`` takes the place of ``agents.SQLiteSession``: same
constructor, same behaviour, durable on return from every mutation. ``db_path`` is a store
directory (created if missing); ``":memory:"`` gives a private store in a temporary directory
that is removed when the session is closed.

Storage: the conversation is the sessionlog session named ``session_id``. Each item is one
``openai-agents/item`` event whose payload is the item's JSON. Nothing is ever deleted:
``pop_item`` appends an ``openai-agents/pop`` event naming the item it takes back, and
``clear_session`` an ``openai-agents/clear`` event shadowing every item before it, so the
log keeps the full history and the current item list is derived from it. The events are
marked ignorable, so every sessionlog reader (CLI, DSH export) carries them along.

Several ``SessionlogSession`` objects of one process on the same ``db_path`` share one open
store; objects with the same ``session_id`` share one writer and one item index, so
``get_items(limit=N)`` reads only the N newest items from the log.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any, Optional, Union

from agents.memory.session import SessionABC
from agents.memory.session_settings import SessionSettings, resolve_session_limit

try:  # the SDK's own settings coercion (dicts, unknown keys refused)
    from agents.memory.session_settings import coerce_session_settings
except ImportError:  # pragma: no cover - older SDKs
    coerce_session_settings = None

from . import NotFoundError, SessionHandle, Store

ITEM = "openai-agents/item"
POP = "openai-agents/pop"
CLEAR = "openai-agents/clear"

__all__ = ["SessionlogSession", "ITEM", "POP", "CLEAR"]


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class _Conversation:
    """One session's writer and its live item index, shared by every object of the process
    that names the same store and session id."""

    def __init__(self, store: Store, name: str) -> None:
        self.store = store
        self.name = name
        self.lock = threading.Lock()
        self.handle: Optional[SessionHandle] = None
        self.live: list = []  # event seqs of the current items, oldest first
        self.users = 0
        try:
            self.handle = store.open_session(name)
        except NotFoundError:
            self.handle = store.create_session(name)
        self._index()

    def _index(self) -> None:
        live: list = []
        for event in self.store.events(self.name):
            kind = event.type
            if kind == ITEM:
                live.append(event.seq)
            elif kind == POP:
                seq = event.data.get("seq")
                if live and live[-1] == seq:
                    live.pop()
                elif seq in live:
                    live.remove(seq)
            elif kind == CLEAR:
                through = event.data.get("through", -1)
                live = [s for s in live if s > through]
        self.live = live

    def _append(self, envelopes: list) -> list:
        assert self.handle is not None
        return self.handle.append_atomic(envelopes, commit=True)

    def add(self, items: list) -> None:
        envelopes = [
            '{"type":"%s","data":%s,"ignorable":true}' % (ITEM, _dumps(item)) for item in items
        ]
        with self.lock:
            self.live.extend(self._append(envelopes))

    def read(self, limit: Optional[int]) -> list:
        with self.lock:
            if limit is None:
                seqs = list(self.live)
            elif limit > 0:
                seqs = self.live[-limit:]
            elif limit == 0:
                seqs = []
            else:  # SQLiteSession's historical LIMIT semantics: a negative limit is no limit
                seqs = list(self.live)
            text = self.store.payloads_json_at(self.name, seqs)
        return json.loads(text)

    def pop(self) -> Any:
        with self.lock:
            if not self.live:
                return None
            seq = self.live[-1]
            (payload,) = self.store.payloads_at(self.name, [seq])
            self._append([{"type": POP, "data": {"seq": seq}, "ignorable": True}])
            self.live.pop()
            return json.loads(payload)

    def clear(self) -> None:
        with self.lock:
            if not self.live:
                return
            self._append([{"type": CLEAR, "data": {"through": self.live[-1]}, "ignorable": True}])
            self.live = []

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


class _OpenStore:
    def __init__(self, store: Store, temp_dir: Optional[str]) -> None:
        self.store = store
        self.temp_dir = temp_dir
        self.conversations: dict = {}
        self.users = 0


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
            entry.store.close()
            if entry.temp_dir is not None:
                shutil.rmtree(entry.temp_dir, ignore_errors=True)


class SessionlogSession(SessionABC):
    """An Agents SDK session stored in a sessionlog store (see the module docstring).

    The constructor is ``SQLiteSession``'s: ``sessions_table`` and ``messages_table`` are
    accepted for compatibility and unused (a store keeps each conversation as its own
    session). ``session_settings.limit`` is the default ``limit`` of :meth:`get_items`.
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
        return await asyncio.to_thread(self._conversation.read, session_limit)

    async def add_items(self, items: list) -> None:
        """Appends ``items`` as one atomic batch; durable when this returns."""
        self._check_not_closed()
        if not items:
            return
        await asyncio.to_thread(self._conversation.add, list(items))

    async def pop_item(self) -> Any:
        """Takes back the most recent item and returns it (None when there is none). The item
        stays in the log, shadowed by a pop event."""
        self._check_not_closed()
        return await asyncio.to_thread(self._conversation.pop)

    async def clear_session(self) -> None:
        """Shadows every item. The items stay in the log."""
        self._check_not_closed()
        await asyncio.to_thread(self._conversation.clear)

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
