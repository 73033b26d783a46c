"""A pytest plugin that runs the OpenAI Agents SDK's own session tests against sessionlog.

Loaded with ``-p sessionlog_sdk_swap`` before the SDK's test modules are imported, it rebinds
``agents.SQLiteSession`` (and ``agents.memory.SQLiteSession``) to a ``SessionlogSession`` with
small segment files, so every test that constructs a ``SQLiteSession`` gets a sessionlog store
at its ``db_path`` instead. ``python/ci.sh`` runs it on the SDK's sdist.

The tests deselected below inspect SQLite itself (its connection objects, rows corrupted
through ``sqlite3``, its write lock, its file-lock registry) or the exact text of
SQLiteSession's own error message; each is listed with the reason.
"""

import agents
import agents.memory
import pytest

from sessionlog.agents import SessionlogSession


class SuiteSessionlogSession(SessionlogSession):
    """SessionlogSession with 1 MiB segments, so the suite's many stores stay small."""

    store_options = {"segment_bytes": 1 << 20}


agents.SQLiteSession = SuiteSessionlogSession
agents.memory.SQLiteSession = SuiteSessionlogSession

_SQLITE_INTERNALS = "inspects SQLite internals (connections, sqlite3 rows, write lock)"

DESELECTED = {
    # SQLiteSession's per-thread sqlite3 connections and their cleanup
    "test_session.py::test_sqlite_session_close_closes_worker_thread_connections": _SQLITE_INTERNALS,
    "test_session.py::test_sqlite_session_reaps_connections_from_exited_worker_threads": _SQLITE_INTERNALS,
    "test_session.py::test_sqlite_session_closes_retired_connections_before_the_next_allocation": _SQLITE_INTERNALS,
    "test_session.py::test_sqlite_session_keeps_connections_of_live_worker_threads": _SQLITE_INTERNALS,
    "test_session.py::test_sqlite_session_rollback_failure_evicts_connection": _SQLITE_INTERNALS,
    "test_session.py::test_sqlite_session_close_retries_quarantined_connection": _SQLITE_INTERNALS,
    "test_session.py::test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome": _SQLITE_INTERNALS,
    # rows corrupted by writing to the SQLite tables directly
    "test_session.py::test_sqlite_session_pop_item_skips_corrupt_most_recent": _SQLITE_INTERNALS,
    "test_session.py::test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": _SQLITE_INTERNALS,
    "test_session.py::test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": _SQLITE_INTERNALS,
    "test_session.py::test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": _SQLITE_INTERNALS,
    # SQLite's write lock and transactions, probed through sqlite3
    "test_session.py::test_sqlite_session_failed_add_items_releases_write_lock": _SQLITE_INTERNALS,
    "test_session.py::test_sqlite_session_failed_clear_session_rolls_back": _SQLITE_INTERNALS,
    "test_session.py::test_sqlite_session_failed_pop_item_releases_write_lock": _SQLITE_INTERNALS,
    # matches SQLiteSession's own message text; a closed SessionlogSession raises the same
    # RuntimeError naming its own class
    "test_session.py::test_sqlite_session_closed_rejects_empty_add_items": "asserts the text 'SQLiteSession is closed'",
    # SQLiteSession's class-level file-lock registry
    "test_session.py::test_sqlite_session_file_lock_is_shared_across_instances": _SQLITE_INTERNALS,
}


def pytest_collection_modifyitems(config, items):
    keep, dropped = [], []
    for item in items:
        key = f"{item.path.name}::{item.originalname}"
        (dropped if key in DESELECTED else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_report_header(config):
    return [
        f"agents.SQLiteSession is {agents.SQLiteSession.__module__}.{agents.SQLiteSession.__name__}",
        f"{len(DESELECTED)} SDK tests deselected (reasons in sessionlog_sdk_swap.py)",
    ]
