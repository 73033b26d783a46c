"""sessionlog.agents.SessionlogSession: the Agents SDK Session protocol on a store, items as
surface events, pop and clear as surface replacements (the log keeping what they take back,
the view and a DSH export agreeing with get_items), run_compaction through sessionlog's
compaction, and an end-to-end Runner.run over several turns with tool calls, driven offline
by the SDK's ScriptedModel."""

import asyncio
import copy
import json
import subprocess
import sys
import time

import pytest

agents = pytest.importorskip("agents")

from agents import Agent, Runner, SessionSettings, function_tool  # noqa: E402
from agents.memory.session import SessionABC  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

import sessionlog  # noqa: E402
from sessionlog.agents import SessionlogSession  # noqa: E402


class SmallSession(SessionlogSession):
    store_options = {"segment_bytes": 1 << 20}


def user(text):
    return {"role": "user", "content": text}


def items_of_view(store, name):
    """The items the derived model messages stand for (each message's source.item), or the
    message itself where it holds none."""
    return [m.get("source", {}).get("item", m) for m in store.view(name).messages]


def test_protocol_and_history_kept_in_the_log(tmp_path):
    async def main():
        path = tmp_path / "agents"
        s = SmallSession("conv", path)
        assert isinstance(s, SessionABC)
        await s.add_items([user("a"), user("b"), user("c")])
        assert await s.get_items(limit=2) == [user("b"), user("c")]
        assert await s.pop_item() == user("c")
        await s.add_items([user("d")])
        assert await s.get_items() == [user("a"), user("b"), user("d")]
        await s.clear_session()
        assert await s.get_items() == []
        assert await s.pop_item() is None
        await s.add_items([user("e")])
        events = s.store.events("conv")
        # every item is a surface event, and pop and clear are replacements citing what
        # they shadow
        items = [e for e in events if e.type == "user/message"]
        assert [json.loads(e.data_json)["source"]["item"] for e in items] == [
            user(x) for x in "abcde"
        ]
        shadows = [e for e in events if json.loads(e.raw).get("surfaceOp", "append") != "append"]
        ops = [(json.loads(e.data_json)["sessionOp"], e.source_event_seqs) for e in shadows]
        seq = {json.loads(e.data_json)["source"]["item"]["content"]: e.seq for e in items}
        assert ops[0] == ("pop_item", [seq["c"]])
        assert ops[1][0] == "clear_session"
        assert {seq["a"], seq["b"], seq["d"]} <= set(ops[1][1])
        s.close()
        # a new process-level open resumes the surface from the log
        s2 = SmallSession("conv", path)
        assert await s2.get_items() == [user("e")]
        s2.close()

    asyncio.run(main())


def test_view_and_dsh_export_agree_with_get_items_after_pop_and_clear(tmp_path):
    async def main():
        path = tmp_path / "agents"
        s = SmallSession("agree", path)
        call = {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}
        out = {"type": "function_call_output", "call_id": "c1", "output": "42"}
        reply = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "it is 42", "annotations": []}],
        }
        await s.add_items([user("q"), call, out, reply])
        await s.add_items([user("extra")])
        assert await s.pop_item() == user("extra")
        expected = [user("q"), call, out, reply]
        assert await s.get_items() == expected
        store = s.store
        assert items_of_view(store, "agree") == expected
        roles = [m["role"] for m in store.view("agree").messages]
        assert roles == ["user", "assistant", "user", "assistant"]
        # a DSH export carries the replacement: imported elsewhere, it derives the same items
        with sessionlog.Store(tmp_path / "other", segment_bytes=1 << 20) as other:
            other.import_dsh(store.export_dsh("agree"), name="copy")
            assert items_of_view(other, "copy") == expected
        await s.clear_session()
        assert await s.get_items() == [] and store.view("agree").messages == []
        with sessionlog.Store(tmp_path / "other2", segment_bytes=1 << 20) as other:
            other.import_dsh(store.export_dsh("agree"), name="copy")
            assert other.view("copy").messages == []
        s.close()

    asyncio.run(main())


def test_items_keep_their_exact_json_and_refuse_what_json_cannot_hold(tmp_path):
    async def main():
        s = SmallSession("exact", tmp_path / "agents")
        odd = {"z": 1, "a": [1.5, None, True, "\u2028 é"], "role": "user", "content": []}
        await s.add_items([odd])
        assert await s.get_items() == [odd]
        assert list((await s.get_items())[0]) == ["z", "a", "role", "content"]
        with pytest.raises(sessionlog.RefusedError):
            await s.add_items([user("ok"), {"role": "user", "content": float("nan")}])
        # the refused batch left nothing behind
        assert await s.get_items() == [odd]
        s.close()

    asyncio.run(main())


def test_items_are_encoded_as_json_encoder_encodes_them():
    from sessionlog import agents as module

    encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
    odd = [
        {"z": 1, "a": [1.5, None, True, "\u2028 é \n \"q\""], 2: (3, 4), "big": 10**30},
        user("x"),
        {"nested": {"deep": [{"k": -0.0}, float("inf")]}},
    ]
    assert module._encode_items(odd) == encoder.encode(odd)
    circular = {"role": "user"}
    circular["self"] = circular
    with pytest.raises(ValueError, match="Circular"):
        module._encode_items([circular])
    with pytest.raises(TypeError):
        module._encode_items([{"role": "user", "content": object()}])
    # a failed call leaves nothing behind for the next
    assert module._encode_items([user("y")]) == encoder.encode([user("y")])


def test_run_compaction_summarizes_old_items_through_sessionlog(tmp_path):
    async def main():
        seen = []

        def summarizer(request):
            seen.append(len(request["messages"]))
            return "the user counted"

        s = SmallSession("compact", tmp_path / "agents", summarizer=summarizer, context_window=100_000)
        for i in range(20):
            await s.add_items([user(f"count {i}: " + "word " * 40)])
        # below the trigger: nothing changes
        await s.run_compaction({"response_id": "r1"})
        assert s.last_compaction == {"outcome": "skipped", "reason": "below_trigger"}
        assert len(await s.get_items()) == 20
        await s.run_compaction({"response_id": "r1", "force": True})
        assert s.last_compaction["outcome"] == "compacted", s.last_compaction
        items = await s.get_items()
        assert seen and seen[0] == len(s.last_compaction["shadowed"])
        summary, kept = items[0], items[1:]
        assert summary["role"] == "user" and "the user counted" in summary["content"]
        assert kept == [user(f"count {i}: " + "word " * 40) for i in range(20 - len(kept), 20)]
        assert 0 < len(kept) < 20
        # the view agrees, and the shadowed items are still in the log
        assert len(s.store.view("compact").messages) == len(items)
        logged = [e for e in s.store.events("compact") if e.type == "user/message"]
        assert len(logged) == 21
        # the trigger: a small window makes the same session compact on its own
        s.context_window = 100
        await s.add_items([user("more " * 50)])
        await s.run_compaction({"response_id": "r2"})
        assert s.last_compaction["outcome"] == "compacted"
        s.close()

    asyncio.run(main())


def test_run_compaction_without_a_window_runs_only_when_forced(tmp_path):
    async def main():
        s = SmallSession("noforce", tmp_path / "agents")
        for i in range(10):
            await s.add_items([user("x " * 100)])
        await s.run_compaction()
        assert s.last_compaction["reason"] == "no_context_window"
        assert len(await s.get_items()) == 10
        await s.run_compaction({"force": True})
        assert s.last_compaction["outcome"] == "compacted"
        assert len(await s.get_items()) < 10
        s.close()

    asyncio.run(main())


def test_objects_share_one_writer_and_separate_conversations(tmp_path):
    async def main():
        path = tmp_path / "agents"
        a1, a2, b = SmallSession("a", path), SmallSession("a", path), SmallSession("b", path)
        await a1.add_items([user("1")])
        await a2.add_items([user("2")])
        await b.add_items([user("x")])
        assert await a1.get_items() == [user("1"), user("2")]
        assert await b.get_items() == [user("x")]
        for s in (a1, a2, b):
            s.close()
        with pytest.raises(RuntimeError, match="closed"):
            await a1.add_items([])

    asyncio.run(main())


def test_memory_sessions_are_private_and_removed_on_close():
    async def main():
        s1, s2 = SmallSession("m"), SmallSession("m")
        await s1.add_items([user("only in s1")])
        assert await s2.get_items() == []
        store_dir = s1.store.path
        s1.close()
        s2.close()
        import os

        assert not os.path.exists(store_dir)

    asyncio.run(main())


def test_session_settings_limit_and_concurrent_adds(tmp_path):
    async def main():
        s = SmallSession("c", tmp_path / "agents", session_settings=SessionSettings(limit=3))
        await asyncio.gather(*(s.add_items([user(str(i))]) for i in range(20)))
        items = await s.get_items()
        assert len(items) == 3
        all_items = await s.get_items(limit=100)
        assert sorted(int(i["content"]) for i in all_items) == list(range(20))
        s.close()

    asyncio.run(main())


def test_runner_end_to_end_with_tools_over_several_turns(tmp_path):
    calls = []

    @function_tool
    def lookup(city: str) -> str:
        """Weather for a city."""
        calls.append(city)
        return f"sunny in {city}"

    model = ScriptedModel(
        [
            [function_call("lookup", {"city": "Paris"}, call_id="call-1")],
            [assistant_message("Paris is sunny.", item_id="m1")],
            [function_call("lookup", {"city": "Oslo"}, call_id="call-2")],
            [assistant_message("Oslo too.", item_id="m2")],
            [assistant_message("You asked about Paris and Oslo.", item_id="m3")],
        ]
    )
    agent = Agent(name="weather", instructions="Answer briefly.", model=model, tools=[lookup])

    async def main():
        path = tmp_path / "agents"
        s = SmallSession("run", path)
        r1 = await Runner.run(agent, "Weather in Paris?", session=s)
        assert r1.final_output == "Paris is sunny."
        r2 = await Runner.run(agent, "And Oslo?", session=s)
        assert r2.final_output == "Oslo too."
        s.close()
        # a fresh object (as after a restart) sees the whole conversation
        s = SmallSession("run", path)
        r3 = await Runner.run(agent, "What did I ask?", session=s)
        assert r3.final_output == "You asked about Paris and Oslo."
        # the model's third request carried the stored history
        last_input = model.calls[-1]
        text = str(last_input)
        assert "Weather in Paris?" in text and "sunny in Oslo" in text
        items = await s.get_items()
        kinds = [i.get("type", "message") for i in items]
        assert kinds.count("function_call") == 2 and kinds.count("function_call_output") == 2
        roles = [i.get("role") for i in items if i.get("role")]
        assert roles.count("user") == 3
        s.close()

    asyncio.run(main())
    assert calls == ["Paris", "Oslo"]


def test_get_items_reads_only_the_newest(tmp_path):
    async def main():
        s = SmallSession("big", tmp_path / "agents")
        batch = [user(f"item {i}") for i in range(500)]
        for _ in range(4):
            await s.add_items(batch)
        newest = await s.get_items(limit=3)
        assert newest == [user("item 497"), user("item 498"), user("item 499")]
        # each add_items is one turn: its items plus turn/start, step/start, step/end, turn/end
        assert s.store.event_count("big") == 2000 + 4 * 4
        s.close()

    asyncio.run(main())


def test_reads_agree_whether_items_come_from_memory_or_from_the_log(tmp_path):
    async def main():
        path = tmp_path / "agents"
        s = SmallSession("mem", path)
        # more items than the writer keeps in memory (4,096), in one call
        everything = [user(f"i{i}") for i in range(5000)]
        await s.add_items(everything)
        assert await s.get_items() == everything
        assert await s.get_items(limit=3) == everything[-3:]
        assert await s.pop_item() == everything[-1]
        assert await s.get_items(limit=2) == everything[-3:-1]
        s.close()
        # a new writer has nothing in memory: the same answers come from the log
        s = SmallSession("mem", path)
        assert await s.get_items(limit=2) == everything[-3:-1]
        assert await s.get_items() == everything[:-1]
        await s.run_compaction({"force": True})
        items = await s.get_items()
        assert items[-1] == everything[-2] and "condensed" in items[0]["content"]
        assert len(s.store.view("mem").messages) == len(items)
        await s.clear_session()
        assert await s.get_items(limit=5) == [] and await s.get_items() == []
        s.close()

    asyncio.run(main())


def test_items_decoded_in_memory_stay_equal_to_the_log_and_are_never_shared(tmp_path):
    async def main():
        path = tmp_path / "agents"
        a = SmallSession("kept", path)
        b = SmallSession("kept", path)  # another object on the same conversation
        nested = {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "hi", "annotations": [1, 2.5, None]}],
        }
        expected = []

        async def check(session):
            got = await session.get_items()  # from memory: decoded once, copied per call
            assert got == expected
            assert await session.get_items(limit=2) == expected[-2:]
            # the same from the items' text (a worker's read) and from the view of the log
            assert await asyncio.to_thread(session._conversation.read, None) == expected
            assert items_of_view(session.store, "kept") == expected
            return got

        await a.add_items([user("one"), nested])
        expected += [user("one"), copy.deepcopy(nested)]
        nested["content"][0]["text"] = "changed by the caller after adding"
        got = await check(a)
        # what a read returned is the caller's to change, at any depth
        got[1]["content"][0]["text"] = "changed"
        got[1]["content"][0]["annotations"].append("more")
        got[1]["content"].append({})
        got[0]["role"] = "system"
        got.append(user("extra"))
        again = await check(b)
        assert all(x is not y for x, y in zip(got, again))
        await b.add_items([user("two")])
        expected.append(user("two"))
        await check(a)
        assert await a.pop_item() == user("two")
        expected.pop()
        await check(b)
        await a.add_items([user("three"), user("four")])
        expected += [user("three"), user("four")]
        await check(b)
        await b.clear_session()
        expected = []
        await check(a)
        await a.add_items([user("after the clear")])
        expected.append(user("after the clear"))
        await check(a)
        a.close()
        b.close()
        # another process appends to the conversation; a new writer here sees it all
        code = (
            "import asyncio, sys\n"
            "from sessionlog.agents import SessionlogSession\n"
            "class S(SessionlogSession):\n"
            "    store_options = {'segment_bytes': 1 << 20}\n"
            "async def main():\n"
            "    s = S('kept', sys.argv[1])\n"
            "    await s.add_items([{'role': 'user', 'content': 'from another process'}])\n"
            "    s.close()\n"
            "asyncio.run(main())\n"
        )
        subprocess.run([sys.executable, "-c", code, str(path)], check=True)
        expected.append(user("from another process"))
        c = SmallSession("kept", path)
        await check(c)
        await c.add_items([user("five")])
        expected.append(user("five"))
        await check(c)
        c.close()

    asyncio.run(main())


def test_concurrent_adds_wait_for_a_flush_that_covers_them_and_share_it(tmp_path):
    async def main():
        path = tmp_path / "agents"
        sessions = [SmallSession(f"s{k}", path) for k in range(32)]
        flusher = sessions[0]._entry.flusher
        store = flusher._store
        flushes = []

        class SlowFlush:
            """The store, with each flush recorded and made slow enough for adds to pile up."""

            def flush_sessions(self, handles):
                started = time.monotonic()
                time.sleep(0.05)
                marks = store.flush_sessions(handles)
                flushes.append((started, time.monotonic()))
                return marks

        flusher._store = SlowFlush()

        async def add(k):
            await sessions[k].add_items([user(f"from {k}")])
            return time.monotonic()

        returned = await asyncio.gather(*(add(k) for k in range(32)))
        # every add returned after some flush ended, and the 32 adds shared a few flushes
        assert flushes and all(t >= min(end for _, end in flushes) for t in returned)
        assert len(flushes) < 8, flushes
        flusher._store = store
        for s in sessions:
            s.close()
        # and every item is in the reopened store
        again = [SmallSession(f"s{k}", path) for k in range(32)]
        for k, s in enumerate(again):
            assert await s.get_items() == [user(f"from {k}")]
            s.close()

    asyncio.run(main())


def test_a_read_during_a_flush_shows_only_durable_items(tmp_path):
    async def main():
        s = SmallSession("durable", tmp_path / "agents")
        await s.add_items([user("old")])
        flusher = s._entry.flusher
        store = flusher._store
        release = asyncio.Event()
        loop = asyncio.get_running_loop()

        class HeldFlush:
            """The store, with a flush that waits until the test lets it go."""

            def flush_sessions(self, handles):
                asyncio.run_coroutine_threadsafe(release.wait(), loop).result()
                return store.flush_sessions(handles)

        flusher._store = HeldFlush()
        adding = asyncio.ensure_future(s.add_items([user("new")]))
        while not s._conversation.unflushed:
            await asyncio.sleep(0.001)
        # appended but not durable: reads, from memory or from the log, do not show it
        assert await s.get_items() == [user("old")]
        assert await s.get_items(limit=5) == [user("old")]
        assert await asyncio.to_thread(s._conversation.read, None) == [user("old")]
        release.set()
        await adding
        assert await s.get_items() == [user("old"), user("new")]
        flusher._store = store
        s.close()

    asyncio.run(main())
