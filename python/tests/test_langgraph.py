"""sessionlog.langgraph.SessionlogSaver: LangGraph's checkpointer conformance suite (every
base and optional capability), and a reopen that rebuilds the saver from the log."""

import asyncio
import shutil
import tempfile

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.base import empty_checkpoint  # noqa: E402
from langgraph.checkpoint.conformance import checkpointer_test, validate  # noqa: E402

import sessionlog  # noqa: E402
from sessionlog.langgraph import SessionlogSaver  # noqa: E402

from conftest import segment_bytes_on_disk  # noqa: E402


@checkpointer_test(name="SessionlogSaver")
async def sessionlog_saver():
    directory = tempfile.mkdtemp(prefix="sessionlog-langgraph-")
    saver = SessionlogSaver(f"{directory}/store", segment_bytes=1 << 20)
    try:
        yield saver
    finally:
        saver.close()
        shutil.rmtree(directory, ignore_errors=True)


def test_conformance_passes_all_capabilities():
    report = asyncio.run(validate(sessionlog_saver))
    report.print_report()
    assert report.passed_all_base()
    assert report.passed_all(), "an optional capability failed"
    # every capability, the optional ones too, was detected and its tests ran and passed
    assert len(report.results) == 8
    for name, result in report.results.items():
        assert result.detected and result.passed is True, name
        assert result.tests_passed > 0 and result.tests_failed == 0, name
    total = sum(r.tests_passed for r in report.results.values())
    print(f"conformance: {total} tests passed")


def test_reopen_rebuilds_threads_from_the_log(tmp_path):
    path = tmp_path / "store"
    config = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    with SessionlogSaver(path, segment_bytes=1 << 20) as saver:
        c1 = empty_checkpoint()
        c1["channel_values"] = {"messages": ["hello"]}
        v = saver.get_next_version(None)
        c1["channel_versions"] = {"messages": v}
        stored = saver.put(config, c1, {"step": 0, "source": "input"}, {"messages": v})
        saver.put_writes(stored, [("messages", "pending")], task_id="task-1")
        saver.delete_thread("gone")  # nothing to delete: no record written
        other = {"configurable": {"thread_id": "t2", "checkpoint_ns": ""}}
        saver.put(other, empty_checkpoint(), {"step": 0}, {})
        saver.delete_thread("t2")
    with SessionlogSaver(path, segment_bytes=1 << 20) as saver:
        tup = saver.get_tuple(config)
        assert tup is not None
        assert tup.checkpoint["id"] == c1["id"]
        assert tup.checkpoint["channel_values"] == {"messages": ["hello"]}
        assert tup.metadata["step"] == 0
        assert tup.pending_writes == [("task-1", "messages", "pending")]
        assert saver.get_tuple({"configurable": {"thread_id": "t2"}}) is None
        assert [t.config["configurable"]["thread_id"] for t in saver.list(None)] == ["t1"]
        # the deleted thread's stream is gone, so reclaim can give its records' space back
        assert saver.store.raw_stream_names() == ["langgraph/t1"]
        with pytest.raises(sessionlog.NotFoundError):
            saver.store.raw_read("langgraph/t2")


def test_a_tombstone_written_before_streams_were_deleted_still_deletes(tmp_path):
    path = tmp_path / "store"
    config = {"configurable": {"thread_id": "old", "checkpoint_ns": ""}}
    with SessionlogSaver(path, segment_bytes=1 << 20) as saver:
        saver.put(config, empty_checkpoint(), {"step": 0}, {})
        saver._log("old", [{"op": "delete"}])  # what delete_thread used to write
        assert saver.get_tuple(config) is None
    with SessionlogSaver(path, segment_bytes=1 << 20) as saver:
        assert saver.get_tuple(config) is None
        assert list(saver.list(None)) == []


def test_deleted_threads_space_comes_back_with_reclaim(tmp_path):
    path = tmp_path / "store"
    threads = [f"t{i:02}" for i in range(40)]
    kept = threads[::8]

    def config(t):
        return {"configurable": {"thread_id": t, "checkpoint_ns": ""}}

    with SessionlogSaver(path, segment_bytes=64 << 10) as saver:
        for t in threads:
            for step in range(5):
                c = empty_checkpoint()
                c["channel_values"] = {"messages": ["x" * 2000, step]}
                v = saver.get_next_version(None)
                c["channel_versions"] = {"messages": v}
                saver.put(config(t), c, {"step": step}, {"messages": v})
        before = segment_bytes_on_disk(path)
        for t in threads:
            if t not in kept:
                saver.delete_thread(t)
        report = saver.store.reclaim()
        assert report["segments_removed"] or report["segments_rewritten"], report
        after = segment_bytes_on_disk(path)
        assert after < before / 2, (before, after, report)
        latest = {t: saver.get_tuple(config(t)).checkpoint for t in kept}
    with SessionlogSaver(path, segment_bytes=64 << 10) as saver:
        listed = sorted({t.config["configurable"]["thread_id"] for t in saver.list(None)})
        assert listed == kept
        for t in kept:
            assert saver.get_tuple(config(t)).checkpoint == latest[t]
            assert saver.get_tuple(config(t)).checkpoint["channel_values"]["messages"][1] == 4
