//! Connections to the server: TLS per `sslmode`, the per-connection settings that bound
//! how long a dead owner keeps its lock, and the one mapping of client errors onto
//! inboxlog errors (which names host and port and never the password).
//!
//! Each connection is a `postgres::Client`, which drives tokio-postgres on a small
//! current-thread runtime of its own: the synchronous core calls it like a function.

use std::fmt;
use std::time::Duration;

use postgres::{Client, NoTls};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::tls::{self, Check};
use super::url::{ChannelBinding, Host, PgUrl, SslMode, TargetSessionAttrs};
use crate::error::{Error, ErrorKind, Result};
use crate::store::Durability;

/// How long the server waits on a silent client before it probes, between probes, and
/// how many unanswered probes end the connection; and how long data it sent may stay
/// unacknowledged. Together they bound how long a dead machine's session stays locked:
/// about 2 s once its connection is idle, 2 s after it stopped acknowledging otherwise.
const SERVER_KEEPALIVE: &str = "SELECT set_config('tcp_keepalives_idle', '1', false), \
     set_config('tcp_keepalives_interval', '1', false), \
     set_config('tcp_keepalives_count', '1', false)";
const SERVER_USER_TIMEOUT: &str = "SELECT set_config('tcp_user_timeout', '2000', false)";
/// The `batched` and `none` modes' commits return before the WAL is flushed.
const ASYNCHRONOUS_COMMIT: &str = "SET synchronous_commit = off";

/// Whether a failed statement may have changed anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Stmt {
    /// A read, or a write known not to have been sent: nothing changed.
    Read,
    /// A write that was sent: if the connection died, it may or may not have committed.
    Write,
}

/// Opens connections to one URL's servers, with the store's durability settings.
pub(super) struct Connector {
    url: PgUrl,
    tls: Option<MakeRustlsConnect>,
    durability: Durability,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("url", &self.url)
            .field("durability", &self.durability)
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// A connector for `url`; reads `sslrootcert` now, so a bad file fails here.
    pub fn new(url: PgUrl, durability: Durability) -> Result<Connector> {
        let tls = tls::config(&url)?.map(MakeRustlsConnect::new);
        Ok(Connector {
            url,
            tls,
            durability,
        })
    }

    /// The URL (its `Display` shows no password).
    pub fn url(&self) -> &PgUrl {
        &self.url
    }

    fn config(&self) -> postgres::Config {
        let url = &self.url;
        let mut config = postgres::Config::new();
        config
            .user(&url.user)
            .dbname(&url.dbname)
            .application_name(&url.application_name)
            .connect_timeout(url.connect_timeout)
            // The client's side of noticing a dead server.
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(5))
            .keepalives_interval(Duration::from_secs(1))
            .keepalives_retries(3);
        if let Some(password) = &url.password {
            config.password(password);
        }
        if let Some(options) = &url.options {
            config.options(options);
        }
        config
            .target_session_attrs(match url.target_session_attrs {
                TargetSessionAttrs::Any => postgres::config::TargetSessionAttrs::Any,
                TargetSessionAttrs::ReadWrite => postgres::config::TargetSessionAttrs::ReadWrite,
            })
            .channel_binding(match url.channel_binding {
                ChannelBinding::Disable => postgres::config::ChannelBinding::Disable,
                ChannelBinding::Prefer => postgres::config::ChannelBinding::Prefer,
                ChannelBinding::Require => postgres::config::ChannelBinding::Require,
            })
            .load_balance_hosts(if url.load_balance_hosts {
                postgres::config::LoadBalanceHosts::Random
            } else {
                postgres::config::LoadBalanceHosts::Disable
            });
        for host in &url.hosts {
            match host {
                Host::Tcp(name, port) => config.host(name).port(*port),
                Host::Socket(dir, port) => config.host_path(dir).port(*port),
            };
        }
        config
    }

    /// A new connection, set up for the store: TLS as `sslmode` says (`tls.rs`),
    /// keepalives that bound a dead owner's lock, and asynchronous commit in the
    /// `batched` and `none` modes.
    pub fn connect(&self) -> Result<Client> {
        let mut config = self.config();
        let connected = match &self.tls {
            None => config
                .ssl_mode(postgres::config::SslMode::Disable)
                .connect(NoTls),
            // `allow` and `prefer`: TLS whenever the server offers it; a handshake that
            // fails fails the connection, never falling back to plain text.
            Some(tls) if self.url.sslmode == SslMode::Prefer => config
                .ssl_mode(postgres::config::SslMode::Prefer)
                .connect(tls.clone()),
            Some(tls) => config
                .ssl_mode(postgres::config::SslMode::Require)
                .connect(tls.clone()),
        };
        let connected = connected.map_err(|e| match self.tls_problem(&e) {
            Some(text) => Error::new(ErrorKind::Unavailable, self.url.redact(&text)),
            None => self.fail("cannot connect", &e, Stmt::Read),
        });
        let mut client = connected?;
        // Every setting in one round trip (a new worker's first read waits for it); a
        // server that refuses one (tcp_user_timeout is PostgreSQL 12+) rolls the
        // statement back whole, and then gets them one by one.
        let asynchronous = self.durability != Durability::Sync;
        let all = if asynchronous {
            format!("{SERVER_KEEPALIVE}; {SERVER_USER_TIMEOUT}; {ASYNCHRONOUS_COMMIT}")
        } else {
            format!("{SERVER_KEEPALIVE}; {SERVER_USER_TIMEOUT}")
        };
        if client.batch_execute(&all).is_ok() {
            return Ok(client);
        }
        client
            .batch_execute(SERVER_KEEPALIVE)
            .map_err(|e| self.fail("cannot set up the connection", &e, Stmt::Read))?;
        // Older servers keep the keepalives alone.
        let _ = client.batch_execute(SERVER_USER_TIMEOUT);
        if asynchronous {
            client
                .batch_execute(ASYNCHRONOUS_COMMIT)
                .map_err(|e| self.fail("cannot set up the connection", &e, Stmt::Read))?;
        }
        Ok(client)
    }

    /// The inboxlog error for a failed call: `doing` says what was being done (to which
    /// session). A connection that failed or died is `unavailable` (for a sent write,
    /// with its outcome unknown); a statement the server refused is `io`. The message
    /// names the server and never the password.
    pub fn fail(&self, doing: impl fmt::Display, e: &postgres::Error, stmt: Stmt) -> Error {
        let cause = chain(e);
        let (kind, text) = match e.as_db_error() {
            Some(db) if !connection_level(db.code().code()) => (
                ErrorKind::Io,
                format!(
                    "{doing}: {} refused it: {cause} (SQLSTATE {})",
                    self.url.describe(),
                    db.code().code()
                ),
            ),
            _ => match stmt {
                Stmt::Read => (
                    ErrorKind::Unavailable,
                    format!("{doing}: cannot reach {}: {cause}", self.url.describe()),
                ),
                Stmt::Write => (
                    ErrorKind::Unavailable,
                    format!(
                        "{doing}: the connection to {} failed while the call was in flight \
                         ({cause}): its outcome is unknown (it may or may not have committed); \
                         reopen the session to see whether it did",
                        self.url.describe()
                    ),
                ),
            },
        };
        Error::new(kind, self.url.redact(&text))
    }

    /// The message for a connect that failed over TLS itself: a server that does not
    /// offer the TLS the mode requires, or a certificate the mode refuses (naming the
    /// problem, what was checked against which roots, and the ways out). `None` for any
    /// other failure.
    fn tls_problem(&self, e: &postgres::Error) -> Option<String> {
        let check = Check::of(&self.url)?;
        let mode = self.url.sslmode.name();
        let server = self.url.describe();
        if let Some(rustls::Error::InvalidCertificate(problem)) = rustls_error(e) {
            if check == Check::Signatures {
                // Only the handshake signature is checked: the peer showed a
                // certificate whose key it does not hold.
                return Some(format!(
                    "cannot connect: {server} did not sign the TLS handshake with its \
                     certificate's key ({}): sslmode={mode} checks no certificate but does \
                     check that, so something on the path may be posing as the server",
                    rustls::Error::InvalidCertificate(problem.clone())
                ));
            }
            let way_out = match problem {
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. } => {
                    "connect by a host name the certificate holds, or use sslmode=verify-ca \
                     to check the chain only"
                }
                _ if self.url.sslmode == SslMode::Require => {
                    "name the server's CA certificate in sslrootcert, or leave sslrootcert out \
                     to encrypt without checking the certificate"
                }
                _ => {
                    "name the server's CA certificate with sslrootcert=/path/ca.pem, or use \
                     sslmode=require to encrypt without checking the certificate"
                }
            };
            let what = match problem {
                rustls::CertificateError::UnknownIssuer => {
                    "no trusted root signed it (invalid peer certificate: UnknownIssuer)".to_owned()
                }
                other => rustls::Error::InvalidCertificate(other.clone()).to_string(),
            };
            return Some(format!(
                "cannot connect: {server} presented a certificate that sslmode={mode} refuses \
                 (it {}, against {}): {what}; {way_out}",
                check.describe(),
                tls::roots_source(&self.url),
            ));
        }
        let cause = chain(e);
        if cause.contains("server does not support TLS") {
            return Some(format!(
                "cannot connect: {server} does not offer TLS, which sslmode={mode} requires \
                 (sslmode=prefer would go on in plain text)"
            ));
        }
        None
    }

    /// The `unavailable` error of a call made on a connection already known to be
    /// closed: nothing was sent.
    pub fn closed(&self, doing: impl fmt::Display) -> Error {
        Error::new(
            ErrorKind::Unavailable,
            format!(
                "{doing}: the connection to {} is closed; nothing was sent",
                self.url.describe()
            ),
        )
    }
}

/// SQLSTATEs that mean the connection (not the statement) failed: connection
/// exceptions, operator intervention (shutdown, terminated backend), refused
/// authentication, a missing database, too many connections.
fn connection_level(code: &str) -> bool {
    code.starts_with("08")
        || code.starts_with("57P")
        || code.starts_with("28")
        || code == "3D000"
        || code == "53300"
}

/// The error and its causes, `: `-separated (the client's top level says only "db
/// error" or "error connecting to server").
fn chain(e: &postgres::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.ends_with(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

/// The rustls error in `e`'s causes, if the connection failed in the TLS handshake.
fn rustls_error(e: &postgres::Error) -> Option<&rustls::Error> {
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        if let Some(tls) = cause
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(tls);
        }
        source = cause.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_level_codes() {
        for code in [
            "08006", "57P01", "57P02", "28P01", "28000", "3D000", "53300",
        ] {
            assert!(connection_level(code), "{code}");
        }
        for code in ["23505", "42P01", "40001", "XX000"] {
            assert!(!connection_level(code), "{code}");
        }
    }

    #[test]
    fn a_new_connection_has_every_setting_of_its_durability() {
        let Ok(url) = std::env::var("INBOXLOG_TEST_PG") else {
            return;
        };
        for (durability, commit) in [(Durability::Sync, "on"), (Durability::None, "off")] {
            let connector = Connector::new(PgUrl::parse(&url).unwrap(), durability).unwrap();
            let mut client = connector.connect().unwrap();
            let show = |client: &mut Client, name: &str| -> String {
                client
                    .query_one(&format!("SHOW {name}"), &[])
                    .unwrap()
                    .get(0)
            };
            assert_eq!(show(&mut client, "tcp_keepalives_idle"), "1");
            assert_eq!(show(&mut client, "tcp_keepalives_interval"), "1");
            assert_eq!(show(&mut client, "tcp_keepalives_count"), "1");
            assert_eq!(show(&mut client, "tcp_user_timeout"), "2000");
            assert_eq!(show(&mut client, "synchronous_commit"), commit);
            client.close().unwrap();
        }
    }

    #[test]
    fn a_missing_or_empty_root_file_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        for (file, needle) in [
            (dir.path().join("missing.pem"), "missing.pem"),
            (empty, "holds no PEM certificate"),
        ] {
            let url = PgUrl::parse(&format!(
                "postgresql://u:pw@h/db?sslmode=verify-full&sslrootcert={}",
                file.display()
            ))
            .unwrap();
            let err = Connector::new(url, Durability::Sync).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput);
            assert!(err.to_string().contains(needle), "{err}");
        }
    }
}
