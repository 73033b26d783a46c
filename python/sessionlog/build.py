"""Typed event builders.

Each function returns an event for :meth:`sessionlog.SessionHandle.append`. A builder holds
what only the caller knows (texts, tool names, provider and model, why a turn ended); what
the session already knows (turn and step numbers, the surface operation, a tool result's
sources, the time) is filled in when the event is appended.

``raw(event_type, data)`` builds any other event (log-only plugin and namespaced capability
types); ``data`` is a JSON-serialisable value or JSON text kept byte for byte.
"""

from ._native import (
    Builder,
    assistant_message,
    raw,
    step_end,
    step_start,
    system_message,
    tool_call,
    tool_result,
    turn_end,
    turn_start,
    user_message,
)

__all__ = [
    "Builder",
    "assistant_message",
    "raw",
    "step_end",
    "step_start",
    "system_message",
    "tool_call",
    "tool_result",
    "turn_end",
    "turn_start",
    "user_message",
]
