//! The vocabulary of a PostgreSQL URL: the key words libpq knows (those the store
//! honours, those it refuses as unsupported, those whose value is a secret), the default
//! port, and what each honoured parameter's value means for the connection.

use std::path::PathBuf;
use std::time::Duration;

use super::PgUrl;
use super::grammar::{Given, Part, decode};
use super::redact::Secrets;
use crate::error::{Result, invalid};

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

/// The default port.
pub(super) const DEFAULT_PORT: u16 = 5432;

/// libpq's connection key words that this store cannot honour: refused by name.
pub(super) const UNSUPPORTED: &[&str] = &[
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
pub(super) const HONOURED: &[&str] = &[
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
pub(super) const SECRET: &[&str] = &[
    "password",
    "sslpassword",
    "oauth_client_secret",
    "scram_client_key",
    "scram_server_key",
];

/// The `key=value&…` query, as libpq reads it: names and values percent-decoded, each
/// part exactly one `=`, later values replacing earlier ones.
pub(super) fn parameters<'a>(
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
