//! Ownership of a store through leases: one owner at a time, a fencing token that grows with
//! every change of owner and is recorded in the log, and a writer that stops before its next
//! commit once its lease may have expired. design: docs/distributed.md#ownership-and-fencing
//!
//! [`EtcdLeases`] talks to etcd's v3 JSON gateway over plain HTTP with a small blocking client
//! (std `TcpStream`), which keeps protoc-built gRPC crates out of the build.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use sessionlog::{Durability, Store};

use crate::error::{Error, Result};
use crate::pointer::{ManifestPointers, PublishedManifest};

/// The raw stream each owner records its fencing token in when it takes a store.
pub const OWNER_STREAM: &str = "owner";

/// A granted lease on a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseGrant {
    /// The lease's id at the lease service.
    pub lease_id: i64,
    /// The fencing token: larger than every earlier owner's.
    pub token: u64,
    /// How long the lease lives without renewal.
    pub ttl: Duration,
}

/// Where leases come from. Acquire fails with [`Error::Owned`] while another holder's lease
/// lives.
pub trait LeaseService: Send + Sync + std::fmt::Debug {
    /// Takes the shard for `node` with a lease of `ttl`, if nobody holds it.
    fn acquire(&self, shard: &str, node: &str, ttl: Duration) -> Result<LeaseGrant>;
    /// Renews the lease; `Ok(false)` when it no longer exists (expired or revoked).
    fn renew(&self, lease_id: i64) -> Result<bool>;
    /// Gives the lease (and the shard) up.
    fn release(&self, lease_id: i64) -> Result<()>;
}

/// This node's ownership of one shard: the lease, the deadline until which this process may
/// count it valid, and the check every commit makes first.
#[derive(Debug)]
pub struct Owner {
    shard: String,
    grant: LeaseGrant,
    /// Valid until this instant by the local monotonic clock; `None` once lost.
    valid_until: Mutex<Option<Instant>>,
}

/// The safety margin subtracted from a lease's TTL: the owner stops counting on its lease this
/// much before the lease service can expire it, to absorb clock-rate differences and the time
/// a commit takes after its check.
fn margin(ttl: Duration) -> Duration {
    ttl / 5
}

impl Owner {
    /// Acquires `shard` for `node` from `leases`. The deadline starts before the request was
    /// sent, so it falls before the lease service's own.
    pub fn acquire(
        leases: &dyn LeaseService,
        shard: &str,
        node: &str,
        ttl: Duration,
    ) -> Result<Owner> {
        let sent = Instant::now();
        let grant = leases.acquire(shard, node, ttl)?;
        Ok(Owner {
            shard: shard.to_owned(),
            valid_until: Mutex::new(Some(sent + grant.ttl - margin(grant.ttl))),
            grant,
        })
    }

    /// Takes up a lease this process was granted before it restarted. Call [`Owner::renew`]
    /// first: until it succeeds the lease counts as lapsed, and it succeeds only if the lease
    /// service still holds the lease (an owner replaced meanwhile stays refused).
    pub fn resume(shard: &str, grant: LeaseGrant) -> Owner {
        Owner {
            shard: shard.to_owned(),
            valid_until: Mutex::new(Some(Instant::now())),
            grant,
        }
    }

    /// The lease (to keep it across a restart, see [`Owner::resume`]).
    pub fn grant(&self) -> &LeaseGrant {
        &self.grant
    }

    /// The shard this owner holds.
    pub fn shard(&self) -> &str {
        &self.shard
    }

    /// The fencing token.
    pub fn token(&self) -> u64 {
        self.grant.token
    }

    /// Renews the lease. After a failed or refused renewal the lease is lost for good:
    /// [`Owner::check`] fails from then on.
    pub fn renew(&self, leases: &dyn LeaseService) -> Result<()> {
        let sent = Instant::now();
        let renewed = leases.renew(self.grant.lease_id);
        let mut valid_until = self.valid_until.lock();
        match renewed {
            Ok(true) if valid_until.is_some() => {
                *valid_until = Some(sent + self.grant.ttl - margin(self.grant.ttl));
                Ok(())
            }
            Ok(_) => {
                *valid_until = None;
                Err(self.lost())
            }
            Err(e) => {
                // A renewal that failed may still be valid until its deadline; one that the
                // deadline passed is lost.
                if valid_until.is_some_and(|t| Instant::now() >= t) {
                    *valid_until = None;
                }
                Err(e)
            }
        }
    }

    /// Whether the lease is lost (by a refused renewal or a passed deadline, noticed now or
    /// before): exactly when [`Owner::check`] fails. A lost lease stays lost.
    pub fn is_lost(&self) -> bool {
        self.check().is_err()
    }

    /// Renews the lease in the background every third of its TTL until the returned
    /// [`Renewer`] is dropped or the lease is lost. A failed renewal is retried sooner (every
    /// tenth of the TTL) while the deadline has not passed; a lease service that reports the
    /// lease gone, or a deadline that passes without a renewal, ends the renewer with the
    /// lease lost, so every later [`Owner::check`] (and every commit through a [`Shipper`]
    /// owned by this owner) fails.
    ///
    /// [`Shipper`]: crate::Shipper
    pub fn keep_alive(self: &Arc<Owner>, leases: Arc<dyn LeaseService>) -> Renewer {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let owner = Arc::clone(self);
        let stopped = Arc::clone(&stop);
        let ttl = self.grant.ttl;
        let thread = std::thread::Builder::new()
            .name(format!("sessionlog-lease-{}", self.shard))
            .spawn(move || {
                let mut wait = ttl / 3;
                loop {
                    {
                        let (flag, wake) = &*stopped;
                        let mut flag = flag.lock();
                        if !*flag {
                            wake.wait_for(&mut flag, wait);
                        }
                        if *flag {
                            return;
                        }
                    }
                    wait = match owner.renew(&*leases) {
                        Ok(()) => ttl / 3,
                        Err(_) if owner.check().is_err() => return,
                        Err(_) => ttl / 10,
                    };
                }
            });
        Renewer {
            stop,
            // A thread that could not be started renews nothing: the lease then lapses at its
            // deadline, which every check observes.
            thread: thread.ok(),
        }
    }

    /// Fails with [`Error::LeaseLost`] unless the lease is still valid: call it before every
    /// commit (or use [`Owner::commit`]), so a writer that lost its lease stops before its
    /// next commit.
    pub fn check(&self) -> Result<()> {
        let mut valid_until = self.valid_until.lock();
        match *valid_until {
            Some(t) if Instant::now() < t => Ok(()),
            _ => {
                *valid_until = None;
                Err(self.lost())
            }
        }
    }

    /// Runs `commit` only while the lease is valid.
    pub fn commit<T, E>(&self, commit: impl FnOnce() -> Result<T, E>) -> Result<T>
    where
        Error: From<E>,
    {
        self.check()?;
        Ok(commit()?)
    }

    /// Records this owner's token in the store's `owner` raw stream, durably, after checking
    /// that no record there carries a larger or equal token (a store that a later owner
    /// already wrote is refused). Call it once after opening the store, before serving.
    pub fn record_in(&self, store: &Store) -> Result<()> {
        self.check()?;
        if let Some(newest) = recorded_token(store)? {
            if newest >= self.grant.token {
                return Err(Error::StaleOwner {
                    shard: self.shard.clone(),
                    token: self.grant.token,
                    recorded: newest,
                });
            }
        }
        let record = serde_json::json!({"shard": self.shard, "token": self.grant.token});
        let payload = record.to_string();
        store
            .raw_stream(OWNER_STREAM)?
            .append(&[payload.as_bytes()], Durability::Sync)?;
        Ok(())
    }

    /// Gives the lease up.
    pub fn release(self, leases: &dyn LeaseService) -> Result<()> {
        leases.release(self.grant.lease_id)
    }

    fn lost(&self) -> Error {
        Error::LeaseLost {
            shard: self.shard.clone(),
            token: self.grant.token,
        }
    }
}

/// The background renewal of an [`Owner`]'s lease ([`Owner::keep_alive`]); dropping it stops
/// the renewals (the lease then lapses at its deadline unless renewed otherwise).
#[derive(Debug)]
pub struct Renewer {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Renewer {
    /// Whether the renewer still runs: false once the lease was lost (or the thread could
    /// not be started).
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for Renewer {
    fn drop(&mut self) {
        let (flag, wake) = &*self.stop;
        *flag.lock() = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            // A renewal in flight ends within the lease service's request timeout.
            let _ = thread.join();
        }
    }
}

/// The largest fencing token recorded in the store's `owner` stream.
pub fn recorded_token(store: &Store) -> Result<Option<u64>> {
    let reader = store.log_reader();
    let name = format!("{}{OWNER_STREAM}", sessionlog::RAW_STREAM_PREFIX);
    let Some(next) = reader
        .stream_id(&name)
        .and_then(|id| reader.streams().into_iter().find(|s| s.id == id))
        .map(|s| s.next_seq.0)
    else {
        return Ok(None);
    };
    let mut newest = None;
    for record in store.raw_read(OWNER_STREAM, 0, next)? {
        let record = record?;
        let token = serde_json::from_slice::<serde_json::Value>(&record.payload)
            .ok()
            .and_then(|v| v["token"].as_u64());
        newest = newest.max(token);
    }
    Ok(newest)
}

/// Leases in etcd (v3, through its JSON gateway): the shard's key
/// `/sessionlog/owner/{shard}` is created under a lease by a transaction that succeeds only if
/// the key does not exist; the revision that created it is the fencing token.
#[derive(Debug, Clone)]
pub struct EtcdLeases {
    /// `host:port` of each member, tried in order.
    endpoints: Vec<String>,
}

impl EtcdLeases {
    /// A client for the members at `endpoints` (`http://host:port` or `host:port`).
    pub fn new(endpoints: &[String]) -> Result<EtcdLeases> {
        let endpoints: Vec<String> = endpoints
            .iter()
            .map(|e| {
                e.trim_start_matches("http://")
                    .trim_end_matches('/')
                    .to_owned()
            })
            .collect();
        if endpoints.is_empty() || endpoints.iter().any(|e| e.is_empty() || e.contains('/')) {
            return Err(Error::BadLocation {
                url: endpoints.join(","),
                reason: "etcd endpoints are http://HOST:PORT".into(),
            });
        }
        Ok(EtcdLeases { endpoints })
    }

    /// POSTs `body` to `path` at the first member that answers.
    fn call(&self, path: &str, body: &serde_json::Value) -> Result<serde_json::Value> {
        let body = body.to_string();
        let mut last = String::new();
        for endpoint in &self.endpoints {
            match post(endpoint, path, &body) {
                Ok(value) => return Ok(value),
                Err(e) => last = format!("{endpoint}: {e}"),
            }
        }
        Err(Error::LeaseService {
            op: path.to_owned(),
            message: last,
        })
    }
}

fn owner_key(shard: &str) -> String {
    format!("/sessionlog/owner/{shard}")
}

/// etcd's JSON gateway writes 64-bit integers as strings.
fn int_field(value: &serde_json::Value) -> Option<i64> {
    value
        .as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| value.as_i64())
}

impl LeaseService for EtcdLeases {
    fn acquire(&self, shard: &str, node: &str, ttl: Duration) -> Result<LeaseGrant> {
        let ttl_seconds = ttl.as_secs().max(1);
        let granted = self.call(
            "/v3/lease/grant",
            &serde_json::json!({ "TTL": ttl_seconds }),
        )?;
        let lease_id = int_field(&granted["ID"]).ok_or_else(|| Error::LeaseService {
            op: "/v3/lease/grant".into(),
            message: format!("no lease id in {granted}"),
        })?;
        let key = base64(owner_key(shard).as_bytes());
        let txn = serde_json::json!({
            "compare": [{"key": key, "target": "CREATE", "create_revision": "0"}],
            "success": [{"request_put": {"key": key, "value": base64(node.as_bytes()), "lease": lease_id.to_string()}}],
            "failure": [{"request_range": {"key": key}}],
        });
        let answer = self.call("/v3/kv/txn", &txn)?;
        if answer["succeeded"].as_bool() != Some(true) {
            let _ = self.release(lease_id);
            return Err(Error::Owned {
                shard: shard.to_owned(),
            });
        }
        let token = int_field(&answer["header"]["revision"])
            .and_then(|r| u64::try_from(r).ok())
            .ok_or_else(|| Error::LeaseService {
                op: "/v3/kv/txn".into(),
                message: format!("no revision in {answer}"),
            })?;
        Ok(LeaseGrant {
            lease_id,
            token,
            ttl: Duration::from_secs(ttl_seconds),
        })
    }

    fn renew(&self, lease_id: i64) -> Result<bool> {
        let answer = self.call(
            "/v3/lease/keepalive",
            &serde_json::json!({ "ID": lease_id.to_string() }),
        )?;
        Ok(int_field(&answer["result"]["TTL"]).is_some_and(|ttl| ttl > 0))
    }

    fn release(&self, lease_id: i64) -> Result<()> {
        self.call(
            "/v3/lease/revoke",
            &serde_json::json!({ "ID": lease_id.to_string() }),
        )
        .map(|_| ())
    }
}

fn pointer_key(shard: &str) -> String {
    format!("/sessionlog/manifest/{shard}")
}

/// Manifest pointers in etcd, beside the leases: `/sessionlog/manifest/{shard}` holds the
/// published manifest as JSON (`{"generation":G,"fencing_token":T}`), under no lease (it
/// outlives every owner), and moves in a transaction that compares the shard's owner key's
/// lease with the writer's and the pointer's value with the one the writer read.
impl ManifestPointers for EtcdLeases {
    fn read(&self, shard: &str) -> Result<Option<PublishedManifest>> {
        let key = base64(pointer_key(shard).as_bytes());
        let answer = self.call("/v3/kv/range", &serde_json::json!({ "key": key }))?;
        let Some(kv) = answer["kvs"].as_array().and_then(|kvs| kvs.first()) else {
            return Ok(None);
        };
        let bad = |what: String| Error::LeaseService {
            op: "/v3/kv/range".into(),
            message: format!("the manifest pointer of {shard}: {what}"),
        };
        let value = kv["value"]
            .as_str()
            .and_then(unbase64)
            .ok_or_else(|| bad(format!("a value that is not base64 in {kv}")))?;
        serde_json::from_slice(&value)
            .map(Some)
            .map_err(|e| bad(format!("not a published manifest ({e})")))
    }

    fn advance(
        &self,
        shard: &str,
        lease_id: i64,
        from: Option<PublishedManifest>,
        to: PublishedManifest,
    ) -> Result<bool> {
        let key = base64(pointer_key(shard).as_bytes());
        // Written by field order, so that the value read back compares equal byte for byte.
        let encode =
            |p: &PublishedManifest| base64(serde_json::to_string(p).unwrap_or_default().as_bytes());
        let was = match &from {
            None => serde_json::json!({"key": key, "target": "CREATE", "create_revision": "0"}),
            Some(p) => serde_json::json!({"key": key, "target": "VALUE", "value": encode(p)}),
        };
        let owner = base64(owner_key(shard).as_bytes());
        let txn = serde_json::json!({
            "compare": [
                {"key": owner, "target": "LEASE", "lease": lease_id.to_string()},
                was,
            ],
            "success": [{"request_put": {"key": key, "value": encode(&to)}}],
        });
        let answer = self.call("/v3/kv/txn", &txn)?;
        Ok(answer["succeeded"].as_bool() == Some(true))
    }
}

/// One HTTP/1.1 POST of JSON, `Connection: close`, with short timeouts; the answer's JSON.
fn post(endpoint: &str, path: &str, body: &str) -> std::result::Result<serde_json::Value, String> {
    use std::net::ToSocketAddrs;
    let address = endpoint
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .next()
        .ok_or("no address")?;
    let timeout = Duration::from_secs(3);
    let mut stream = TcpStream::connect_timeout(&address, timeout).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(timeout))
        .map_err(|e| e.to_string())?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {endpoint}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    stream
        .read_to_end(&mut response)
        .map_err(|e| e.to_string())?;
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no HTTP header end")?;
    let head = String::from_utf8_lossy(&response[..split]).to_string();
    let mut payload = response[split + 4..].to_vec();
    let status = head.split(' ').nth(1).unwrap_or("");
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        payload = dechunk(&payload).ok_or("bad chunked body")?;
    }
    let value: serde_json::Value =
        serde_json::from_slice(&payload).map_err(|e| format!("HTTP {status}: not JSON ({e})"))?;
    if status != "200" {
        return Err(format!("HTTP {status}: {value}"));
    }
    Ok(value)
}

/// The body of a `Transfer-Encoding: chunked` response.
fn dechunk(mut bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = bytes.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&bytes[..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        bytes = bytes.get(line_end + 2..)?;
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(bytes.get(..size)?);
        bytes = bytes.get(size + 2..)?;
    }
}

/// Standard base64 with padding (etcd's JSON encoding of keys and values).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The bytes of standard base64 text (with or without padding); `None` for anything else.
fn unbase64(text: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let text = text.trim_end_matches('=').as_bytes();
    if text.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for chunk in text.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= digit(c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_what_it_encodes_and_refuses_other_text() {
        for bytes in [
            &b""[..],
            b"f",
            b"fo",
            b"foo",
            b"foob",
            b"{\"generation\":3}",
            &[0, 255, 7],
        ] {
            assert_eq!(
                unbase64(&base64(bytes)).as_deref(),
                Some(bytes),
                "{bytes:?}"
            );
        }
        assert_eq!(unbase64("Zg").as_deref(), Some(&b"f"[..]));
        assert_eq!(unbase64("Z"), None);
        assert_eq!(unbase64("Zm9v!"), None);
    }

    #[test]
    fn base64_matches_the_standard_alphabet_with_padding() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(
            base64(b"/sessionlog/owner/s1"),
            "L3Nlc3Npb25sb2cvb3duZXIvczE="
        );
    }

    #[test]
    fn a_chunked_body_is_joined_and_a_cut_one_refused() {
        assert_eq!(
            dechunk(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n").as_deref(),
            Some(&b"abcde"[..])
        );
        assert_eq!(dechunk(b"5\r\nab"), None);
    }
}
