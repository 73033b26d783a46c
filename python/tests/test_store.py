"""The binding: sessions, typed events, errors by class, durability across reopen, raw
streams, DSH import/export, threads and asyncio."""

import asyncio
import json
import threading

import pytest

import sessionlog
from sessionlog import build as b

from conftest import segment_bytes_on_disk, shared_dir

SMALL = 1 << 20  # 1 MiB segments: no test keeps 64 MiB files around


def one_turn(h, text="list the files"):
    h.append(b.turn_start())
    h.append(b.step_start())
    h.append(b.user_message(text))
    h.append(b.assistant_message("deepseek", "deepseek-chat", tool_calls=[("c1", "ls", "{}")]))
    h.append(b.tool_call("c1", "ls", "{}"))
    h.append(b.tool_result("c1", "a.txt b.txt"))
    h.append(b.step_end())
    h.append(b.turn_end())


def test_typed_events_derive_messages_and_survive_reopen(store_path):
    with sessionlog.Store(store_path, segment_bytes=SMALL) as store:
        with store.create_session("s1") as h:
            one_turn(h)
            h.commit()
            assert h.next_seq() == 8
    with sessionlog.Store(store_path, segment_bytes=SMALL) as store:
        messages = store.view("s1").messages
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        assert messages[0]["content"] == [{"type": "text", "text": "list the files"}]
        assert messages[2]["source"] == {"kind": "tool", "callId": "c1"}
        events = store.events("s1")
        assert [e.seq for e in events] == list(range(8))
        assert events[2].type == "user/message"
        assert store.list_sessions() == [("s1", 8)]


def test_raw_envelope_keeps_payload_bytes(store_path):
    with sessionlog.Store(store_path, segment_bytes=SMALL) as store:
        h = store.create_session("s")
        text = '{"b":1,"a":[1.50,"\\u00e9"]}'
        seq = h.append({"type": "x/probe", "data": json.loads(text), "ignorable": True})
        seq2 = h.append(json.dumps({"type": "x/probe", "time": 5, "ignorable": True})[:-1]
                        + ',"data":' + text + "}")
        h.commit()
        ev = store.events_at("s", [seq2, seq])
        assert ev[0].data_json == text  # byte for byte, key order and number spelling kept
        assert ev[0].time == 5 and ev[0].ignorable
        assert ev[1].data == {"b": 1, "a": [1.5, "é"]}


def test_errors_map_to_classes(store_path):
    with sessionlog.Store(store_path, segment_bytes=SMALL) as store:
        h = store.create_session("s")
        with pytest.raises(sessionlog.RefusedError, match="turn"):
            h.append(b.tool_result("nope", "x"))  # no turn open: refused, nothing changed
        assert h.next_seq() == 0
        with pytest.raises(sessionlog.RefusedError):
            store.create_session("s")
        with pytest.raises(sessionlog.BusyError):
            store.open_session("s")
        with pytest.raises(sessionlog.NotFoundError):
            store.view("missing")
        with pytest.raises(sessionlog.NotFoundError):
            store.raw_read("missing")
        for cls in (sessionlog.RefusedError, sessionlog.NotFoundError, sessionlog.BusyError,
                    sessionlog.DamagedError, sessionlog.StorageError):
            assert issubclass(cls, sessionlog.SessionlogError)
        h.close()
        with pytest.raises(sessionlog.StorageError, match="closed"):
            h.append(b.turn_start())
        store.open_session("s").close()  # the slot is free again
    with pytest.raises(sessionlog.StorageError):
        store.session_names()


def test_atomic_batch_is_all_or_nothing(store_path):
    with sessionlog.Store(store_path, segment_bytes=SMALL) as store:
        h = store.create_session("s")
        good = {"type": "x/a", "data": {}, "ignorable": True}
        assert h.append_atomic([good, good]) == [0, 1]
        bad = {"type": "unknown/type", "data": {}}  # not ignorable: refused
        with pytest.raises(sessionlog.RefusedError):
            h.append_atomic([good, bad])
        assert h.next_seq() == 2
        h.commit()
        assert store.event_count("s") == 2
        assert h.append_atomic(['{"type":"x/a","data":{"k":[1.0]},"ignorable":true}'], commit=True) == [2]
        assert store.payloads_at("s", [2, 0]) == ['{"k":[1.0]}', "{}"]
        assert store.payloads_json_at("s", [2, 0]) == '[{"k":[1.0]},{}]'


def test_second_writer_process_is_busy_and_read_only_open_works(store_path):
    with sessionlog.Store(store_path, segment_bytes=SMALL) as store:
        with store.create_session("s") as h:
            one_turn(h)
            h.commit()
        with pytest.raises(sessionlog.BusyError):
            sessionlog.Store(store_path, segment_bytes=SMALL)
        ro = sessionlog.Store(store_path, read_only=True)
        assert ro.read_only and ro.session_names() == ["s"]
        with pytest.raises(sessionlog.SessionlogError):
            ro.create_session("t")
        ro.close()


def test_reclaim_gives_back_deleted_sessions_and_compresses(store_path):
    tiny = 64 << 10  # the smallest segment: many segments, so whole ones can go
    names = [f"s{i:02}" for i in range(40)]
    kept = names[::10]
    with sessionlog.Store(store_path, segment_bytes=tiny) as store:
        for name in names:
            with store.create_session(name) as h:
                for _ in range(6):
                    one_turn(h, "x" * 400)
                h.commit()
        before = segment_bytes_on_disk(store_path)
        for name in names:
            if name not in kept:
                store.delete_session(name)
        report = store.reclaim()
        # The first segment holds the first kept session, so no prefix of segments can go:
        # the space comes back by rewriting the segments without the deleted sessions.
        assert report["segments_removed"] == [] and report["stopped_at"][0] == 1, report
        assert len(report["segments_rewritten"]) > 3, report
        assert report["bytes_freed_by_rewrites"] > 0 and report["segments_compressed"] == []
        after = segment_bytes_on_disk(store_path)
        assert after < before / 2, (before, after, report)
        events = {name: [e.raw for e in store.events(name)] for name in kept}
        assert all(len(e) == 6 * 8 for e in events.values())

    with sessionlog.Store(store_path, segment_bytes=tiny, compression_level=3) as store:
        report = store.reclaim(seal_active=True)
        assert report["segments_compressed"], report
        compressed = segment_bytes_on_disk(store_path)
        assert compressed < after / 2, (after, compressed, report)
        assert {name: [e.raw for e in store.events(name)] for name in kept} == events

    ro = sessionlog.Store(store_path, read_only=True)
    assert ro.session_names() == kept
    assert {name: [e.raw for e in ro.events(name)] for name in kept} == events
    with pytest.raises(sessionlog.SessionlogError):
        ro.reclaim()
    ro.close()
    with pytest.raises(ValueError, match="compression_level"):
        sessionlog.Store(store_path, compression_level=30)


def test_create_false_refuses_a_missing_store(tmp_path):
    with pytest.raises(sessionlog.SessionlogError):
        sessionlog.Store(tmp_path / "absent", create=False)


def test_threads_commit_concurrently_and_everything_is_durable(store_path):
    n_threads, per_thread = 8, 25
    with sessionlog.Store(store_path, segment_bytes=SMALL) as store:
        handles = [store.create_session(f"t{i}") for i in range(n_threads)]
        errors = []

        def work(h):
            try:
                for k in range(per_thread):
                    h.append({"type": "x/n", "data": {"k": k}, "ignorable": True})
                    h.commit()
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=work, args=(h,)) for h in handles]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        for h in handles:
            h.close()
    with sessionlog.Store(store_path, segment_bytes=SMALL) as store:
        for i in range(n_threads):
            assert [e.data["k"] for e in store.events(f"t{i}")] == list(range(per_thread))


def test_async_helpers_run_off_the_loop(store_path):
    async def main():
        with sessionlog.Store(store_path, segment_bytes=SMALL) as store:
            h = store.create_session("a")
            loop_thread = threading.get_ident()
            seen = []
            await h.append_async(b.turn_start())
            # commit_async runs on the executor: the loop keeps serving other tasks meanwhile
            ticker_ran = asyncio.Event()

            async def ticker():
                seen.append(threading.get_ident())
                ticker_ran.set()

            await asyncio.gather(h.commit_async(), ticker())
            assert ticker_ran.is_set() and seen == [loop_thread]
            assert (await store.view_async("a")).messages == []
            h.close()
            assert store.event_count("a") == 1

    asyncio.run(main())


def test_raw_streams_are_apart_from_sessions(store_path):
    with sessionlog.Store(store_path, segment_bytes=SMALL) as store:
        assert store.raw_append("r", [b"one", b"\x00two"]) == [0, 1]
        assert store.raw_append("r", [b"three"], durable=False) == [2]
        assert store.raw_read("r", 1) == [(1, b"\x00two"), (2, b"three")]
        assert store.raw_stream_names() == ["r"]
        assert store.session_names() == []
        store.create_session("s").close()
        with pytest.raises(sessionlog.RefusedError):
            store.raw_append("s", [b"x"])


def compact_six_turns(store):
    """Session "c" with six committed turns, compacted with a fixed summary: the open
    handle, the summarizer's requests and the event count before the compaction."""
    h = store.create_session("c")
    for i in range(6):
        one_turn(h, f"question {i} " + "words " * 40)
    h.commit()
    before = store.event_count("c")
    requests = []

    def summarize(request):
        requests.append(request)
        return {"text": "short summary", "provider": "test", "model": "summarizer"}

    out = h.compact(summarize, keep_recent_fraction=0.2)
    assert out["outcome"] == "compacted", out
    return h, requests, before


def test_compaction_shadows_and_keeps_originals(store_path):
    with sessionlog.Store(store_path, segment_bytes=SMALL) as store:
        h, requests, before = compact_six_turns(store)
        assert requests and requests[0]["messages"][0]["role"] == "user"
        messages = store.view("c").messages
        assert "short summary" in json.dumps(messages[0])
        assert len(messages) < 18
        # the shadowed events are still in the log, unchanged
        assert store.event_count("c") > before
        assert store.events("c", 2, 3)[0].data["content"][0]["text"].startswith("question 0")
        h.close()


def test_compaction_is_the_same_whatever_the_handles_keep_in_memory(tmp_path):
    # kept_events_bytes=0: nothing a handle appended is kept, every look-back reads the log.
    seen = {}
    for kept in (None, 0):
        with sessionlog.Store(tmp_path / f"kept-{kept}", segment_bytes=SMALL,
                              kept_events_bytes=kept) as store:
            h, requests, _ = compact_six_turns(store)
            h.close()
            seen[kept] = (requests[0]["messages"], store.view("c").messages)
    assert seen[None] == seen[0]
    assert len(seen[0][0]) > 3
    with pytest.raises((OverflowError, TypeError, ValueError)):
        sessionlog.Store(tmp_path / "negative", kept_events_bytes=-1)


def test_dsh_fixture_round_trips(store_path):
    corpus = shared_dir() / "fixtures" / "dsh"
    if not (corpus / "golden").is_dir():
        pytest.skip("the DSH fixture corpus is not beside the repository")
    files = []
    for golden in sorted((corpus / "golden").rglob("*.golden.json")):
        g = json.loads(golden.read_text())
        if g.get("error") is None and g.get("repackIdentical") and not g.get("tailDiscarded"):
            rel = str(golden.relative_to(corpus / "golden"))[: -len(".golden.json")]
            files.append(corpus / "logs" / rel)
    files = files[:8]
    assert files, "no clean, repack-identical log in the corpus"
    with sessionlog.Store(store_path, segment_bytes=SMALL) as store:
        for i, f in enumerate(files):
            name, events = store.import_dsh(f, name=f"imp{i}")
            assert name == f"imp{i}" and store.event_count(name) == events
            assert store.export_dsh(name) == f.read_bytes()
