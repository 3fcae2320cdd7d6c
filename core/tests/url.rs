//! `postgresql://` URLs read as libpq reads them, and no password in any message
//! (issues #27 and #28, SPEC §10.4).
//!
//! Tables of libpq's documented examples and of every case the issues name; the
//! fixtures under `tests/fixtures/urls/` (one URL per line: `refused.txt` must be
//! refused, `accepted.txt` parses) whose passwords are made of pieces holding `Qx`,
//! which nothing else in them holds, so any `Qx` in a message is a password leaking;
//! and a property test over generated URLs with such a password in every position.
//! Parsing only, but for one test that connects to the test server (see
//! `pg_common`) with every parameter the store honours.

mod pg_common;

use std::path::PathBuf;
use std::time::Duration;

use inboxlog::store::postgres::{
    ChannelBinding, Host, PgUrl, SslMode, TargetSessionAttrs, redact_url,
};
use inboxlog::store::{Durability, PgStore};
use inboxlog::{Envelope, ErrorKind, Session, SessionMeta};
use proptest::prelude::*;

fn fixture(name: &str) -> Vec<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/urls")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::to_owned)
        .collect()
}

fn tcp(host: &str, port: u16) -> Host {
    Host::Tcp(host.to_owned(), port)
}

/// Everything a parsed URL shows of itself.
fn shown(u: &PgUrl) -> String {
    format!("{u} | {u:?} | {} | {}", u.describe(), u.servers())
}

/// Whether `u`'s password is exactly `password` (`redact` is the only window on it).
fn has_password(u: &PgUrl, password: &str) -> bool {
    u.redact(password) == "***"
}

fn refused(url: &str) -> String {
    match PgUrl::parse(url) {
        Ok(u) => panic!("{url} was accepted: {u}"),
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::InvalidInput, "{url}: {e}");
            e.to_string()
        }
    }
}

#[test]
fn libpq_documented_examples() {
    let u = PgUrl::parse("postgresql://localhost").unwrap();
    assert_eq!(u.hosts, [tcp("localhost", 5432)]);
    let u = PgUrl::parse("postgresql://").unwrap();
    assert_eq!(u.hosts, [tcp("localhost", 5432)]);
    assert_eq!(u.dbname, u.user);
    let u = PgUrl::parse("postgresql://localhost:5433").unwrap();
    assert_eq!(u.hosts, [tcp("localhost", 5433)]);
    let u = PgUrl::parse("postgresql://localhost/mydb").unwrap();
    assert_eq!(u.dbname, "mydb");
    let u = PgUrl::parse("postgresql://user@localhost").unwrap();
    assert_eq!((u.user.as_str(), u.dbname.as_str()), ("user", "user"));
    let u = PgUrl::parse("postgresql://user:secret@localhost").unwrap();
    assert!(has_password(&u, "secret"));
    assert!(!shown(&u).contains("secret"));
    let u = PgUrl::parse(
        "postgresql://other@localhost/otherdb?connect_timeout=10&application_name=myapp",
    )
    .unwrap();
    assert_eq!((u.user.as_str(), u.dbname.as_str()), ("other", "otherdb"));
    assert_eq!(u.connect_timeout, Duration::from_secs(10));
    assert_eq!(u.application_name, "myapp");
    let u = PgUrl::parse(
        "postgresql://host1:123,host2:456/somedb?target_session_attrs=any&application_name=myapp",
    )
    .unwrap();
    assert_eq!(u.hosts, [tcp("host1", 123), tcp("host2", 456)]);
    assert_eq!(u.target_session_attrs, TargetSessionAttrs::Any);
    let u = PgUrl::parse("postgresql:///mydb?host=localhost&port=5433").unwrap();
    assert_eq!(u.hosts, [tcp("localhost", 5433)]);
    assert_eq!(u.dbname, "mydb");
    let u = PgUrl::parse("postgresql://[2001:db8::1234]/database").unwrap();
    assert_eq!(u.hosts, [tcp("2001:db8::1234", 5432)]);
    assert_eq!(u.servers(), "[2001:db8::1234]:5432");
    let u = PgUrl::parse("postgresql:///dbname?host=/var/lib/postgresql").unwrap();
    assert_eq!(u.hosts, [Host::Socket("/var/lib/postgresql".into(), 5432)]);
    let u = PgUrl::parse("postgresql://%2Fvar%2Flib%2Fpostgresql/dbname").unwrap();
    assert_eq!(u.hosts, [Host::Socket("/var/lib/postgresql".into(), 5432)]);
    let u =
        PgUrl::parse("postgresql://user@localhost:5433/mydb?options=-c%20synchronous_commit%3Doff")
            .unwrap();
    assert_eq!(u.options.as_deref(), Some("-c synchronous_commit=off"));
    // JDBC's ssl=true, which libpq takes as sslmode=require.
    let u = PgUrl::parse("postgresql://h/db?ssl=true").unwrap();
    assert_eq!(u.sslmode, SslMode::Require);
}

#[test]
fn the_user_and_password_end_at_the_first_at_before_any_slash() {
    // #28 item 5: a raw "?" (or ":", ",", "&", "=") belongs to the password.
    for (url, password) in [
        ("postgresql://u:pa?ss@h:5432/db", "pa?ss"),
        ("postgresql://u:5432?options=x@h/db", "5432?options=x"),
        ("postgresql://u:a:b,c&d=e@h/db", "a:b,c&d=e"),
        ("postgresql://u:p%40ss%2Fw@h/db", "p@ss/w"),
    ] {
        let u = PgUrl::parse(url).unwrap();
        assert_eq!(u.hosts, [tcp("h", 5432)], "{url}");
        assert_eq!((u.user.as_str(), u.dbname.as_str()), ("u", "db"), "{url}");
        assert!(has_password(&u, password), "{url}");
        assert!(!shown(&u).contains(password), "{url}");
    }
    // No user before the ":", or no password after it: the defaults.
    let u = PgUrl::parse("postgresql://:pw@h/db").unwrap();
    assert!(has_password(&u, "pw") && !u.user.is_empty());
    let u = PgUrl::parse("postgresql://u:@h/db").unwrap();
    assert!(has_password(&u, "") || u.redact("x") == "x");
    // A raw "@" or "/" in a password makes libpq read part of it as a host or database
    // name: refused, and never shown.
    for url in [
        "postgresql://u:p@ss@h/db",
        "postgresql://u:12/ss@h/db",
        "postgresql://u:pa/ss@h/db",
        "postgresql://u:pw@h/db?application_name=me@work",
    ] {
        let text = refused(url);
        assert!(
            text.contains("a raw \"@\" after the user name and password"),
            "{text}"
        );
        assert!(
            !text.contains("ss@") && !text.contains(":pw") && !text.contains("p@"),
            "{text}"
        );
    }
}

#[test]
fn parameter_names_and_values_are_percent_decoded_strictly() {
    // #28 item 6: libpq decodes parameter names.
    let u = PgUrl::parse("postgresql://h/db?pass%77ord=topsecret1&%73slmode=disable").unwrap();
    assert!(has_password(&u, "topsecret1"));
    assert_eq!(u.sslmode, SslMode::Disable);
    // #28 item 7: %00 anywhere, and anything but "%" and two hex digits, is refused,
    // naming the part and never its text.
    for (url, needle) in [
        (
            "postgresql://u%00@h/db",
            "%00 in the user name is not allowed",
        ),
        (
            "postgresql://u:p%00w@h/db",
            "%00 in the password is not allowed",
        ),
        (
            "postgresql://h/d%00b",
            "%00 in the database name is not allowed",
        ),
        (
            "postgresql://h/db?password=p%00w",
            "%00 in the value of parameter \"password\"",
        ),
        ("postgresql://h/db?%00=1", "%00 in the parameter name"),
        (
            "postgresql://u:p%+4w@h/db",
            "bad percent-encoding in the password",
        ),
        (
            "postgresql://u:p%4@h/db",
            "bad percent-encoding in the password",
        ),
        (
            "postgresql://h/d%+4b",
            "bad percent-encoding in the database name",
        ),
        ("postgresql://h%zz/db", "bad percent-encoding in the host"),
        ("postgresql://h:5%2/db", "bad percent-encoding in the port"),
        (
            "postgresql://u:%ff@h/db",
            "the password is not UTF-8 once decoded",
        ),
    ] {
        let text = refused(url);
        assert!(text.contains(needle), "{url}: {text}");
        assert!(
            !text.contains("p%") && !text.contains("pw"),
            "{url}: {text}"
        );
    }
    // A second "=", or none: refused as libpq refuses them.
    let text = refused("postgresql://h/db?options=-c%20a=b");
    assert!(
        text.contains("parameter \"options\" holds a second \"=\""),
        "{text}"
    );
    let text = refused("postgresql://h/db?password=a=b");
    assert!(!text.contains("a=b"), "{text}");
    for url in [
        "postgresql://h/db?sslmode",
        "postgresql://h/db?&sslmode=disable",
    ] {
        assert!(refused(url).contains("has no value"), "{url}");
    }
}

#[test]
fn libpqs_smaller_rules() {
    // #28 item 8: an empty port takes the default; so does an empty host.
    let u = PgUrl::parse("postgresql://h:/db").unwrap();
    assert_eq!(u.hosts, [tcp("h", 5432)]);
    let u = PgUrl::parse("postgresql://a:1,,b:/db").unwrap();
    assert_eq!(
        u.hosts,
        [tcp("a", 1), tcp("localhost", 5432), tcp("b", 5432)]
    );
    let u = PgUrl::parse("postgresql://u@h/db?host=").unwrap();
    assert_eq!(u.hosts, [tcp("localhost", 5432)]);
    // 0 or less waits forever (a day here); 1 is raised to 2, as libpq does.
    for (given, secs) in [
        ("-1", 86_400),
        ("0", 86_400),
        ("1", 2),
        ("+7", 7),
        ("30", 30),
    ] {
        let u = PgUrl::parse(&format!("postgresql://h/db?connect_timeout={given}")).unwrap();
        assert_eq!(u.connect_timeout, Duration::from_secs(secs), "{given}");
    }
    assert!(refused("postgresql://h/db?connect_timeout=99999999999").contains("connect_timeout"));
    // A bracketed IPv6 host is percent-decoded (a zone id), and may take a port.
    let u = PgUrl::parse("postgresql://[fe80::1%25eth0]:7/db").unwrap();
    assert_eq!(u.hosts, [tcp("fe80::1%eth0", 7)]);
    for (url, needle) in [
        ("postgresql://[::1/db", "lacks its \"]\""),
        ("postgresql://[]/db", "IPv6 host is empty"),
        (
            "postgresql://u@[::1]x/db",
            "unexpected \"x\" after the IPv6 host \"::1\"",
        ),
    ] {
        assert!(refused(url).contains(needle), "{url}");
    }
    // A "port" or "host" parameter replaces the authority's whole list, as in libpq.
    let u = PgUrl::parse("postgresql://u@a:1,[::1],b?port=7").unwrap();
    assert_eq!(u.hosts, [tcp("a", 7), tcp("::1", 7), tcp("b", 7)]);
    let u = PgUrl::parse("postgresql://a:1,b:2/db?host=c,d").unwrap();
    assert_eq!(u.hosts, [tcp("c", 1), tcp("d", 2)]);
    assert!(refused("postgresql://u@a,b,c/db?port=1,2").contains("2 ports for 3 hosts"));
    for bad in ["99999", "0", "+5", "-1", "5x"] {
        let text = refused(&format!("postgresql://u:pw@h:{bad}/db"));
        assert!(
            text.contains(&format!("port \"{bad}\" is not a number")),
            "{text}"
        );
    }
    // Later values replace earlier ones; an empty user or database takes the default.
    let u = PgUrl::parse("postgresql://a@h/x?user=b&dbname=&user=c").unwrap();
    assert_eq!((u.user.as_str(), u.dbname.as_str()), ("c", "c"));
}

#[test]
fn parameters_libpq_knows_are_honoured_or_refused_as_unsupported() {
    let u = PgUrl::parse(
        "postgresql://h/db?target_session_attrs=read-write&channel_binding=require\
         &load_balance_hosts=random&client_encoding=UTF8&gssencmode=disable\
         &fallback_application_name=fb&sslrootcert=/ca.pem&sslmode=verify-full",
    )
    .unwrap();
    assert_eq!(u.target_session_attrs, TargetSessionAttrs::ReadWrite);
    assert_eq!(u.channel_binding, ChannelBinding::Require);
    assert!(u.load_balance_hosts);
    assert_eq!(u.application_name, "fb");
    assert_eq!(u.sslrootcert, Some(PathBuf::from("/ca.pem")));
    assert_eq!(u.sslmode, SslMode::VerifyFull);
    let u =
        PgUrl::parse("postgresql://h/db?application_name=a&fallback_application_name=fb").unwrap();
    assert_eq!(u.application_name, "a");
    let u = PgUrl::parse("postgresql://h/db").unwrap();
    assert_eq!(
        (
            u.application_name.as_str(),
            u.channel_binding,
            u.load_balance_hosts
        ),
        ("inboxlog", ChannelBinding::Prefer, false)
    );
    for key in [
        "sslcert",
        "sslkey",
        "hostaddr",
        "passfile",
        "service",
        "keepalives",
        "sslcrl",
    ] {
        let text = refused(&format!("postgresql://h/db?{key}=v1"));
        assert!(
            text.contains(&format!("unsupported parameter \"{key}\": libpq knows it")),
            "{text}"
        );
        assert!(!text.split_once("\": ").unwrap().1.contains("v1"), "{text}");
    }
    // A secret one never shows its value, not even in the URL quoted.
    let text = refused("postgresql://h/db?sslpassword=keypass");
    assert!(text.contains("unsupported parameter \"sslpassword\"") && !text.contains("keypass"));
    let text = refused("postgresql://h/db?bogus=v1");
    assert!(text.contains("unknown parameter \"bogus\""), "{text}");
    for (url, needle) in [
        (
            "postgresql://h/db?target_session_attrs=primary",
            "not supported: the store writes",
        ),
        (
            "postgresql://h/db?channel_binding=maybe",
            "channel_binding \"maybe\" is not one of",
        ),
        (
            "postgresql://h/db?load_balance_hosts=yes",
            "load_balance_hosts \"yes\"",
        ),
        (
            "postgresql://h/db?client_encoding=LATIN1",
            "the store always talks UTF8",
        ),
        (
            "postgresql://h/db?gssencmode=require",
            "no GSSAPI encryption here",
        ),
        ("postgresql://h/db?ssl=false", "unknown parameter \"ssl\""),
        (
            "postgresql://h/db?sslmode=maybe",
            "sslmode \"maybe\" is not one of",
        ),
    ] {
        assert!(refused(url).contains(needle), "{url}: {}", refused(url));
    }
}

#[test]
fn the_honoured_parameters_reach_the_server() {
    let Some(schema) = pg_common::Schema::new() else {
        return;
    };
    let base = pg_common::url();
    let sep = if base.contains('?') { '&' } else { '?' };
    let app = format!("url_{}", schema.name);
    let url = format!(
        "{base}{sep}target_session_attrs=read-write&channel_binding=prefer\
         &load_balance_hosts=random&client_encoding=UTF8&gssencmode=disable\
         &connect_timeout=-1&fallback_application_name={app}"
    );
    let store = PgStore::connect(&url, schema.options(Durability::Sync)).unwrap();
    let s = Session::create(&store, "s", SessionMeta::default()).unwrap();
    s.append("host/a", "{}", Envelope::default()).unwrap();
    // The fallback name is the one the server sees, as no application_name was given.
    let mut c = pg_common::client().unwrap();
    let seen: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .unwrap()
        .get(0);
    assert!(seen >= 1, "no connection named {app}");
}

#[test]
fn a_mistyped_scheme_shows_only_the_scheme() {
    // #27: the scheme typo was the hole.
    for (url, start) in [
        ("postgres//u:Secret123@db:5432/x", "postgres//"),
        ("postgresql:/u:Secret123@db/x", "postgresql:/"),
        ("mysql://u:Secret123@h/db", "mysql://"),
    ] {
        let text = refused(url);
        assert_eq!(
            text,
            format!(
                "invalid PostgreSQL URL starting \"{start}\" (the rest not shown): it must \
                 start with postgresql:// or postgres://"
            )
        );
    }
    assert!(refused("Secret123@db").starts_with("invalid PostgreSQL URL (not shown): "));
    assert_eq!(redact_url("postgres//u:Secret123@db/x"), "postgres//***");
}

#[test]
fn messages_quote_the_url_with_its_password_hidden() {
    let text = refused("postgresql://u:pw@h:1/db?password=other&sslmode=nope");
    assert!(
        text.starts_with(
            "invalid PostgreSQL URL \"postgresql://u:***@h:1/db?password=***&sslmode=nope\": \
             sslmode \"nope\""
        ),
        "{text}"
    );
    // A part that may be a password is named, never quoted.
    let text = refused("postgresql://u:zq/ss/db");
    assert!(
        text.contains("port (not shown: it may hold a password)"),
        "{text}"
    );
    assert!(!text.contains("zq"), "{text}");
    // A query password with a raw "@" and no "/" before the query: libpq reads a user
    // name, then a host made of the password; refused.
    let text = refused("postgresql://db?password=@zq&sslmode=disable");
    assert!(
        text.contains("a password's text would be read as"),
        "{text}"
    );
    assert!(!text.contains("zq"), "{text}");
    assert_eq!(
        redact_url("postgresql://h/db?pass%77ord=s1&x&sslmode=disable"),
        "postgresql://h/db?pass%77ord=***&sslmode=disable"
    );
}

#[test]
fn the_fixtures_never_show_a_password() {
    let refused_urls = fixture("refused.txt");
    assert!(refused_urls.len() >= 50);
    for url in &refused_urls {
        assert!(url.contains("Qx"), "{url}");
        let text = refused(url);
        assert!(text.starts_with("invalid PostgreSQL URL "), "{url}: {text}");
        assert!(!text.contains("Qx"), "{url}: {text}");
        assert!(
            !redact_url(url).contains("Qx"),
            "{url}: {}",
            redact_url(url)
        );
    }
    for url in fixture("accepted.txt") {
        let u = PgUrl::parse(&url).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert!(!shown(&u).contains("Qx"), "{url}: {}", shown(&u));
        assert!(
            !redact_url(&url).contains("Qx"),
            "{url}: {}",
            redact_url(&url)
        );
    }
}

/// A URL with a password made of pieces holding `Qx` (special characters between them),
/// placed in the userinfo, the query (under a plain or a percent-encoded key) or both,
/// with a scheme that may be mistyped and noise that may break any other part.
fn url_with_password() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => "Qx[a-z0-9]{0,3}",
        1 => prop::sample::select(vec![
            ":", "/", "@", "?", "&", "=", ",", "%", "%2", "%00", "%zz", "%40", "[", "]", " ", "#",
            "%+4",
        ])
        .prop_map(str::to_owned),
    ];
    let password = prop::collection::vec(piece, 1..6).prop_map(|pieces| {
        let mut p = pieces.concat();
        if !p.contains("Qx") {
            p.push_str("Qx");
        }
        p
    });
    let scheme = prop::sample::select(vec![
        "postgresql://",
        "postgres://",
        "postgresql://",
        "postgres//",
        "postgresql:/",
        "postgresql:",
        "http://",
        "",
        "//",
    ]);
    let noise = prop::sample::select(vec![
        "",
        "",
        ":",
        "@",
        "/",
        "?",
        "&",
        "=",
        ",",
        "[",
        "]",
        ":99999",
        "%",
        "%00",
        "?bogus=1",
        "?sslmode=nope",
        "?sslcert=x",
        "?port=x",
        "&&",
        "?host=",
        "@x",
    ]);
    let host = prop::sample::select(vec![
        "h", "h:5432", "[::1]", "[::1]:7", "a,b", "a:1,b:2", "", "%2Ftmp", "h:",
    ]);
    (
        scheme,
        password,
        prop::sample::select(vec![0u8, 1, 2, 3]),
        host,
        noise.clone(),
        noise,
    )
        .prop_map(|(scheme, pw, place, host, n1, n2)| match place {
            0 => format!("{scheme}u:{pw}@{host}{n1}/db{n2}"),
            1 => format!("{scheme}{host}/db?password={pw}{n1}&sslmode=disable{n2}"),
            2 => format!("{scheme}{host}{n1}/db?pass%77ord={pw}{n2}"),
            _ => format!("{scheme}:{pw}@{host}/db{n1}?password={pw}{n2}"),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// No message, `Display`, `Debug` or description shows any piece of the password,
    /// whatever the URL's shape; and `redact_url` hides it too.
    #[test]
    fn no_password_in_any_message(url in url_with_password()) {
        match PgUrl::parse(&url) {
            Ok(u) => prop_assert!(!shown(&u).contains("Qx"), "{}: {}", url, shown(&u)),
            Err(e) => {
                prop_assert_eq!(e.kind(), ErrorKind::InvalidInput);
                prop_assert!(!e.to_string().contains("Qx"), "{}: {}", url, e);
            }
        }
        prop_assert!(!redact_url(&url).contains("Qx"), "{}: {}", url, redact_url(&url));
    }

    /// Any text: no panic, and an accepted URL shows what it parsed the same way twice.
    #[test]
    fn any_text_parses_or_is_refused(text in "[a-z:/@?&=%,\\[\\]0-9.]{0,40}") {
        let text = format!("postgresql://{text}");
        match PgUrl::parse(&text) {
            Ok(u) => prop_assert_eq!(u.to_string(), PgUrl::parse(&text).unwrap().to_string()),
            Err(e) => prop_assert_eq!(e.kind(), ErrorKind::InvalidInput),
        }
    }
}
