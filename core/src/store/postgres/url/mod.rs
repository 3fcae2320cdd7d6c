//! `postgresql://` URLs in libpq's URI syntax (ARCHITECTURE.md#postgresql), parsed here
//! rather than by the client so that every message about a URL names its host, port,
//! database and user and never its password, and so that `sslmode` has libpq's
//! meaning (see [`SslMode`]).
//!
//! `postgresql://[user[:password]@][host[:port][,host[:port]…]][/dbname][?key=value&…]`,
//! `postgres://` alike, read as libpq reads it: the user and password end at the first
//! `@` met before any `/` (so a raw `?`, `:` or `,` may sit in a password); each part,
//! and each parameter's name and value, is percent-decoded with strict hex and `%00`
//! refused; a host in `[…]` is an IPv6 address (decoded too, `[fe80::1%25eth0]`), one
//! starting with `/` (percent-encoded in the authority, or `?host=/run/postgresql`) a
//! Unix socket directory; an empty host is `localhost` and an empty port 5432; a `port`
//! or `host` parameter replaces the authority's list. Parameters: libpq's key words the
//! store honours are taken, the others libpq knows are refused as unsupported, anything
//! else as unknown, each by name and never with its value.
//!
//! One rule stricter than libpq: no raw `@` may follow the user and password (in a host,
//! the database name or the query). libpq would read such a URL, but only by taking part
//! of a password whose `@` or `/` was not percent-encoded as a host or a database name,
//! which its messages would then show.
//!
//! No message shows a password, whatever the input: before anything is reported,
//! [`Secrets`] marks every byte range of the text that could hold one under any reading
//! (from the first `:` after the scheme to the last `@`, and the values of `password`
//! and the other secret parameters, with the parts after them that are not another
//! parameter), and a value from those ranges is never echoed.
//!
//! Three files: `grammar.rs` reads the text (authority, hosts and ports, percent
//! decoding), `vocabulary.rs` holds the key words and what each value means, and
//! `redact.rs` finds and hides whatever may hold a password.

mod grammar;
mod redact;
mod vocabulary;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Result, invalid};
use crate::json;

pub use self::redact::redact_url;
pub use self::vocabulary::{ChannelBinding, SslMode, TargetSessionAttrs};

use self::redact::{Secrets, scheme_part};

/// One server address of a URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    /// A host name or IP address, and its port.
    Tcp(String, u16),
    /// A Unix socket directory, and the port that names the socket file in it.
    Socket(PathBuf, u16),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Tcp(host, port) if host.contains(':') => write!(f, "[{host}]:{port}"),
            Host::Tcp(host, port) => write!(f, "{host}:{port}"),
            Host::Socket(dir, port) => write!(f, "{}/.s.PGSQL.{port}", dir.display()),
        }
    }
}

/// A parsed `postgresql://` URL. Its `Debug` and `Display` never show the password.
#[derive(Clone, PartialEq, Eq)]
pub struct PgUrl {
    /// The servers to try, in order.
    pub hosts: Vec<Host>,
    /// The role to log in as.
    pub user: String,
    /// The password, if any (never printed).
    pub(crate) password: Option<String>,
    /// The database.
    pub dbname: String,
    /// How TLS is used.
    pub sslmode: SslMode,
    /// PEM file of the certificates to trust instead of the bundled web roots;
    /// `system` means the platform's trusted roots.
    pub sslrootcert: Option<PathBuf>,
    /// How long one connection attempt may take.
    pub connect_timeout: Duration,
    /// `application_name` shown in `pg_stat_activity` (or `fallback_application_name`,
    /// or `inboxlog`).
    pub application_name: String,
    /// Server options sent at startup (`-c name=value …`).
    pub options: Option<String>,
    /// Which of several servers to settle on.
    pub target_session_attrs: TargetSessionAttrs,
    /// Whether SCRAM binds to the TLS channel.
    pub channel_binding: ChannelBinding,
    /// Whether the hosts are tried in a random order (`load_balance_hosts=random`).
    pub load_balance_hosts: bool,
}

impl fmt::Debug for PgUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PgUrl({self})")
    }
}

impl fmt::Display for PgUrl {
    /// `postgresql://user@host:port/db?sslmode=…`, without the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "postgresql://{}@{}/{}?sslmode={}",
            self.user,
            self.servers(),
            self.dbname,
            self.sslmode.name()
        )
    }
}

/// The two schemes libpq reads as URIs.
const SCHEMES: [&str; 2] = ["postgresql://", "postgres://"];

impl PgUrl {
    /// Parses `url`; an error (`invalid_input`) names what is wrong and never repeats
    /// the password, whatever the URL's shape.
    pub fn parse(url: &str) -> Result<PgUrl> {
        let Some(rest) = SCHEMES.iter().find_map(|s| url.strip_prefix(s)) else {
            let shown = match scheme_part(url) {
                "" => "(not shown)".to_owned(),
                part => format!("starting {} (the rest not shown)", json::quote(part)),
            };
            return Err(invalid(format!(
                "invalid PostgreSQL URL {shown}: it must start with postgresql:// or \
                 postgres://"
            )));
        };
        let secrets = Secrets::of(url);
        grammar::parse(rest, &secrets).map_err(|e| {
            e.context(format_args!(
                "invalid PostgreSQL URL {}",
                json::quote(&secrets.redacted())
            ))
        })
    }

    /// The servers as `host:port[,host:port…]`, for messages.
    pub fn servers(&self) -> String {
        let hosts: Vec<String> = self.hosts.iter().map(Host::to_string).collect();
        hosts.join(",")
    }

    /// Where this URL points, for messages: `the PostgreSQL server at HOST:PORT
    /// (database "db", user "u")`.
    pub fn describe(&self) -> String {
        format!(
            "the PostgreSQL server at {} (database {}, user {})",
            self.servers(),
            json::quote(&self.dbname),
            json::quote(&self.user)
        )
    }

    /// `text` with every occurrence of the password replaced by `***`: a last guard on
    /// messages built from the server's or the client's words.
    pub fn redact(&self, text: &str) -> String {
        match self.password.as_deref() {
            Some(p) if !p.is_empty() => text.replace(p, "***"),
            _ => text.to_owned(),
        }
    }
}
