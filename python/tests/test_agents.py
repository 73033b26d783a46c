"""sessionlog.agents.SessionlogSession: the Agents SDK Session protocol on a store, the log
keeping what pop and clear take back, and an end-to-end Runner.run over several turns with
tool calls, driven offline by the SDK's ScriptedModel."""

import asyncio

import pytest

agents = pytest.importorskip("agents")

from agents import Agent, Runner, SessionSettings, function_tool  # noqa: E402
from agents.memory.session import SessionABC  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

import sessionlog  # noqa: E402
from sessionlog.agents import CLEAR, ITEM, POP, SessionlogSession  # noqa: E402


class SmallSession(SessionlogSession):
    store_options = {"segment_bytes": 1 << 20}


def user(text):
    return {"role": "user", "content": text}


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
        types = [e.type for e in s.store.events("conv")]
        assert types == [ITEM] * 3 + [POP, ITEM, CLEAR, ITEM]
        # the popped and cleared items are still in the log, byte for byte
        assert [e.data for e in s.store.events("conv") if e.type == ITEM][2] == user("c")
        s.close()
        # a new process-level open rebuilds the index from the log
        s2 = SmallSession("conv", path)
        assert await s2.get_items() == [user("e")]
        s2.close()

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
        assert s.store.event_count("big") == 2000
        s.close()

    asyncio.run(main())
