"""A LangGraph checkpointer on a sessionlog store.

``SessionlogSaver(path)`` opens (or creates) a store at ``path`` and keeps each LangGraph
thread as a raw stream of that store named ``langgraph/<thread_id>``. Every mutation is one
durable, atomic record batch of that stream: a checkpoint with the channel blobs it brings, a
task's pending writes, a deletion of some checkpoints, so the stream is the thread's history
and the saver's state is a fold of it. Opening the saver replays the streams. Deleting a
thread deletes its stream, so ``saver.store.reclaim()`` gives its space back; checkpoints
dropped from a thread that stays (``delete_for_runs``, ``prune``) stay in the log until the
thread is deleted.

Values go through ``self.serde`` (LangGraph's typed serializer) and are stored as its bytes.
Sync and async methods are both provided; the async ones run the sync ones on a worker
thread, so the event loop never waits on an fsync.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import random
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Optional, Union

from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)

try:
    from langgraph.checkpoint.base import writes_sort_key
except ImportError:  # pragma: no cover - older langgraph-checkpoint

    def writes_sort_key(task_path: str, task_id: str = "", idx: int = 0):
        return (task_path, task_id, idx)


from . import Store

__all__ = ["SessionlogSaver", "STREAM_PREFIX"]

#: Raw-stream name prefix of the threads.
STREAM_PREFIX = "langgraph/"

Typed = tuple  # (type name, bytes) as the serializer's dumps_typed returns


def _enc_typed(t: Typed) -> list:
    return [t[0], base64.b64encode(t[1]).decode("ascii")]


def _dec_typed(v: list) -> Typed:
    return (v[0], base64.b64decode(v[1]))


class _Thread:
    """The folded state of one thread."""

    def __init__(self) -> None:
        # ns -> checkpoint id -> (checkpoint, metadata, parent id, run id)
        self.checkpoints: dict = {}
        # (ns, checkpoint id) -> (task id, idx) -> (task id, channel, value, task path)
        self.writes: dict = {}
        # (ns, channel, version) -> typed value
        self.blobs: dict = {}

    def apply(self, op: dict) -> None:
        kind = op["op"]
        if kind == "put":
            ns = op["ns"]
            for channel, version, typed in op["blobs"]:
                self.blobs[(ns, channel, _version(version))] = _dec_typed(typed)
            self.checkpoints.setdefault(ns, {})[op["id"]] = (
                _dec_typed(op["c"]),
                _dec_typed(op["m"]),
                op["parent"],
                op.get("run_id"),
            )
        elif kind == "writes":
            key = (op["ns"], op["id"])
            stored = self.writes.setdefault(key, {})
            for idx, channel, typed in op["writes"]:
                inner = (op["task_id"], idx)
                if idx >= 0 and inner in stored:
                    continue  # a regular write is stored once; special channels overwrite
                stored[inner] = (op["task_id"], channel, _dec_typed(typed), op["task_path"])
        elif kind == "drop":
            for ns, checkpoint_id in op["checkpoints"]:
                self.checkpoints.get(ns, {}).pop(checkpoint_id, None)
                self.writes.pop((ns, checkpoint_id), None)
            for ns in [ns for ns, cps in self.checkpoints.items() if not cps]:
                del self.checkpoints[ns]
        elif kind == "delete":
            # Written by builds before a deleted thread's stream was deleted instead.
            self.checkpoints.clear()
            self.writes.clear()
            self.blobs.clear()
        else:
            raise ValueError(f"unknown langgraph record {kind!r}; a newer sessionlog wrote it")

    def empty(self) -> bool:
        return not self.checkpoints


def _version(v: Any) -> Any:
    return tuple(v) if isinstance(v, list) else v


def _encode(op: dict) -> bytes:
    return json.dumps(op, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class SessionlogSaver(BaseCheckpointSaver[str]):
    """A LangGraph ``BaseCheckpointSaver`` keeping threads in a sessionlog store.

    ``path`` is the store directory (created if missing); ``store=`` uses an open
    :class:`sessionlog.Store` instead. Other keyword arguments go to :class:`sessionlog.Store`
    (for example ``segment_bytes``). Every ``put``, ``put_writes``, delete, copy and prune is
    durable when it returns.
    """

    def __init__(
        self,
        path: Union[str, os.PathLike, None] = None,
        *,
        store: Optional[Store] = None,
        serde: Any = None,
        **store_options: Any,
    ) -> None:
        super().__init__(serde=serde)
        if (path is None) == (store is None):
            raise TypeError("SessionlogSaver takes a store path or store=, not both")
        self._owns_store = store is None
        self.store = store if store is not None else Store(path, **store_options)
        # Guards the folded state; held only for short in-memory work, never across I/O.
        self._lock = threading.Lock()
        # One lock per graph thread, held across its durable append and fold, so its records
        # are folded in log order while appends of different threads share a group commit.
        self._writer_locks: dict = {}
        self._threads: dict = {}
        self._load()

    # -- the log ---------------------------------------------------------------------------

    def _load(self) -> None:
        for name in self.store.raw_stream_names():
            if not name.startswith(STREAM_PREFIX):
                continue
            thread = _Thread()
            for _, payload in self.store.raw_read(name):
                thread.apply(json.loads(payload))
            if not thread.empty():
                self._threads[name[len(STREAM_PREFIX) :]] = thread

    def _writer_lock(self, thread_id: str) -> threading.Lock:
        with self._lock:
            return self._writer_locks.setdefault(thread_id, threading.Lock())

    def _log(self, thread_id: str, ops: list) -> None:
        """Writes `ops` to the thread's stream as one durable batch, then folds them. Called
        without `self._lock` held: the fsync must not hold up other threads."""
        if not ops:
            return
        payloads = [_encode(op) for op in ops]
        with self._writer_lock(thread_id):
            self.store.raw_append(STREAM_PREFIX + thread_id, payloads)
            with self._lock:
                thread = self._threads.setdefault(thread_id, _Thread())
                for op in ops:
                    thread.apply(op)
                if thread.empty():
                    self._threads.pop(thread_id, None)

    # -- reading ---------------------------------------------------------------------------

    def _tuple(self, thread_id: str, ns: str, checkpoint_id: str, thread: _Thread) -> CheckpointTuple:
        typed_c, typed_m, parent, _ = thread.checkpoints[ns][checkpoint_id]
        checkpoint = self.serde.loads_typed(typed_c)
        values = {}
        for channel, version in checkpoint.get("channel_versions", {}).items():
            typed = thread.blobs.get((ns, channel, _version(version)))
            if typed is not None and typed[0] != "empty":
                values[channel] = self.serde.loads_typed(typed)
        stored = thread.writes.get((ns, checkpoint_id), {})
        ordered = sorted(stored.items(), key=lambda kv: writes_sort_key(kv[1][3], kv[0][0], kv[0][1]))
        return CheckpointTuple(
            config={
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": checkpoint_id,
                }
            },
            checkpoint={**checkpoint, "channel_values": values},
            metadata=self.serde.loads_typed(typed_m),
            parent_config=(
                {
                    "configurable": {
                        "thread_id": thread_id,
                        "checkpoint_ns": ns,
                        "checkpoint_id": parent,
                    }
                }
                if parent
                else None
            ),
            pending_writes=[(t, c, self.serde.loads_typed(v)) for t, c, v, _ in (w for _, w in ordered)],
        )

    def get_tuple(self, config: dict) -> Optional[CheckpointTuple]:
        """The checkpoint ``config`` names (its ``checkpoint_id``), or the thread's latest in
        the namespace."""
        conf = config["configurable"]
        thread_id = str(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        with self._lock:
            thread = self._threads.get(thread_id)
            if thread is None or not thread.checkpoints.get(ns):
                return None
            checkpoint_id = get_checkpoint_id(config)
            if checkpoint_id is None:
                checkpoint_id = max(thread.checkpoints[ns])
            elif checkpoint_id not in thread.checkpoints[ns]:
                return None
            return self._tuple(thread_id, ns, checkpoint_id, thread)

    def list(
        self,
        config: Optional[dict],
        *,
        filter: Optional[dict] = None,
        before: Optional[dict] = None,
        limit: Optional[int] = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first per namespace, of one thread (``config``) or all,
        matching ``filter`` on metadata, older than ``before``, at most ``limit``."""
        conf = config["configurable"] if config else {}
        want_ns = conf.get("checkpoint_ns")
        want_id = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        out = []
        with self._lock:
            if config:
                tid = str(conf["thread_id"])
                threads = [(tid, self._threads[tid])] if tid in self._threads else []
            else:
                threads = list(self._threads.items())
            for thread_id, thread in threads:
                for ns, checkpoints in thread.checkpoints.items():
                    if want_ns is not None and ns != want_ns:
                        continue
                    for checkpoint_id in sorted(checkpoints, reverse=True):
                        if want_id and checkpoint_id != want_id:
                            continue
                        if before_id and checkpoint_id >= before_id:
                            continue
                        if filter:
                            metadata = self.serde.loads_typed(checkpoints[checkpoint_id][1])
                            if not all(metadata.get(k) == v for k, v in filter.items()):
                                continue
                        if limit is not None and len(out) >= limit:
                            return iter(out)
                        out.append(self._tuple(thread_id, ns, checkpoint_id, thread))
        return iter(out)

    # -- writing ---------------------------------------------------------------------------

    def put(
        self,
        config: dict,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> dict:
        """Stores a checkpoint and the blobs of the channels ``new_versions`` names."""
        conf = config["configurable"]
        thread_id = str(conf["thread_id"])
        ns = conf.get("checkpoint_ns", "")
        bare = dict(checkpoint)
        values = bare.pop("channel_values", {}) or {}
        blobs = [
            [
                channel,
                version,
                _enc_typed(self.serde.dumps_typed(values[channel]) if channel in values else ("empty", b"")),
            ]
            for channel, version in new_versions.items()
        ]
        full_metadata = get_checkpoint_metadata(config, metadata)
        op = {
            "op": "put",
            "ns": ns,
            "id": checkpoint["id"],
            "parent": conf.get("checkpoint_id"),
            "run_id": full_metadata.get("run_id") if isinstance(full_metadata, dict) else None,
            "c": _enc_typed(self.serde.dumps_typed(bare)),
            "m": _enc_typed(self.serde.dumps_typed(full_metadata)),
            "blobs": blobs,
        }
        if op["run_id"] is not None and not isinstance(op["run_id"], (str, int, float)):
            op["run_id"] = str(op["run_id"])
        self._log(thread_id, [op])
        return {
            "configurable": {
                "thread_id": conf["thread_id"],
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    def put_writes(
        self,
        config: dict,
        writes: Sequence[tuple],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Stores a task's pending writes for the checkpoint ``config`` names."""
        conf = config["configurable"]
        op = {
            "op": "writes",
            "ns": conf.get("checkpoint_ns", ""),
            "id": conf["checkpoint_id"],
            "task_id": task_id,
            "task_path": task_path,
            "writes": [
                [WRITES_IDX_MAP.get(channel, idx), channel, _enc_typed(self.serde.dumps_typed(value))]
                for idx, (channel, value) in enumerate(writes)
            ],
        }
        self._log(str(conf["thread_id"]), [op])

    def delete_thread(self, thread_id: str) -> None:
        """Deletes every checkpoint and write of the thread: its stream is deleted, durably,
        and :meth:`sessionlog.Store.reclaim` gives its space back."""
        thread_id = str(thread_id)
        with self._writer_lock(thread_id):
            # The stream goes whenever it exists, even when it folds to no checkpoint (only
            # pending writes, or every checkpoint dropped): its records are dead either way.
            self.store.raw_delete(STREAM_PREFIX + thread_id)
            with self._lock:
                self._threads.pop(thread_id, None)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Deletes the checkpoints (and their writes) whose metadata names one of
        ``run_ids``."""
        wanted = {str(r) for r in run_ids}
        if not wanted:
            return
        batches = []
        with self._lock:
            for thread_id, thread in self._threads.items():
                doomed = [
                    [ns, cid]
                    for ns, cps in thread.checkpoints.items()
                    for cid, entry in cps.items()
                    if entry[3] is not None and str(entry[3]) in wanted
                ]
                if doomed:
                    batches.append((thread_id, [{"op": "drop", "checkpoints": doomed}]))
        for thread_id, ops in batches:
            self._log(thread_id, ops)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copies every checkpoint (the whole parent chain), blob and write of a thread to
        another, as one batch."""
        source, target = str(source_thread_id), str(target_thread_id)
        with self._lock:
            thread = self._threads.get(source)
            if thread is None:
                return
            ops = []
            for ns, cps in thread.checkpoints.items():
                for cid in sorted(cps):
                    typed_c, typed_m, parent, run_id = cps[cid]
                    versions = self.serde.loads_typed(typed_c).get("channel_versions", {})
                    blobs = [
                        [channel, version, _enc_typed(thread.blobs[(ns, channel, _version(version))])]
                        for channel, version in versions.items()
                        if (ns, channel, _version(version)) in thread.blobs
                    ]
                    ops.append(
                        {
                            "op": "put",
                            "ns": ns,
                            "id": cid,
                            "parent": parent,
                            "run_id": run_id,
                            "c": _enc_typed(typed_c),
                            "m": _enc_typed(typed_m),
                            "blobs": blobs,
                        }
                    )
                    for (task_id, idx), (_, channel, typed, task_path) in thread.writes.get(
                        (ns, cid), {}
                    ).items():
                        ops.append(
                            {
                                "op": "writes",
                                "ns": ns,
                                "id": cid,
                                "task_id": task_id,
                                "task_path": task_path,
                                "writes": [[idx, channel, _enc_typed(typed)]],
                            }
                        )
        self._log(target, ops)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest`` keeps each namespace's newest checkpoint (with its writes);
        ``delete`` deletes the threads (as :meth:`delete_thread` does)."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
        if strategy == "delete":
            for thread_id in thread_ids:
                self.delete_thread(thread_id)
            return
        batches = []
        with self._lock:
            for thread_id in (str(t) for t in thread_ids):
                thread = self._threads.get(thread_id)
                if thread is None:
                    continue
                doomed = [
                    [ns, cid]
                    for ns, cps in thread.checkpoints.items()
                    for cid in cps
                    if cid != max(cps)
                ]
                if doomed:
                    batches.append((thread_id, [{"op": "drop", "checkpoints": doomed}]))
        for thread_id, ops in batches:
            self._log(thread_id, ops)

    def get_next_version(self, current: Optional[str], channel: Any = None) -> str:
        """Versions that sort as strings: a zero-padded counter and a random tail."""
        if current is None:
            counter = 0
        elif isinstance(current, int):
            counter = current
        else:
            counter = int(str(current).split(".")[0])
        return f"{counter + 1:032}.{random.random():016}"

    def close(self) -> None:
        """Closes the store if this saver opened it."""
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> "SessionlogSaver":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- async twins: the sync calls on a worker thread ----------------------------------------

    async def aget_tuple(self, config: dict) -> Optional[CheckpointTuple]:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: Optional[dict],
        *,
        filter: Optional[dict] = None,
        before: Optional[dict] = None,
        limit: Optional[int] = None,
    ) -> AsyncIterator[CheckpointTuple]:
        items = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in items:
            yield item

    async def aput(
        self,
        config: dict,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> dict:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: dict, writes: Sequence[tuple], task_id: str, task_path: str = ""
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)
