//! `postgresql://` URLs (libpq's URI syntax, ARCHITECTURE.md#postgresql), parsed here rather than by
//! the client so that every message about a URL names its host, port, database and user
//! and never its password, and so that `sslmode` has libpq's meaning (see
//! [`SslMode`]).
//!
//! `postgresql://[user[:password]@][host[:port][,host[:port]…]][/dbname][?key=value&…]`,
//! `postgres://` alike; parts are percent-decoded; a host in `[…]` is an IPv6 address,
//! one starting with `/` (percent-encoded in the authority, or `?host=/run/postgresql`)
//! a Unix socket directory. Query keys: `host`, `port`, `user`, `password`, `dbname`,
//! `sslmode`, `sslrootcert`, `connect_timeout`, `application_name`, `options`; any
//! other is refused, as libpq refuses it.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Result, invalid};
use crate::json;

/// How a connection uses TLS (the URL's `sslmode`), with libpq's meanings (the table
/// is in `tls.rs`): only `verify-ca` and `verify-full` (and `require` with
/// `sslrootcert`) check the server's certificate; `verify-full` is the one to use in
/// production.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SslMode {
    /// Plain TCP, never TLS.
    Disable,
    /// TLS whenever the server offers it, the certificate unchecked; plain text only
    /// with a server that offers no TLS (the default; `allow` means the same).
    Prefer,
    /// TLS required; the certificate chain is checked only when `sslrootcert` is given.
    Require,
    /// TLS required, the certificate chain checked (not the host name).
    VerifyCa,
    /// TLS required, the certificate chain and the host name checked.
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Result<SslMode> {
        Ok(match text {
            "disable" => SslMode::Disable,
            "prefer" | "allow" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(invalid(format!(
                    "sslmode {} in the PostgreSQL URL is not one of disable, allow, prefer, \
                     require, verify-ca, verify-full",
                    json::quote(other)
                )));
            }
        })
    }

    /// The libpq spelling.
    pub fn name(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

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
    /// `application_name` shown in `pg_stat_activity`.
    pub application_name: String,
    /// Server options sent at startup (`-c name=value …`).
    pub options: Option<String>,
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

/// The default port.
const DEFAULT_PORT: u16 = 5432;

impl PgUrl {
    /// Parses `url`; an error (`invalid_input`) names what is wrong and never repeats
    /// the password.
    pub fn parse(url: &str) -> Result<PgUrl> {
        parse(url).map_err(|e| {
            let shown = redact_url(url);
            e.context(format_args!(
                "invalid PostgreSQL URL {}",
                json::quote(&shown)
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

/// `url` with its userinfo password (if any) replaced by `***`, and any `password=`
/// query value too: safe to show even when it does not parse.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(rest_at) = out.find("://").map(|i| i + 3) {
        let end = out[rest_at..]
            .find(['/', '?'])
            .map_or(out.len(), |i| rest_at + i);
        if let Some(at) = out[rest_at..end].rfind('@').map(|i| rest_at + i)
            && let Some(colon) = out[rest_at..at].find(':').map(|i| rest_at + i)
        {
            out.replace_range(colon + 1..at, "***");
        }
    }
    if let Some(q) = out.find('?') {
        let mut query = String::new();
        for (i, pair) in out[q + 1..].split('&').enumerate() {
            if i > 0 {
                query.push('&');
            }
            match pair.split_once('=') {
                Some((key, _)) if key == "password" => {
                    query.push_str(key);
                    query.push_str("=***");
                }
                _ => query.push_str(pair),
            }
        }
        out.truncate(q + 1);
        out.push_str(&query);
    }
    out
}

fn parse(url: &str) -> Result<PgUrl> {
    let rest = url
        .strip_prefix("postgresql://")
        .or_else(|| url.strip_prefix("postgres://"))
        .ok_or_else(|| invalid("it must start with postgresql:// or postgres://"))?;
    let (rest, query) = match rest.split_once('?') {
        Some((rest, query)) => (rest, Some(query)),
        None => (rest, None),
    };
    let (authority, dbname) = match rest.split_once('/') {
        Some((authority, db)) => (authority, (!db.is_empty()).then(|| decode(db, "dbname"))),
        None => (rest, None),
    };
    let (userinfo, hostspec) = match authority.rsplit_once('@') {
        Some((userinfo, hostspec)) => (Some(userinfo), hostspec),
        None => (None, authority),
    };
    let mut user = None;
    let mut password = None;
    if let Some(userinfo) = userinfo {
        let (u, p) = match userinfo.split_once(':') {
            Some((u, p)) => (u, Some(p)),
            None => (userinfo, None),
        };
        if !u.is_empty() {
            user = Some(decode(u, "user")?);
        }
        password = p.map(|p| decode(p, "password")).transpose()?;
    }
    let mut hosts: Vec<(String, Option<u16>)> = Vec::new();
    if !hostspec.is_empty() {
        for part in hostspec.split(',') {
            hosts.push(host_port(part)?);
        }
    }
    let mut dbname = dbname.transpose()?;
    let mut url_ports: Option<Vec<u16>> = None;
    let mut sslmode = None;
    let mut sslrootcert = None;
    let mut connect_timeout = Duration::from_secs(10);
    let mut application_name = "inboxlog".to_owned();
    let mut options = None;
    for pair in query.into_iter().flat_map(|q| q.split('&')) {
        if pair.is_empty() {
            continue;
        }
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| invalid(format!("parameter {} has no value", json::quote(pair))))?;
        let value = decode(value, key)?;
        match key {
            "host" => {
                hosts = value
                    .split(',')
                    .map(|h| (h.to_owned(), None))
                    .collect::<Vec<_>>();
            }
            "port" => {
                url_ports = Some(value.split(',').map(port).collect::<Result<Vec<_>>>()?);
            }
            "user" => user = Some(value),
            "password" => password = Some(value),
            "dbname" => dbname = Some(value),
            "sslmode" => sslmode = Some(SslMode::parse(&value)?),
            "sslrootcert" => sslrootcert = Some(PathBuf::from(value)),
            "connect_timeout" => {
                let secs: u64 = value.parse().map_err(|_| {
                    invalid(format!(
                        "connect_timeout {} is not a whole number of seconds",
                        json::quote(&value)
                    ))
                })?;
                // libpq: 0 (or less) waits forever; a day is forever enough.
                connect_timeout = Duration::from_secs(if secs == 0 { 86_400 } else { secs });
            }
            "application_name" => application_name = value,
            "options" => options = Some(value),
            other => {
                return Err(invalid(format!(
                    "unknown parameter {} (known: host, port, user, password, dbname, sslmode, \
                     sslrootcert, connect_timeout, application_name, options)",
                    json::quote(other)
                )));
            }
        }
    }
    // libpq: the platform's roots are for verify-full, its default with them.
    let system_roots = sslrootcert.as_deref() == Some(std::path::Path::new("system"));
    let sslmode = match sslmode {
        None if system_roots => SslMode::VerifyFull,
        None => SslMode::Prefer,
        Some(mode) if system_roots && mode != SslMode::VerifyFull => {
            return Err(invalid(format!(
                "sslmode={} is too weak for sslrootcert=system (use verify-full)",
                mode.name()
            )));
        }
        Some(mode) => mode,
    };
    if hosts.is_empty() {
        hosts.push(("localhost".to_owned(), None));
    }
    if let Some(ports) = &url_ports
        && ports.len() != 1
        && ports.len() != hosts.len()
    {
        return Err(invalid(format!(
            "{} ports for {} hosts (give one port, or one per host)",
            ports.len(),
            hosts.len()
        )));
    }
    let hosts = hosts
        .into_iter()
        .enumerate()
        .map(|(i, (host, own))| {
            let port = own
                .or_else(|| url_ports.as_ref().map(|p| p[i.min(p.len() - 1)]))
                .unwrap_or(DEFAULT_PORT);
            if host.starts_with('/') {
                Host::Socket(PathBuf::from(host), port)
            } else {
                Host::Tcp(host, port)
            }
        })
        .collect();
    let user = match user {
        Some(u) => u,
        None => std::env::var("PGUSER")
            .or_else(|_| std::env::var("USER"))
            .unwrap_or_else(|_| "postgres".to_owned()),
    };
    if user.is_empty() {
        return Err(invalid("the user name is empty"));
    }
    Ok(PgUrl {
        dbname: dbname.unwrap_or_else(|| user.clone()),
        hosts,
        user,
        password,
        sslmode,
        sslrootcert,
        connect_timeout,
        application_name,
        options,
    })
}

/// `host[:port]`, the host possibly `[ipv6]` or percent-encoded (a socket directory).
fn host_port(part: &str) -> Result<(String, Option<u16>)> {
    if let Some(v6) = part.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| invalid(format!("host {} lacks its ']'", json::quote(part))))?;
        let port = match after {
            "" => None,
            p => Some(port(p.strip_prefix(':').ok_or_else(|| {
                invalid(format!("unexpected {} after the host", json::quote(after)))
            })?)?),
        };
        return Ok((host.to_owned(), port));
    }
    let (host, port) = match part.rsplit_once(':') {
        Some((h, p)) => (h, Some(self::port(p)?)),
        None => (part, None),
    };
    if host.is_empty() {
        return Err(invalid(format!(
            "host list {} has an empty host",
            json::quote(part)
        )));
    }
    Ok((decode(host, "host")?, port))
}

fn port(text: &str) -> Result<u16> {
    match text.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(invalid(format!(
            "port {} is not a number from 1 to 65535",
            json::quote(text)
        ))),
    }
}

/// Percent-decodes one URL part (`what` names it in errors, never its value when it is
/// the password).
fn decode(text: &str, what: &str) -> Result<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| invalid(format!("bad percent-encoding in the {what}")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| invalid(format!("the {what} is not UTF-8 once decoded")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_url() {
        let u = PgUrl::parse(
            "postgresql://al%40ice:s3cr%3At@db.example:6543/my%20db?sslmode=verify-full&connect_timeout=3&application_name=w1",
        )
        .unwrap();
        assert_eq!(u.hosts, [Host::Tcp("db.example".into(), 6543)]);
        assert_eq!((u.user.as_str(), u.dbname.as_str()), ("al@ice", "my db"));
        assert_eq!(u.password.as_deref(), Some("s3cr:t"));
        assert_eq!(u.sslmode, SslMode::VerifyFull);
        assert_eq!(u.connect_timeout, Duration::from_secs(3));
        assert_eq!(u.application_name, "w1");
        let shown = format!("{u} {u:?} {}", u.describe());
        assert!(!shown.contains("s3cr"), "{shown}");
        assert!(shown.contains("db.example:6543"), "{shown}");
        assert_eq!(u.redact("password s3cr:t leaked"), "password *** leaked");
    }

    #[test]
    fn defaults_hosts_ports_and_sockets() {
        let u = PgUrl::parse("postgres://bob@/").unwrap();
        assert_eq!(u.hosts, [Host::Tcp("localhost".into(), 5432)]);
        assert_eq!((u.dbname.as_str(), u.sslmode), ("bob", SslMode::Prefer));
        let u = PgUrl::parse("postgresql://u@a:1,[::1],b?port=7").unwrap();
        assert_eq!(
            u.hosts,
            [
                Host::Tcp("a".into(), 1),
                Host::Tcp("::1".into(), 7),
                Host::Tcp("b".into(), 7)
            ]
        );
        assert_eq!(u.servers(), "a:1,[::1]:7,b:7");
        let u = PgUrl::parse("postgresql://u@%2Frun%2Fpostgresql/db").unwrap();
        assert_eq!(u.hosts, [Host::Socket("/run/postgresql".into(), 5432)]);
        let u = PgUrl::parse("postgresql:///db?host=/tmp&user=x&password=p&port=5433").unwrap();
        assert_eq!(u.hosts, [Host::Socket("/tmp".into(), 5433)]);
        assert_eq!(
            u.to_string(),
            "postgresql://x@/tmp/.s.PGSQL.5433/db?sslmode=prefer"
        );
    }

    #[test]
    fn bad_urls_are_refused_without_their_password() {
        for (url, needle) in [
            ("mysql://u:pw@h/db", "must start with postgresql://"),
            ("postgresql://u:pw@h:99999/db", "port \"99999\""),
            ("postgresql://u:pw@h:0/db", "port \"0\""),
            ("postgresql://u:pw@h/db?sslmode=maybe", "sslmode \"maybe\""),
            (
                "postgresql://u:pw@h/db?bogus=1",
                "unknown parameter \"bogus\"",
            ),
            ("postgresql://u:pw@h/db?password", "has no value"),
            ("postgresql://u:pw@[::1/db", "lacks its ']'"),
            ("postgresql://u:pw@a,,b/db", "empty host"),
            (
                "postgresql://u:p%zzw@h/db",
                "bad percent-encoding in the password",
            ),
            (
                "postgresql://u@h/db?connect_timeout=soon",
                "connect_timeout \"soon\"",
            ),
            ("postgresql://u@a,b,c/db?port=1,2", "2 ports for 3 hosts"),
            (
                "postgresql://u@h/db?password=pw&sslmode=nope",
                "sslmode \"nope\"",
            ),
        ] {
            let err = PgUrl::parse(url).unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::InvalidInput, "{url}");
            let text = err.to_string();
            assert!(text.contains(needle), "{url}: {text}");
            assert!(text.starts_with("invalid PostgreSQL URL \""), "{text}");
            assert!(!text.contains("pw") && !text.contains("p%zzw"), "{text}");
        }
    }

    #[test]
    fn system_roots_mean_verify_full_as_in_libpq() {
        let u = PgUrl::parse("postgresql://u@h/db?sslrootcert=system").unwrap();
        assert_eq!(u.sslmode, SslMode::VerifyFull);
        let u = PgUrl::parse("postgresql://u@h/db?sslrootcert=system&sslmode=verify-full").unwrap();
        assert_eq!(u.sslmode, SslMode::VerifyFull);
        for weak in ["disable", "allow", "prefer", "require", "verify-ca"] {
            let err = PgUrl::parse(&format!(
                "postgresql://u:pw@h/db?sslmode={weak}&sslrootcert=system"
            ))
            .unwrap_err();
            let text = err.to_string();
            assert!(
                text.contains("is too weak for sslrootcert=system"),
                "{text}"
            );
            assert!(!text.contains("pw@"), "{text}");
        }
        let u = PgUrl::parse("postgresql://u@h/db?sslrootcert=/etc/ca.pem").unwrap();
        assert_eq!(u.sslmode, SslMode::Prefer);
        let u = PgUrl::parse("postgresql://u@h/db?sslmode=allow").unwrap();
        assert_eq!(u.sslmode, SslMode::Prefer);
    }

    #[test]
    fn redact_url_hides_both_password_spellings() {
        assert_eq!(
            redact_url("postgresql://u:secret@h:1/db?password=other&sslmode=disable"),
            "postgresql://u:***@h:1/db?password=***&sslmode=disable"
        );
        assert_eq!(redact_url("postgresql://u@h/db"), "postgresql://u@h/db");
        assert_eq!(redact_url("nonsense"), "nonsense");
    }
}
