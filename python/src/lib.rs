//! The native half of the `sessionlog` Python package: a thin PyO3 layer over the Rust facade
//! (`sessionlog::Store`). The Python-facing API, its docstrings and the asyncio helpers live in
//! `sessionlog/__init__.py`; the type stubs in `sessionlog/_native.pyi`.
//!
//! Every call that can wait on the disk (open, append, commit, import, reads of the log)
//! releases the GIL, so Python threads writing different sessions share one group commit.

use std::sync::Arc;

mod agents;

use bytes::Bytes;
use parking_lot::Mutex;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use sessionlog::build::{
    AssistantMessage, StepEnd, StepStart, SystemMessage, ToolCall, ToolResult, TurnEnd,
    TurnEndReason, TurnStart, UserMessage,
};
use sessionlog::session::compaction::{
    CompactionOutcome, CompactionPolicy, DeterministicSummarizer, KeepRecent, SkipReason,
    Summarizer, SummarizerError, Summary, SummaryRequest,
};
use sessionlog::session::decode_event;
use sessionlog::session::tokens::HeuristicCounter;
use sessionlog::{
    Access, Compression, Durability, ErrorClass, Event, EventInput, LogOptions, RecoveryMode,
    SessionHeader, Store, StoreOptions,
};
use sessionlog_log::{RealStorage, Seq as LogSeq, StreamId};

create_exception!(
    sessionlog,
    SessionlogError,
    PyException,
    "Base class of every error sessionlog raises."
);
create_exception!(
    sessionlog,
    RefusedError,
    SessionlogError,
    "The input was refused and nothing changed (an invalid event, a taken or bad name, a record over a limit). Fix the input and retry."
);
create_exception!(
    sessionlog,
    NotFoundError,
    SessionlogError,
    "What the call names is not there (a session, a raw stream, a record)."
);
create_exception!(
    sessionlog,
    BusyError,
    SessionlogError,
    "Someone else holds it: another process has the store open, or another handle writes the session."
);
create_exception!(
    sessionlog,
    DamagedError,
    SessionlogError,
    "Stored data is damaged beyond what recovery may cut; run `sessionlog verify` for a report."
);
create_exception!(
    sessionlog,
    StorageError,
    SessionlogError,
    "The machine, the store directory or the options: an I/O error, a poisoned or closed store, invalid options. Fix the environment and reopen."
);

/// The Python exception for a store error, chosen by its class.
fn py_err(e: sessionlog::Error) -> PyErr {
    class_err(e.class(), e.to_string())
}

fn class_err(class: ErrorClass, message: String) -> PyErr {
    match class {
        ErrorClass::Refused => RefusedError::new_err(message),
        ErrorClass::NotFound => NotFoundError::new_err(message),
        ErrorClass::Busy => BusyError::new_err(message),
        ErrorClass::Damaged => DamagedError::new_err(message),
        _ => StorageError::new_err(message),
    }
}

fn session_err(e: sessionlog::SessionError) -> PyErr {
    py_err(sessionlog::Error::Session(e))
}

fn closed() -> PyErr {
    StorageError::new_err("the store is closed; open it again")
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// JSON text of a Python value: a `str` is taken as JSON text as it is, anything else goes
/// through `json.dumps` (compact, non-ASCII kept).
fn json_text(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = value.downcast::<PyString>() {
        return s.extract();
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item("ensure_ascii", false)?;
    kwargs.set_item("separators", (",", ":"))?;
    py.import("json")?
        .call_method("dumps", (value,), Some(&kwargs))?
        .extract()
}

fn json_loads<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("json")?.call_method1("loads", (text,))
}

/// One typed event, built by the functions of `sessionlog.build` and appended with
/// `SessionHandle.append`.
#[pyclass(module = "sessionlog._native", frozen)]
#[derive(Debug, Clone)]
struct Builder {
    kind: BuilderKind,
}

#[derive(Debug, Clone)]
enum BuilderKind {
    TurnStart(TurnStart),
    TurnEnd(TurnEnd),
    StepStart(StepStart),
    StepEnd(StepEnd),
    User(UserMessage),
    System(SystemMessage),
    Assistant(AssistantMessage),
    ToolCall(ToolCall),
    ToolResult(ToolResult),
    Raw(EventInput),
}

#[pymethods]
impl Builder {
    fn __repr__(&self) -> String {
        let name = match &self.kind {
            BuilderKind::TurnStart(_) => "turn_start",
            BuilderKind::TurnEnd(_) => "turn_end",
            BuilderKind::StepStart(_) => "step_start",
            BuilderKind::StepEnd(_) => "step_end",
            BuilderKind::User(_) => "user_message",
            BuilderKind::System(_) => "system_message",
            BuilderKind::Assistant(_) => "assistant_message",
            BuilderKind::ToolCall(_) => "tool_call",
            BuilderKind::ToolResult(_) => "tool_result",
            BuilderKind::Raw(_) => "raw",
        };
        format!("<sessionlog.build.{name}>")
    }
}

fn builder(kind: BuilderKind) -> Builder {
    Builder { kind }
}

#[pyfunction]
fn turn_start() -> Builder {
    builder(BuilderKind::TurnStart(TurnStart::new()))
}

#[pyfunction]
#[pyo3(signature = (reason = "completed", message = None, code = None))]
fn turn_end(reason: &str, message: Option<String>, code: Option<String>) -> PyResult<Builder> {
    let reason = match reason {
        "completed" => TurnEndReason::Completed,
        "blocked" => TurnEndReason::Blocked,
        "max_tokens" => TurnEndReason::MaxTokens,
        "error" => TurnEndReason::Error {
            message: message.unwrap_or_default(),
            code: code.unwrap_or_default(),
        },
        other => {
            return Err(PyValueError::new_err(format!(
                "turn_end reason {other:?} is not one of completed, blocked, max_tokens, error"
            )))
        }
    };
    Ok(builder(BuilderKind::TurnEnd(TurnEnd::new(reason))))
}

#[pyfunction]
fn step_start() -> Builder {
    builder(BuilderKind::StepStart(StepStart::new()))
}

#[pyfunction]
fn step_end() -> Builder {
    builder(BuilderKind::StepEnd(StepEnd::new()))
}

#[pyfunction]
fn user_message(text: String) -> Builder {
    builder(BuilderKind::User(UserMessage::text(text)))
}

#[pyfunction]
fn system_message(text: String) -> Builder {
    builder(BuilderKind::System(SystemMessage::text(text)))
}

#[pyfunction]
#[pyo3(signature = (provider, model, text = None, reasoning = None, tool_calls = Vec::new()))]
fn assistant_message(
    provider: String,
    model: String,
    text: Option<String>,
    reasoning: Option<String>,
    tool_calls: Vec<(String, String, String)>,
) -> Builder {
    let mut m = AssistantMessage::new(provider, model);
    if let Some(r) = reasoning {
        m = m.reasoning(r);
    }
    if let Some(t) = text {
        m = m.text(t);
    }
    for (id, name, arguments) in tool_calls {
        m = m.tool_call(id, name, arguments);
    }
    builder(BuilderKind::Assistant(m))
}

#[pyfunction]
fn tool_call(call_id: String, name: String, arguments: String) -> Builder {
    builder(BuilderKind::ToolCall(ToolCall::new(
        call_id, name, arguments,
    )))
}

#[pyfunction]
#[pyo3(signature = (call_id, text, error = None))]
fn tool_result(call_id: String, text: String, error: Option<(String, String)>) -> Builder {
    let r = match error {
        Some((name, code)) => ToolResult::error(call_id, text, name, code),
        None => ToolResult::text(call_id, text),
    };
    builder(BuilderKind::ToolResult(r))
}

#[pyfunction]
#[pyo3(signature = (event_type, data, *, time_ms = None, ignorable = false))]
fn raw(
    py: Python<'_>,
    event_type: String,
    data: &Bound<'_, PyAny>,
    time_ms: Option<i64>,
    ignorable: bool,
) -> PyResult<Builder> {
    let mut input = EventInput::new(
        event_type,
        time_ms.unwrap_or_else(now_ms),
        json_text(py, data)?,
    );
    input.ignorable = ignorable;
    Ok(builder(BuilderKind::Raw(input)))
}

/// An event as stored: the envelope's fields and its exact JSON text.
#[pyclass(module = "sessionlog._native", frozen)]
#[derive(Debug)]
struct StoredEvent {
    event: Event,
}

#[pymethods]
impl StoredEvent {
    /// The event type.
    #[getter]
    fn r#type(&self) -> &str {
        self.event.event_type()
    }
    /// The per-session sequence number.
    #[getter]
    fn seq(&self) -> u64 {
        self.event.seq().get()
    }
    /// Epoch milliseconds.
    #[getter]
    fn time(&self) -> i64 {
        self.event.time()
    }
    /// Whether readers that do not know the type may skip it.
    #[getter]
    fn ignorable(&self) -> bool {
        self.event.is_ignorable()
    }
    /// The cited source events, if any.
    #[getter]
    fn source_event_seqs(&self) -> Option<Vec<u64>> {
        self.event
            .source_event_seqs()
            .map(|seqs| seqs.iter().map(|s| s.get()).collect())
    }
    /// The envelope exactly as stored (JSON text).
    #[getter]
    fn raw(&self) -> &str {
        self.event.raw()
    }
    /// The payload as JSON text, byte for byte as written.
    #[getter]
    fn data_json(&self) -> String {
        self.event.stored_data().raw().to_owned()
    }
    /// The payload parsed with `json.loads`.
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        json_loads(py, self.event.stored_data().raw())
    }
    fn __repr__(&self) -> String {
        format!(
            "<sessionlog.Event seq={} type={:?}>",
            self.event.seq().get(),
            self.event.event_type()
        )
    }
}

fn store_options(
    segment_bytes: Option<u64>,
    preallocate: Option<bool>,
    strict: bool,
    projection_cache: bool,
    compression_level: Option<i32>,
    kept_events_bytes: Option<usize>,
) -> PyResult<StoreOptions> {
    let mut log = LogOptions::default();
    if let Some(level) = compression_level {
        let compression = Compression::zstd(level)
            .map_err(|e| PyValueError::new_err(format!("compression_level: {e}")))?;
        log = log.with_compression(compression);
    }
    if let Some(bytes) = segment_bytes {
        log = log.with_segment_size_bytes(bytes);
    }
    if let Some(p) = preallocate {
        log = log.with_preallocate(p);
    }
    if strict {
        log = log.with_recovery_mode(RecoveryMode::AbsoluteConsistency);
    }
    let mut options = StoreOptions::default()
        .with_log(log)
        .with_projection_cache(projection_cache);
    if let Some(bytes) = kept_events_bytes {
        options = options.with_kept_events_bytes(bytes);
    }
    Ok(options)
}

/// A store: many sessions in one log directory (see `sessionlog.Store`).
#[pyclass(module = "sessionlog._native", frozen, name = "Store")]
#[derive(Debug)]
struct PyStore {
    inner: Mutex<Option<Store>>,
    path: String,
}

impl PyStore {
    fn store(&self) -> PyResult<Store> {
        self.inner.lock().clone().ok_or_else(closed)
    }
}

impl PyStore {
    /// The events of session `name` with the given seqs, read with the GIL released.
    fn read_at(&self, py: Python<'_>, name: &str, seqs: Vec<u64>) -> PyResult<Vec<Event>> {
        let store = self.store()?;
        let stream = stream_of(&store, name)?;
        py.allow_threads(|| {
            let reader = store.log_reader();
            seqs.iter()
                .map(|&seq| {
                    let r = reader
                        .read(stream, LogSeq(seq.saturating_add(1)))
                        .map_err(py_err)?;
                    decode_event(&r.payload).map_err(session_err)
                })
                .collect()
        })
    }
}

fn stream_of(store: &Store, name: &str) -> PyResult<StreamId> {
    store
        .log_reader()
        .stream_id(name)
        .filter(|_| !name.starts_with('\0'))
        .ok_or_else(|| NotFoundError::new_err(format!("no session named {name:?}")))
}

#[pymethods]
impl PyStore {
    #[new]
    #[pyo3(signature = (path, *, read_only = false, create = true, segment_bytes = None, preallocate = None, strict = false, projection_cache = true, compression_level = None, kept_events_bytes = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        read_only: bool,
        create: bool,
        segment_bytes: Option<u64>,
        preallocate: Option<bool>,
        strict: bool,
        projection_cache: bool,
        compression_level: Option<i32>,
        kept_events_bytes: Option<usize>,
    ) -> PyResult<Self> {
        let options = store_options(
            segment_bytes,
            preallocate,
            strict,
            projection_cache,
            compression_level,
            kept_events_bytes,
        )?;
        let access = match (read_only, create) {
            (true, _) => Access::ReadOnly,
            (false, true) => Access::CreateOrOpen,
            (false, false) => Access::Existing,
        };
        let shown = path.display().to_string();
        let store = py
            .allow_threads(|| {
                Store::open_with_access(Arc::new(RealStorage), &path, options, access)
            })
            .map_err(py_err)?;
        Ok(PyStore {
            inner: Mutex::new(Some(store)),
            path: shown,
        })
    }

    /// The store directory.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// Whether the store was opened read-only.
    #[getter]
    fn read_only(&self) -> PyResult<bool> {
        Ok(self.store()?.log_reader().is_read_only())
    }

    /// Closes the store: later calls raise StorageError. Handles still open keep the log
    /// alive until they are closed too.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let store = self.inner.lock().take();
        match store {
            Some(store) => py.allow_threads(|| store.close()).map_err(py_err),
            None => Ok(()),
        }
    }

    #[pyo3(signature = (name, cwd = None))]
    fn create_session(
        &self,
        py: Python<'_>,
        name: &str,
        cwd: Option<&str>,
    ) -> PyResult<SessionHandle> {
        let store = self.store()?;
        let header = SessionHeader::new(name, now_ms(), cwd);
        let handle = py
            .allow_threads(|| store.create_session(name, header))
            .map_err(py_err)?;
        Ok(SessionHandle::new(handle))
    }

    #[pyo3(signature = (name, *, repair = true))]
    fn open_session(&self, py: Python<'_>, name: &str, repair: bool) -> PyResult<SessionHandle> {
        let store = self.store()?;
        let handle = py
            .allow_threads(|| {
                if repair {
                    store.open_session(name).map(|(h, _)| h)
                } else {
                    store.open_session_as_is(name)
                }
            })
            .map_err(py_err)?;
        Ok(SessionHandle::new(handle))
    }

    /// Makes every event appended so far, by every writer of the store, durable (one group
    /// commit shared with any running at once). The GIL is released while it waits.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let store = self.store()?;
        py.allow_threads(|| store.flush()).map_err(py_err)
    }

    /// `flush`, for writers that append without committing: notes where each of `handles`
    /// stands (its next seq), flushes, then writes the checkpoints of each that are due, as a
    /// commit would, all with the GIL released once. Returns the marks: every event of
    /// `handles[i]` below `marks[i]` is durable (0 for a closed handle).
    fn flush_sessions(
        &self,
        py: Python<'_>,
        handles: Vec<Py<SessionHandle>>,
    ) -> PyResult<Vec<u64>> {
        let store = self.store()?;
        py.allow_threads(|| {
            let marks: Vec<u64> = handles
                .iter()
                .map(|h| {
                    h.get()
                        .inner
                        .lock()
                        .as_ref()
                        .map_or(0, |h| h.next_seq().get())
                })
                .collect();
            store.flush().map_err(py_err)?;
            for handle in &handles {
                if let Some(h) = handle.get().inner.lock().as_mut() {
                    h.refresh_checkpoints();
                }
            }
            Ok(marks)
        })
    }

    fn session_names(&self) -> PyResult<Vec<String>> {
        Ok(self.store()?.session_names())
    }

    #[pyo3(signature = (*, after = None, prefix = None, limit = 1000))]
    fn list_sessions(
        &self,
        after: Option<&str>,
        prefix: Option<&str>,
        limit: usize,
    ) -> PyResult<Vec<(String, u64)>> {
        Ok(self
            .store()?
            .list_sessions(after, prefix, limit)
            .into_iter()
            .map(|s| (s.name, s.events))
            .collect())
    }

    fn delete_session(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let store = self.store()?;
        py.allow_threads(|| store.delete_session(name))
            .map_err(py_err)
    }

    /// Gives the space of deleted sessions back (`Store::reclaim`); with `seal_active`, seals
    /// the active segment first so a store with compression on is compressed whole. Returns
    /// what was done as a dict.
    #[pyo3(signature = (*, seal_active = false))]
    fn reclaim<'py>(&self, py: Python<'py>, seal_active: bool) -> PyResult<Bound<'py, PyDict>> {
        let store = self.store()?;
        let report = py
            .allow_threads(|| {
                if seal_active {
                    store.seal_active_segment()?;
                }
                store.reclaim()
            })
            .map_err(py_err)?;
        let ids = |v: &[sessionlog_log::SegmentId]| v.iter().map(|s| s.0).collect::<Vec<_>>();
        let d = PyDict::new(py);
        d.set_item("segments_removed", ids(&report.segments_removed))?;
        d.set_item("segments_rewritten", ids(&report.segments_rewritten))?;
        d.set_item("segments_compressed", ids(&report.segments_compressed))?;
        d.set_item("bytes_removed", report.bytes_removed)?;
        d.set_item("bytes_freed_by_rewrites", report.bytes_freed_by_rewrites)?;
        d.set_item("live_bytes_copied", report.live_bytes_copied)?;
        d.set_item(
            "stopped_at",
            report.stopped_at.map(|(segment, why)| (segment.0, why)),
        )?;
        Ok(d)
    }

    fn event_count(&self, name: &str) -> PyResult<u64> {
        let store = self.store()?;
        let reader = store.log_reader();
        let stream = stream_of(&store, name)?;
        Ok(reader
            .streams()
            .into_iter()
            .find(|s| s.id == stream)
            .map_or(0, |s| s.next_seq.0.saturating_sub(1)))
    }

    /// Events `start..stop` of session `name` (stop defaults to the end).
    #[pyo3(signature = (name, start = 0, stop = None))]
    fn events(
        &self,
        py: Python<'_>,
        name: &str,
        start: u64,
        stop: Option<u64>,
    ) -> PyResult<Vec<StoredEvent>> {
        let store = self.store()?;
        let stream = stream_of(&store, name)?;
        let events = py.allow_threads(|| -> Result<Vec<Event>, PyErr> {
            let reader = store.log_reader();
            let to = stop.map_or(u64::MAX, |s| s.saturating_add(1));
            let mut out = Vec::new();
            for r in reader.iter(stream, LogSeq(start.saturating_add(1)), LogSeq(to)) {
                let r = r.map_err(|e| py_err(e.into()))?;
                out.push(decode_event(&r.payload).map_err(session_err)?);
            }
            Ok(out)
        })?;
        Ok(events
            .into_iter()
            .map(|event| StoredEvent { event })
            .collect())
    }

    /// The events of session `name` with the given seqs, in the order asked.
    fn events_at(&self, py: Python<'_>, name: &str, seqs: Vec<u64>) -> PyResult<Vec<StoredEvent>> {
        let events = self.read_at(py, name, seqs)?;
        Ok(events
            .into_iter()
            .map(|event| StoredEvent { event })
            .collect())
    }

    /// The payloads (JSON text, as written) of the events of session `name` with the given
    /// seqs, in the order asked.
    fn payloads_at(&self, py: Python<'_>, name: &str, seqs: Vec<u64>) -> PyResult<Vec<String>> {
        let events = self.read_at(py, name, seqs)?;
        Ok(events
            .iter()
            .map(|e| e.stored_data().raw().to_owned())
            .collect())
    }

    /// The payloads of the events of session `name` with the given seqs as one JSON array
    /// text (each element byte for byte as written), for one `json.loads` on the Python side.
    fn payloads_json_at(&self, py: Python<'_>, name: &str, seqs: Vec<u64>) -> PyResult<String> {
        let events = self.read_at(py, name, seqs)?;
        let mut out = String::from("[");
        for (i, e) in events.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(e.stored_data().raw());
        }
        out.push(']');
        Ok(out)
    }

    /// The derived model messages of session `name` as JSON text (a list).
    fn messages_json(&self, py: Python<'_>, name: &str) -> PyResult<String> {
        let store = self.store()?;
        let view = py.allow_threads(|| store.view(name)).map_err(py_err)?;
        Ok(view.surface.derive_messages_json())
    }

    #[pyo3(signature = (data, name = None))]
    fn import_dsh(
        &self,
        py: Python<'_>,
        data: Vec<u8>,
        name: Option<&str>,
    ) -> PyResult<(String, u64)> {
        let store = self.store()?;
        let summary = py
            .allow_threads(|| store.import_dsh(&data, name))
            .map_err(py_err)?;
        Ok((summary.session, summary.events))
    }

    fn export_dsh<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyBytes>> {
        let store = self.store()?;
        let bytes = py
            .allow_threads(|| store.export_dsh(name))
            .map_err(py_err)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Appends `payloads` to the raw stream `name` as one atomic batch; returns their seqs.
    #[pyo3(signature = (name, payloads, *, durable = true))]
    fn raw_append(
        &self,
        py: Python<'_>,
        name: &str,
        payloads: Vec<Vec<u8>>,
        durable: bool,
    ) -> PyResult<Vec<u64>> {
        let store = self.store()?;
        let durability = if durable {
            Durability::Sync
        } else {
            Durability::Buffered
        };
        py.allow_threads(|| {
            let stream = store.raw_stream(name)?;
            let slices: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
            stream.append(&slices, durability)
        })
        .map(|receipt| receipt.seqs.iter().map(|s| s.0).collect())
        .map_err(py_err)
    }

    /// The records of raw stream `name` with seqs in `start..stop`, as `(seq, bytes)`.
    #[pyo3(signature = (name, start = 0, stop = None))]
    fn raw_read<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        start: u64,
        stop: Option<u64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let store = self.store()?;
        let records = py.allow_threads(|| -> sessionlog::Result<Vec<(u64, Bytes)>> {
            let mut out = Vec::new();
            for r in store.raw_read(name, start, stop.unwrap_or(u64::MAX))? {
                let r = r?;
                out.push((r.seq.0, r.payload));
            }
            Ok(out)
        });
        let records = records.map_err(py_err)?;
        let list = PyList::empty(py);
        for (seq, payload) in records {
            list.append((seq, PyBytes::new(py, &payload)))?;
        }
        Ok(list)
    }

    fn raw_stream_names(&self) -> PyResult<Vec<String>> {
        Ok(self.store()?.raw_stream_names())
    }

    /// Deletes the raw stream `name` durably; whether there was one.
    fn raw_delete(&self, py: Python<'_>, name: &str) -> PyResult<bool> {
        let store = self.store()?;
        py.allow_threads(|| store.delete_raw_stream(name))
            .map_err(py_err)
    }

    fn __repr__(&self) -> String {
        format!("<sessionlog.Store {:?}>", self.path)
    }
}

/// Batches of items at most this long are appended without releasing the GIL.
const RELEASE_GIL_ABOVE_BYTES: usize = 64 << 10;

/// The one writer of a session (see `sessionlog.SessionHandle`).
#[pyclass(module = "sessionlog._native", frozen)]
#[derive(Debug)]
struct SessionHandle {
    inner: Mutex<Option<sessionlog::SessionHandle>>,
    name: String,
    /// Items of `sessionlog.agents` read or written through this handle (locked inside
    /// `inner`'s lock).
    recent_items: Mutex<agents::RecentItems>,
}

impl SessionHandle {
    fn new(handle: sessionlog::SessionHandle) -> Self {
        SessionHandle {
            name: handle.name().to_owned(),
            inner: Mutex::new(Some(handle)),
            recent_items: Mutex::new(agents::RecentItems::default()),
        }
    }

    /// Appends the `add_items` turn of `items_json` (not committed) and remembers its items.
    fn append_items(
        &self,
        h: &mut sessionlog::SessionHandle,
        items_json: &str,
    ) -> PyResult<Vec<u64>> {
        let batch =
            agents::items_batch(h, items_json, now_ms()).map_err(|e| RefusedError::new_err(e.0))?;
        h.append_atomic(batch.events).map_err(py_err)?;
        let mut recent = self.recent_items.lock();
        let seqs = batch.items.iter().map(|(seq, _)| *seq).collect();
        for (seq, text) in batch.items {
            recent.insert(seq, text);
        }
        Ok(seqs)
    }

    fn with<R>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut sessionlog::SessionHandle) -> PyResult<R> + Send,
    ) -> PyResult<R>
    where
        R: Send,
    {
        py.allow_threads(|| {
            let mut guard = self.inner.lock();
            let handle = guard.as_mut().ok_or_else(|| {
                StorageError::new_err(format!(
                    "the handle of session {:?} is closed; open the session again",
                    self.name
                ))
            })?;
            f(handle)
        })
    }
}

/// One event for `append`: a builder, a raw envelope (dict or JSON text).
fn event_of(py: Python<'_>, event: &Bound<'_, PyAny>) -> PyResult<BuilderKind> {
    if let Ok(b) = event.downcast::<Builder>() {
        return Ok(b.get().kind.clone());
    }
    if event.is_instance_of::<PyDict>() || event.is_instance_of::<PyString>() {
        let text = json_text(py, event)?;
        let input = EventInput::from_json(&text, now_ms()).map_err(session_err)?;
        return Ok(BuilderKind::Raw(input));
    }
    Err(PyTypeError::new_err(
        "append takes a sessionlog.build event, or a raw envelope as a dict or JSON text",
    ))
}

fn append_one(h: &mut sessionlog::SessionHandle, kind: BuilderKind) -> sessionlog::Result<u64> {
    let event = match kind {
        BuilderKind::TurnStart(b) => h.append(b),
        BuilderKind::TurnEnd(b) => h.append(b),
        BuilderKind::StepStart(b) => h.append(b),
        BuilderKind::StepEnd(b) => h.append(b),
        BuilderKind::User(b) => h.append(b),
        BuilderKind::System(b) => h.append(b),
        BuilderKind::Assistant(b) => h.append(b),
        BuilderKind::ToolCall(b) => h.append(b),
        BuilderKind::ToolResult(b) => h.append(b),
        BuilderKind::Raw(b) => h.append(b),
    }?;
    Ok(event.seq().get())
}

/// A summarizer that calls a Python function with the request as a dict. The function
/// returns the summary text, or a dict with `text` (or `blocks`), `provider` and `model`.
struct PySummarizer<'py> {
    py: Python<'py>,
    func: Bound<'py, PyAny>,
}

impl PySummarizer<'_> {
    fn call(&self, request: &SummaryRequest<'_>) -> PyResult<Summary> {
        let py = self.py;
        let req = PyDict::new(py);
        req.set_item("compaction_id", request.compaction_id)?;
        let messages = PyList::empty(py);
        for m in &request.messages {
            messages.append(json_loads(py, m)?)?;
        }
        req.set_item("messages", messages)?;
        req.set_item("previous_summaries", request.previous_summaries.clone())?;
        req.set_item("shadowed_tokens", request.shadowed_tokens)?;
        req.set_item("max_summary_tokens", request.max_summary_tokens)?;
        req.set_item("attempt", request.attempt)?;
        let out = self.func.call1((req,))?;
        let mut summary = Summary::empty();
        if let Ok(text) = out.extract::<String>() {
            summary.blocks.push(text);
            return Ok(summary);
        }
        let d = out.downcast::<PyDict>().map_err(|_| {
            PyTypeError::new_err("a summarizer returns a str or a dict with text, provider, model")
        })?;
        if let Some(text) = d.get_item("text")? {
            summary.blocks.push(text.extract()?);
        }
        if let Some(blocks) = d.get_item("blocks")? {
            summary.blocks.extend(blocks.extract::<Vec<String>>()?);
        }
        if let Some(p) = d.get_item("provider")? {
            summary.provider = p.extract()?;
        }
        if let Some(m) = d.get_item("model")? {
            summary.model = m.extract()?;
        }
        Ok(summary)
    }
}

impl Summarizer for PySummarizer<'_> {
    fn summarize(&mut self, request: &SummaryRequest<'_>) -> Result<Summary, SummarizerError> {
        self.call(request)
            .map_err(|e| SummarizerError(format!("the Python summarizer raised: {e}")))
    }
}

#[pymethods]
impl SessionHandle {
    /// The session's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Validates and appends one event (in memory and to the log's buffer); returns its seq.
    /// Durable after the next `commit`.
    fn append(&self, py: Python<'_>, event: &Bound<'_, PyAny>) -> PyResult<u64> {
        let kind = event_of(py, event)?;
        self.with(py, |h| append_one(h, kind).map_err(py_err))
    }

    /// Appends raw envelopes (dicts or JSON text) as one atomic batch; returns their seqs.
    /// With `commit`, the batch is also made durable before this returns (one release of the
    /// GIL for both).
    #[pyo3(signature = (events, *, commit = false))]
    fn append_atomic(
        &self,
        py: Python<'_>,
        events: Vec<Bound<'_, PyAny>>,
        commit: bool,
    ) -> PyResult<Vec<u64>> {
        let mut inputs = Vec::with_capacity(events.len());
        for e in &events {
            match event_of(py, e)? {
                BuilderKind::Raw(input) => inputs.push(input),
                _ => {
                    return Err(PyTypeError::new_err(
                        "append_atomic takes raw envelopes (dicts or JSON text); append builders one by one",
                    ))
                }
            }
        }
        self.with(py, |h| {
            let seqs = h.append_atomic(inputs).map_err(py_err)?;
            if commit {
                h.commit().map_err(py_err)?;
            }
            Ok(seqs.into_iter().map(|s| s.get()).collect())
        })
    }

    /// Makes every event appended so far durable (one group commit shared with every other
    /// thread committing at the same time). The GIL is released while it waits.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |h| h.commit().map_err(py_err))
    }

    /// The seq the next event will take.
    fn next_seq(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |h| Ok(h.next_seq().get()))
    }

    /// Context pressure of the next request (estimated tokens, window, ratio).
    fn pressure<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let p = self.with(py, |h| Ok(h.pressure()))?;
        let d = PyDict::new(py);
        d.set_item("estimated_prompt_tokens", p.estimated_prompt_tokens.tokens)?;
        d.set_item("anchored_on", p.anchored_on.map(|s| s.get()))?;
        d.set_item(
            "anchor_prompt_tokens",
            p.anchor_prompt_tokens.map(|t| t.tokens),
        )?;
        d.set_item(
            "estimated_delta_since_anchor",
            p.estimated_delta_since_anchor,
        )?;
        d.set_item("context_window", p.context_window)?;
        d.set_item("ratio", p.ratio)?;
        Ok(d)
    }

    /// Runs one summary compaction now (durably) and returns what it did as a dict.
    #[pyo3(signature = (summarizer = None, *, trigger_fraction = 0.0, keep_recent_tokens = None, keep_recent_fraction = 0.25))]
    fn compact<'py>(
        &self,
        py: Python<'py>,
        summarizer: Option<Bound<'py, PyAny>>,
        trigger_fraction: f64,
        keep_recent_tokens: Option<u64>,
        keep_recent_fraction: f64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let keep = match keep_recent_tokens {
            Some(t) => KeepRecent::Tokens(t),
            None => KeepRecent::Fraction(keep_recent_fraction),
        };
        let policy = CompactionPolicy::default()
            .with_trigger_fraction(trigger_fraction)
            .with_keep_recent(keep);
        // The summarizer may be Python code, so this call keeps the GIL.
        let mut guard = self.inner.lock();
        let handle = guard.as_mut().ok_or_else(closed)?;
        let mut python_summarizer;
        let mut deterministic;
        let s: &mut dyn Summarizer = match summarizer {
            Some(func) => {
                python_summarizer = PySummarizer { py, func };
                &mut python_summarizer
            }
            None => {
                deterministic = DeterministicSummarizer::new();
                &mut deterministic
            }
        };
        let outcome = handle
            .compact(&policy, s, Arc::new(HeuristicCounter), now_ms())
            .map_err(py_err)?;
        let d = PyDict::new(py);
        match outcome {
            CompactionOutcome::Compacted(report) => {
                d.set_item("outcome", "compacted")?;
                let shadowed: Vec<u64> = report.shadowed.iter().map(|s| s.get()).collect();
                d.set_item("shadowed", shadowed)?;
                d.set_item("shadowed_tokens", report.shadowed_tokens)?;
                d.set_item("summary_tokens", report.summary_tokens)?;
                d.set_item("attempts", report.attempts)?;
            }
            CompactionOutcome::Skipped(reason) => {
                d.set_item("outcome", "skipped")?;
                let why = match reason {
                    SkipReason::BelowTrigger => "below_trigger".to_owned(),
                    SkipReason::NothingToCompact => "nothing_to_compact".to_owned(),
                    SkipReason::AlreadyCompact => "already_compact".to_owned(),
                    other => format!("{other:?}"),
                };
                d.set_item("reason", why)?;
            }
            CompactionOutcome::Failed {
                error, attempts, ..
            } => {
                d.set_item("outcome", "failed")?;
                d.set_item("error", error)?;
                d.set_item("attempts", attempts)?;
            }
        }
        Ok(d)
    }

    /// Appends `items_json` (a JSON array of OpenAI Agents SDK items) as one turn, one
    /// surface event per item, in one atomic batch made durable before this returns (see
    /// `sessionlog.agents`). Returns the items' seqs.
    fn agents_add_items(&self, py: Python<'_>, items_json: String) -> PyResult<Vec<u64>> {
        self.with(py, |h| {
            let seqs = self.append_items(h, &items_json)?;
            h.commit().map_err(py_err)?;
            Ok(seqs)
        })
    }

    /// `agents_add_items` without waiting: appends the turn (validated, in memory and in the
    /// log's buffer) and returns the items' seqs, or None when another call holds the
    /// session (nothing is appended then). The items are durable after the next
    /// `Store.flush` (or commit) that starts after this returns.
    fn agents_append_items_now(
        &self,
        py: Python<'_>,
        items_json: String,
    ) -> PyResult<Option<Vec<u64>>> {
        let append = || {
            let Some(mut guard) = self.inner.try_lock() else {
                return Ok(None);
            };
            let Some(h) = guard.as_mut() else {
                return Ok(None);
            };
            self.append_items(h, &items_json).map(Some)
        };
        // A small batch takes microseconds: keeping the GIL saves handing it to another
        // thread and waiting to get it back, which costs more than the append.
        if items_json.len() <= RELEASE_GIL_ABOVE_BYTES {
            append()
        } else {
            py.allow_threads(append)
        }
    }

    /// The current items (the newest `limit` when given), oldest first, as the text of one
    /// JSON array; only items with seqs below `below` when given (the durable ones, when
    /// appends after it still wait for a flush).
    #[pyo3(signature = (limit = None, below = None))]
    fn agents_items_json(
        &self,
        py: Python<'_>,
        limit: Option<usize>,
        below: Option<u64>,
    ) -> PyResult<String> {
        self.with(py, |h| {
            let seqs = agents::item_seqs(h, limit, below);
            agents::items_json(h, &mut self.recent_items.lock(), &seqs).map_err(py_err)
        })
    }

    /// What `agents_items_json(limit)` decodes to, as a new list of fresh values (no two
    /// calls share a mutable object), when it can be answered at once from the items in
    /// memory without waiting: None when a write holds the session, more than `max_items`
    /// items are current or an item must be read from the log. Keeps the GIL (it takes
    /// microseconds), so an event loop can call it without a thread hop.
    #[pyo3(signature = (limit = None, max_items = 4096, below = None))]
    fn agents_items_now<'py>(
        &self,
        py: Python<'py>,
        limit: Option<usize>,
        max_items: usize,
        below: Option<u64>,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        let seqs = {
            let Some(guard) = self.inner.try_lock() else {
                return Ok(None);
            };
            let Some(h) = guard.as_ref() else {
                return Ok(None);
            };
            let most = limit.unwrap_or(usize::MAX).min(max_items.saturating_add(1));
            let seqs = agents::item_seqs(h, Some(most), below);
            if seqs.len() > max_items {
                return Ok(None);
            }
            seqs
        };
        // an item's seq stands for the same item for good, so the seqs stay true without
        // the session's lock
        agents::cached_items(py, &self.recent_items, &seqs)
    }

    /// Shadows the newest item with a replacement, durably; returns it as JSON text, or
    /// None when there is no item.
    fn agents_pop_item(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.with(py, |h| {
            agents::pop_item(h, &mut self.recent_items.lock(), now_ms()).map_err(py_err)
        })
    }

    /// Shadows every item with one replacement, durably.
    fn agents_clear(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |h| agents::clear_items(h, now_ms()).map_err(py_err))
    }

    /// Releases the session's writer slot. Later calls raise StorageError.
    fn close(&self, py: Python<'_>) {
        let handle = py.allow_threads(|| self.inner.lock().take());
        drop(handle);
    }

    fn __repr__(&self) -> String {
        format!("<sessionlog.SessionHandle {:?}>", self.name)
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("SessionlogError", py.get_type::<SessionlogError>())?;
    m.add("RefusedError", py.get_type::<RefusedError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("BusyError", py.get_type::<BusyError>())?;
    m.add("DamagedError", py.get_type::<DamagedError>())?;
    m.add("StorageError", py.get_type::<StorageError>())?;
    m.add_class::<PyStore>()?;
    m.add_class::<SessionHandle>()?;
    m.add_class::<StoredEvent>()?;
    m.add_class::<Builder>()?;
    for f in [
        wrap_pyfunction!(turn_start, m)?,
        wrap_pyfunction!(turn_end, m)?,
        wrap_pyfunction!(step_start, m)?,
        wrap_pyfunction!(step_end, m)?,
        wrap_pyfunction!(user_message, m)?,
        wrap_pyfunction!(system_message, m)?,
        wrap_pyfunction!(assistant_message, m)?,
        wrap_pyfunction!(tool_call, m)?,
        wrap_pyfunction!(tool_result, m)?,
        wrap_pyfunction!(raw, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
