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

use std::fmt;
use std::ops::Range;
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
    /// `text` as an `sslmode` (`shown` is how a message may show it).
    fn parse(text: &str, shown: &str) -> Result<SslMode> {
        Ok(match text {
            "disable" => SslMode::Disable,
            "prefer" | "allow" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => {
                return Err(invalid(format!(
                    "sslmode {shown} is not one of disable, allow, prefer, require, \
                     verify-ca, verify-full"
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

/// Which of several servers a connection settles on (the URL's `target_session_attrs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetSessionAttrs {
    /// The first server that accepts the connection (libpq's default).
    Any,
    /// The first server whose sessions accept writes (`SHOW transaction_read_only`).
    ReadWrite,
}

/// Whether SCRAM authentication binds to the TLS channel (the URL's `channel_binding`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChannelBinding {
    /// Never.
    Disable,
    /// When the server and the channel allow it (libpq's default).
    Prefer,
    /// Always: a server that cannot is refused.
    Require,
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

/// The default port.
const DEFAULT_PORT: u16 = 5432;

/// The two schemes libpq reads as URIs.
const SCHEMES: [&str; 2] = ["postgresql://", "postgres://"];

/// libpq's connection key words that this store cannot honour: refused by name.
const UNSUPPORTED: &[&str] = &[
    "hostaddr",
    "passfile",
    "require_auth",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "tcp_user_timeout",
    "replication",
    "sslnegotiation",
    "sslcompression",
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslcertmode",
    "sslcrl",
    "sslcrldir",
    "sslsni",
    "sslkeylogfile",
    "requirepeer",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "min_protocol_version",
    "max_protocol_version",
    "krbsrvname",
    "gsslib",
    "gssdelegation",
    "service",
    "scram_client_key",
    "scram_server_key",
    "oauth_issuer",
    "oauth_client_id",
    "oauth_client_secret",
    "oauth_scope",
];

/// libpq's key words that the store honours (`ssl` is JDBC's `ssl=true`, as in libpq).
const HONOURED: &[&str] = &[
    "host",
    "port",
    "user",
    "password",
    "dbname",
    "sslmode",
    "sslrootcert",
    "connect_timeout",
    "application_name",
    "fallback_application_name",
    "options",
    "target_session_attrs",
    "channel_binding",
    "load_balance_hosts",
    "client_encoding",
    "gssencmode",
    "ssl",
];

/// Key words whose value is a secret: never shown, hidden in a redacted URL.
const SECRET: &[&str] = &[
    "password",
    "sslpassword",
    "oauth_client_secret",
    "scram_client_key",
    "scram_server_key",
];

/// Shown in a message in place of a part of the URL that may hold a password.
const HIDDEN: &str = "(not shown: it may hold a password)";

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
        parse(rest, &secrets).map_err(|e| {
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

/// `url` with every part that may hold a password replaced by `***`: safe to show
/// whatever its shape. Text with another scheme (or none) keeps only its scheme part
/// (`mysql://***`, or `***`), as nothing tells where its password would be.
pub fn redact_url(url: &str) -> String {
    if SCHEMES.iter().any(|s| url.starts_with(s)) {
        return Secrets::of(url).redacted();
    }
    if url.is_empty() {
        return String::new();
    }
    format!("{}***", scheme_part(url))
}

/// The scheme-like start of `text`: letters, digits, `+`, `-`, `.`, then the `:` and
/// `/` after them (`postgres//`, `mysql:`); empty when no `:` or `/` follows, as the
/// text then has no scheme at all.
fn scheme_part(text: &str) -> &str {
    let name = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))
        .unwrap_or(text.len());
    let seps = text[name..]
        .find(|c: char| c != ':' && c != '/')
        .map_or(text.len(), |i| name + i);
    if seps == name { "" } else { &text[..seps] }
}

/// The byte ranges of a URL's text that may hold a password under any reading of it.
struct Secrets<'a> {
    url: &'a str,
    /// Sorted, disjoint, not adjacent.
    ranges: Vec<Range<usize>>,
    /// The ranges that hold a password under libpq's reading or next to it: those but
    /// the port-like text of a URL with no `@` at all, which is most likely a port.
    strict: Vec<Range<usize>>,
}

impl<'a> Secrets<'a> {
    fn of(url: &'a str) -> Secrets<'a> {
        let start = SCHEMES
            .iter()
            .find(|s| url.starts_with(*s))
            .map_or(0, |s| s.len());
        let mut ranges = Vec::new();
        let mut port_like = None;
        // Whatever ends the user name, a password starts after a `:` and ends at an `@`;
        // with no `@` at all, what follows the first `:` (a port, to libpq) may still be
        // one whose `@host` was forgotten.
        if let Some(colon) = url[start..].find(':').map(|i| start + i + 1) {
            match url.rfind('@') {
                Some(at) if colon <= at => ranges.push(colon..at),
                Some(_) => {}
                None => {
                    let end = url[colon..]
                        .find(['/', '?'])
                        .map_or(url.len(), |i| colon + i);
                    port_like = Some(colon..end);
                }
            }
        }
        // `?`/`&`-separated parts: a secret parameter's value, and the parts after it up
        // to the next that names a key word (a raw `&` or `?` in the value).
        let mut in_secret = false;
        let mut pos = start;
        for part in url[start..].split(['?', '&']) {
            let (key, has_value) = match part.split_once('=') {
                Some((key, _)) => (lenient_decode(key), true),
                None => (lenient_decode(part), false),
            };
            let key = key.to_ascii_lowercase();
            let known = has_value
                && (HONOURED.contains(&key.as_str()) || UNSUPPORTED.contains(&key.as_str()));
            if SECRET.contains(&key.as_str()) && has_value {
                in_secret = true;
                let value = pos + key_len(part) + 1;
                ranges.push(value..pos + part.len());
            } else if known {
                in_secret = false;
            } else if in_secret {
                ranges.push(pos..pos + part.len());
            }
            pos += part.len() + 1;
        }
        let strict = merge(ranges.clone());
        ranges.extend(port_like);
        Secrets {
            url,
            ranges: merge(ranges),
            strict,
        }
    }

    /// Where `part` lies in the URL, if it is a slice of it.
    fn span(&self, part: &str) -> Option<Range<usize>> {
        let base = self.url.as_ptr() as usize;
        let at = (part.as_ptr() as usize).checked_sub(base)?;
        (at + part.len() <= self.url.len()).then_some(at..at + part.len())
    }

    /// Whether `part` (a slice of the URL) overlaps or touches a range that may hold a
    /// password; anything else than a slice of the URL counts as hidden.
    fn hides(&self, part: &str) -> bool {
        self.span(part).is_none_or(|p| touches(&self.ranges, &p))
    }

    /// Whether `part`, about to be shown as a user, host, port or database name, may
    /// hold a password: then the URL is refused.
    fn holds_password(&self, part: &str) -> bool {
        self.span(part).is_some_and(|p| touches(&self.strict, &p))
    }

    /// `text` (decoded from `raw`, a slice of the URL) quoted for a message, or a note
    /// that it is not shown.
    fn show(&self, raw: &str, text: &str) -> String {
        if self.hides(raw) {
            HIDDEN.to_owned()
        } else {
            json::quote(text)
        }
    }

    /// The URL with each range replaced by `***`.
    fn redacted(&self) -> String {
        let mut out = String::with_capacity(self.url.len());
        let mut from = 0;
        for r in &self.ranges {
            out.push_str(&self.url[from..r.start]);
            out.push_str("***");
            from = r.end;
        }
        out.push_str(&self.url[from..]);
        out
    }
}

/// `ranges` sorted, overlapping or adjacent ones merged.
fn merge(mut ranges: Vec<Range<usize>>) -> Vec<Range<usize>> {
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::new();
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.start <= last.end + 1 => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// Whether `part` overlaps or touches one of `ranges`.
fn touches(ranges: &[Range<usize>], part: &Range<usize>) -> bool {
    ranges
        .iter()
        .any(|r| part.start <= r.end && r.start <= part.end)
}

/// The length of the key of a `key=value` part.
fn key_len(part: &str) -> usize {
    part.find('=').unwrap_or(part.len())
}

/// `text` with each valid `%XX` decoded and the rest kept (to recognize a key word that
/// is spelled with escapes, whatever else is wrong).
fn lenient_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1..i + 3)) {
            (b'%', Some(&[h, l])) if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() => {
                out.push((hex(h) << 4) | hex(l));
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        _ => digit - b'A' + 10,
    }
}

/// One host or port as written (a slice of the URL, for messages) and decoded.
struct Part<'a> {
    raw: &'a str,
    text: String,
}

/// What the URL sets, before defaults.
#[derive(Default)]
struct Given<'a> {
    /// The slices of the URL that become a user, host, port or database name.
    shown: Vec<&'a str>,
    hosts: Option<Vec<Part<'a>>>,
    ports: Option<Vec<Part<'a>>>,
    user: Option<String>,
    password: Option<String>,
    dbname: Option<String>,
    application_name: Option<String>,
    fallback_application_name: Option<String>,
    /// Whether the query named an `sslmode` (or `ssl=true`).
    sslmode: bool,
}

/// Parses what follows the scheme, as libpq's URI parser does.
fn parse<'a>(rest: &'a str, secrets: &Secrets<'a>) -> Result<PgUrl> {
    let mut given = Given::default();
    // libpq: user and password end at the first `@` met before any `/`.
    let (userinfo, mut p) = match rest.find(['@', '/']) {
        Some(i) if rest.as_bytes()[i] == b'@' => (Some(&rest[..i]), &rest[i + 1..]),
        _ => (None, rest),
    };
    if p.contains('@') {
        return Err(invalid(
            "a raw \"@\" after the user name and password: percent-encode it as %40 \
             (a \"@\" or \"/\" in a password as %40 or %2F)",
        ));
    }
    if let Some(userinfo) = userinfo {
        let (user, password) = match userinfo.split_once(':') {
            Some((u, p)) => (u, Some(p)),
            None => (userinfo, None),
        };
        if !user.is_empty() {
            given.user = Some(decode(user, "user name")?);
            given.shown.push(user);
        }
        if let Some(p) = password.filter(|p| !p.is_empty()) {
            given.password = Some(decode(p, "password")?);
        }
    }
    // Hosts, each with an optional port, separated by commas.
    let mut hosts = Vec::new();
    let mut ports = Vec::new();
    loop {
        let (host, after) = if let Some(v6) = p.strip_prefix('[') {
            let end = v6
                .find(']')
                .ok_or_else(|| invalid("an IPv6 host lacks its \"]\""))?;
            if end == 0 {
                return Err(invalid("an IPv6 host is empty (\"[]\")"));
            }
            let (host, after) = (&v6[..end], &v6[end + 1..]);
            if let Some(c) = after.chars().next().filter(|c| !":/?,".contains(*c)) {
                return Err(invalid(format!(
                    "unexpected {} after the IPv6 host {} (\":\", \"/\", \"?\" or \",\" \
                     expected)",
                    secrets.show(&after[..c.len_utf8()], &c.to_string()),
                    secrets.show(host, host)
                )));
            }
            (host, after)
        } else {
            let end = p.find([':', '/', '?', ',']).unwrap_or(p.len());
            (&p[..end], &p[end..])
        };
        hosts.push(Part {
            raw: host,
            text: decode(host, "host")?,
        });
        let (port, after) = match after.strip_prefix(':') {
            Some(r) => {
                let end = r.find(['/', '?', ',']).unwrap_or(r.len());
                (&r[..end], &r[end..])
            }
            None => (&after[..0], after),
        };
        ports.push(Part {
            raw: port,
            text: decode(port, "port")?,
        });
        match after.strip_prefix(',') {
            Some(next) => p = next,
            None => {
                p = after;
                break;
            }
        }
    }
    given
        .shown
        .extend(hosts.iter().chain(&ports).map(|part| part.raw));
    if hosts.len() > 1 || !hosts[0].text.is_empty() {
        given.hosts = Some(hosts);
    }
    if ports.len() > 1 || !ports[0].text.is_empty() {
        given.ports = Some(ports);
    }
    // Then `/dbname`, then `?query`.
    let query = match p.strip_prefix('/') {
        Some(after) => {
            let (db, query) = match after.split_once('?') {
                Some((db, q)) => (db, Some(q)),
                None => (after, None),
            };
            if !db.is_empty() {
                given.dbname = Some(decode(db, "database name")?);
                given.shown.push(db);
            }
            query
        }
        None => p.strip_prefix('?'),
    };
    let mut url = PgUrl {
        hosts: Vec::new(),
        user: String::new(),
        password: None,
        dbname: String::new(),
        sslmode: SslMode::Prefer,
        sslrootcert: None,
        connect_timeout: Duration::from_secs(10),
        application_name: String::new(),
        options: None,
        target_session_attrs: TargetSessionAttrs::Any,
        channel_binding: ChannelBinding::Prefer,
        load_balance_hosts: false,
    };
    if let Some(query) = query {
        parameters(query, secrets, &mut given, &mut url)?;
    }
    // libpq: the platform's roots are for verify-full, its default with them.
    if url.sslrootcert.as_deref() == Some(std::path::Path::new("system")) {
        if !given.sslmode {
            url.sslmode = SslMode::VerifyFull;
        } else if url.sslmode != SslMode::VerifyFull {
            return Err(invalid(format!(
                "sslmode={} is too weak for sslrootcert=system (use verify-full)",
                url.sslmode.name()
            )));
        }
    }
    if given.shown.iter().any(|part| secrets.holds_password(part)) {
        return Err(invalid(
            "a password's text would be read as a user, host, port or database name: \
             percent-encode \"@\", \"/\", \"?\" and \"&\" in a password (%40, %2F, %3F, %26)",
        ));
    }
    url.hosts = hosts_and_ports(given.hosts, given.ports, secrets)?;
    url.user = given.user.filter(|u| !u.is_empty()).unwrap_or_else(|| {
        std::env::var("PGUSER")
            .or_else(|_| std::env::var("USER"))
            .unwrap_or_else(|_| "postgres".to_owned())
    });
    url.password = given.password.filter(|p| !p.is_empty());
    url.dbname = given
        .dbname
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| url.user.clone());
    url.application_name = given
        .application_name
        .or(given.fallback_application_name)
        .unwrap_or_else(|| "inboxlog".to_owned());
    Ok(url)
}

/// The `key=value&…` query, as libpq reads it: names and values percent-decoded, each
/// part exactly one `=`, later values replacing earlier ones.
fn parameters<'a>(
    mut query: &'a str,
    secrets: &Secrets<'a>,
    given: &mut Given<'a>,
    url: &mut PgUrl,
) -> Result<()> {
    while !query.is_empty() {
        let (part, next) = query.split_once('&').unwrap_or((query, ""));
        query = next;
        let Some((raw_key, raw_value)) = part.split_once('=') else {
            return Err(invalid(format!(
                "parameter {} has no value (\"key=value\" expected)",
                secrets.show(part, part)
            )));
        };
        let key = decode(raw_key, "parameter name")?;
        let shown_key = secrets.show(raw_key, &key);
        if raw_value.contains('=') {
            return Err(invalid(format!(
                "the value of parameter {shown_key} holds a second \"=\" (percent-encode \
                 it as %3D)"
            )));
        }
        let value = decode(raw_value, &format!("value of parameter {shown_key}"))?;
        let shown = || secrets.show(raw_value, &value);
        let choice = |options: &[&str], note: &str| -> Result<()> {
            if options.contains(&value.as_str()) {
                return Ok(());
            }
            Err(invalid(format!(
                "{key} {} is not one of {}{note}",
                shown(),
                options.join(", ")
            )))
        };
        match key.as_str() {
            "host" => {
                given.hosts = Some(
                    value
                        .split(',')
                        .map(|h| Part {
                            raw: raw_value,
                            text: h.to_owned(),
                        })
                        .collect(),
                );
            }
            "port" => {
                given.ports = Some(
                    value
                        .split(',')
                        .map(|p| Part {
                            raw: raw_value,
                            text: p.to_owned(),
                        })
                        .collect(),
                );
            }
            "user" => given.user = Some(value),
            "password" => given.password = Some(value),
            "dbname" => given.dbname = Some(value),
            "sslmode" => {
                url.sslmode = SslMode::parse(&value, &shown())?;
                given.sslmode = true;
            }
            // JDBC's spelling, which libpq takes too; any other `ssl` is unknown there.
            "ssl" if value == "true" => {
                url.sslmode = SslMode::Require;
                given.sslmode = true;
            }
            "sslrootcert" => url.sslrootcert = Some(PathBuf::from(value)),
            "connect_timeout" => {
                let secs: i32 = value.trim().parse().map_err(|_| {
                    invalid(format!(
                        "connect_timeout {} is not a whole number of seconds",
                        shown()
                    ))
                })?;
                // libpq: 0 or less waits forever (a day is forever enough here); 1 is
                // raised to 2, as a rounded-down clock could otherwise give up at once.
                url.connect_timeout = Duration::from_secs(match secs {
                    ..=0 => 86_400,
                    1 => 2,
                    s => s.unsigned_abs().into(),
                });
            }
            "application_name" => given.application_name = Some(value),
            "fallback_application_name" => given.fallback_application_name = Some(value),
            "options" => url.options = Some(value),
            "target_session_attrs" => {
                choice(
                    &["any", "read-write"],
                    " (libpq's read-only, primary, standby and prefer-standby are not \
                     supported: the store writes)",
                )?;
                url.target_session_attrs = if value == "any" {
                    TargetSessionAttrs::Any
                } else {
                    TargetSessionAttrs::ReadWrite
                };
            }
            "channel_binding" => {
                choice(&["disable", "prefer", "require"], "")?;
                url.channel_binding = match value.as_str() {
                    "disable" => ChannelBinding::Disable,
                    "prefer" => ChannelBinding::Prefer,
                    _ => ChannelBinding::Require,
                };
            }
            "load_balance_hosts" => {
                choice(&["disable", "random"], "")?;
                url.load_balance_hosts = value == "random";
            }
            "client_encoding" => {
                let name = value.to_ascii_lowercase().replace(['-', '_'], "");
                if name != "utf8" && name != "unicode" {
                    return Err(invalid(format!(
                        "client_encoding {} is not supported: the store always talks UTF8",
                        shown()
                    )));
                }
            }
            // The store never uses GSSAPI encryption, which these two allow.
            "gssencmode" => choice(&["disable", "prefer"], " (no GSSAPI encryption here)")?,
            other if UNSUPPORTED.contains(&other) => {
                return Err(invalid(format!(
                    "unsupported parameter {shown_key}: libpq knows it, the inboxlog store \
                     cannot honour it"
                )));
            }
            _ => {
                return Err(invalid(format!(
                    "unknown parameter {shown_key} (libpq has no such key word)"
                )));
            }
        }
    }
    Ok(())
}

/// The servers: hosts paired with ports as libpq pairs them (one port for every host,
/// or one per host; an empty host is `localhost`, an empty port 5432).
fn hosts_and_ports(
    hosts: Option<Vec<Part<'_>>>,
    ports: Option<Vec<Part<'_>>>,
    secrets: &Secrets<'_>,
) -> Result<Vec<Host>> {
    let hosts = hosts.unwrap_or_else(|| {
        vec![Part {
            raw: "",
            text: String::new(),
        }]
    });
    let ports = match ports {
        None => vec![DEFAULT_PORT],
        Some(ports) => ports
            .iter()
            .map(|p| port(p, secrets))
            .collect::<Result<Vec<_>>>()?,
    };
    if ports.len() != 1 && ports.len() != hosts.len() {
        return Err(invalid(format!(
            "{} ports for {} hosts (give one port, or one per host)",
            ports.len(),
            hosts.len()
        )));
    }
    Ok(hosts
        .into_iter()
        .enumerate()
        .map(|(i, host)| {
            let port = ports[i.min(ports.len() - 1)];
            match host.text.as_str() {
                "" => Host::Tcp("localhost".to_owned(), port),
                dir if dir.starts_with('/') => Host::Socket(PathBuf::from(dir), port),
                name => Host::Tcp(name.to_owned(), port),
            }
        })
        .collect())
}

/// One port: empty is the default; otherwise digits only, 1 to 65535.
fn port(part: &Part<'_>, secrets: &Secrets<'_>) -> Result<u16> {
    if part.text.is_empty() {
        return Ok(DEFAULT_PORT);
    }
    match part.text.parse::<u16>() {
        Ok(p) if p > 0 && part.text.bytes().all(|b| b.is_ascii_digit()) => Ok(p),
        _ => Err(invalid(format!(
            "port {} is not a number from 1 to 65535",
            secrets.show(part.raw, &part.text)
        ))),
    }
}

/// Percent-decodes one part of the URL as libpq does: `%` and two hex digits, never
/// `%00`; `what` names the part in errors, never its value.
fn decode(text: &str, what: &str) -> Result<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let byte = match bytes.get(i + 1..i + 3) {
                Some(&[h, l]) if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() => {
                    (hex(h) << 4) | hex(l)
                }
                _ => {
                    return Err(invalid(format!(
                        "bad percent-encoding in the {what} (\"%\" and two hex digits \
                         expected; \"%\" itself is %25)"
                    )));
                }
            };
            if byte == 0 {
                return Err(invalid(format!("%00 in the {what} is not allowed")));
            }
            out.push(byte);
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

    fn secrets_of(url: &str) -> Vec<&str> {
        let s = Secrets::of(url);
        s.ranges.iter().map(|r| &url[r.clone()]).collect()
    }

    #[test]
    fn the_ranges_that_may_hold_a_password() {
        assert_eq!(secrets_of("postgresql://u:pw@h:1/db"), ["pw"]);
        assert_eq!(secrets_of("postgresql://u@h:1/db"), Vec::<&str>::new());
        assert_eq!(secrets_of("postgresql://u:pw/db"), ["pw"]);
        assert_eq!(secrets_of("postgresql://h:1,h2:2?x=1"), ["1,h2:2"]);
        // A raw "/" or "?" in the password: still from the first ":" to the last "@".
        assert_eq!(secrets_of("postgresql://u:p/a?s@h/db"), ["p/a?s"]);
        assert_eq!(
            secrets_of("postgresql://h/d?password=x&sslmode=disable"),
            ["x"]
        );
        // A raw "&" in a query password: the parts up to the next key word go with it.
        assert_eq!(
            secrets_of("postgresql://h/d?pass%77ord=a&b&c=d&port=1"),
            ["a&b&c=d"]
        );
        assert_eq!(secrets_of("postgresql://h/d?sslpassword=k"), ["k"]);
        let s = Secrets::of("postgresql://u:pw@h:9/db");
        assert!(s.hides(&s.url[15..17]) && !s.hides(&s.url[18..19]));
        assert!(s.hides("pw"), "a string that is not a slice of the URL");
    }

    #[test]
    fn scheme_parts() {
        assert_eq!(scheme_part("postgres//u:pw@h"), "postgres//");
        assert_eq!(scheme_part("postgresql:/u:pw@h"), "postgresql:/");
        assert_eq!(scheme_part("mysql://x"), "mysql://");
        assert_eq!(scheme_part("Secret123"), "");
        assert_eq!(scheme_part(""), "");
        assert_eq!(redact_url("mysql://u:pw@h/db"), "mysql://***");
        assert_eq!(redact_url("Secret123@h"), "***");
        assert_eq!(redact_url("nonsense"), "***");
        assert_eq!(redact_url(""), "");
    }

    #[test]
    fn strict_percent_decoding() {
        assert_eq!(decode("a%2fb%2F", "x").unwrap(), "a/b/");
        for bad in ["%+4", "%4", "%", "%g0", "% 4", "%-1"] {
            let e = decode(bad, "password").unwrap_err().to_string();
            assert!(
                e.contains("bad percent-encoding in the password"),
                "{bad}: {e}"
            );
        }
        let e = decode("a%00b", "user name").unwrap_err().to_string();
        assert_eq!(e, "%00 in the user name is not allowed");
        let e = decode("%ff", "database name").unwrap_err().to_string();
        assert_eq!(e, "the database name is not UTF-8 once decoded");
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
}
