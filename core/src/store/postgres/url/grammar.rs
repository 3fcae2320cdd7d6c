//! The grammar of a `postgresql://` URL, read as libpq's URI parser reads it: the user
//! and password, the hosts and ports, the database name and the query, each part
//! percent-decoded strictly; the defaults of what the URL leaves out.

use std::path::PathBuf;
use std::time::Duration;

use super::redact::Secrets;
use super::vocabulary::{ChannelBinding, DEFAULT_PORT, SslMode, TargetSessionAttrs, parameters};
use super::{Host, PgUrl};
use crate::error::{Result, invalid};

/// One host or port as written (a slice of the URL, for messages) and decoded.
pub(super) struct Part<'a> {
    pub(super) raw: &'a str,
    pub(super) text: String,
}

/// What the URL sets, before defaults.
#[derive(Default)]
pub(super) struct Given<'a> {
    /// The slices of the URL that become a user, host, port or database name.
    pub(super) shown: Vec<&'a str>,
    pub(super) hosts: Option<Vec<Part<'a>>>,
    pub(super) ports: Option<Vec<Part<'a>>>,
    pub(super) user: Option<String>,
    pub(super) password: Option<String>,
    pub(super) dbname: Option<String>,
    pub(super) application_name: Option<String>,
    pub(super) fallback_application_name: Option<String>,
    /// Whether the query named an `sslmode` (or `ssl=true`).
    pub(super) sslmode: bool,
}

/// Parses what follows the scheme, as libpq's URI parser does.
pub(super) fn parse<'a>(rest: &'a str, secrets: &Secrets<'a>) -> Result<PgUrl> {
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
pub(super) fn decode(text: &str, what: &str) -> Result<String> {
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

/// The value of one hex digit.
pub(super) fn hex(digit: u8) -> u8 {
    match digit {
        b'0'..=b'9' => digit - b'0',
        b'a'..=b'f' => digit - b'a' + 10,
        _ => digit - b'A' + 10,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
