//! TLS against real servers (ARCHITECTURE.md#postgresql): each `sslmode` with libpq's
//! meaning, read back from the server's `pg_stat_ssl` for the store's own backends.
//!
//! Three servers: the machine's (INBOXLOG_TEST_PG), whatever its `ssl` setting, and two
//! throwaway clusters this file starts itself (initdb and pg_ctl from the server
//! packages, on a free port, in a temp dir, removed afterwards): one with TLS and a
//! certificate from a throwaway CA, one without TLS. So every case runs on a machine
//! whose server offers TLS and on one whose server does not. A fake server that
//! shows a certificate without holding its key stands for someone in the middle.

mod pg_common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use inboxlog::store::postgres::{PgOptions, PgStore};
use inboxlog::{ErrorKind, Session, SessionMeta};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::ServerConnection;
use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, ServerConfig};
use rustls::sign::CertifiedKey;

/// A PostgreSQL cluster of this test's own, stopped and removed on drop.
struct Cluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    as_owner: Vec<String>,
}

/// The server binaries: the newest /usr/lib/postgresql/*/bin, else the PATH's.
fn server_bin() -> Option<PathBuf> {
    let mut dirs: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            Some((version, e.path().join("bin")))
        })
        .filter(|(_, bin)| bin.join("initdb").is_file())
        .collect();
    dirs.sort();
    if let Some((_, bin)) = dirs.pop() {
        return Some(bin);
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
    })
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Cluster {
    /// A running cluster (trust authentication, 127.0.0.1 only), with TLS when `tls`
    /// gives the certificate chain and key in PEM; `None` (skipped) where no server
    /// binaries are installed, except under CI, where that fails.
    fn start(tls: Option<(&str, &str)>) -> Option<Cluster> {
        let Some(bin) = server_bin() else {
            assert!(
                !pg_common::required(),
                "CI=true and no PostgreSQL server binaries (initdb) are installed"
            );
            eprintln!("SKIPPED: no PostgreSQL server binaries (initdb) to run a cluster");
            return None;
        };
        let root = String::from_utf8(Command::new("id").arg("-u").output().unwrap().stdout)
            .unwrap()
            .trim()
            == "0";
        // initdb refuses root: the cluster then belongs to `postgres` (or `nobody`).
        let owner = if !root {
            None
        } else if Command::new("id")
            .arg("postgres")
            .output()
            .unwrap()
            .status
            .success()
        {
            Some("postgres")
        } else {
            Some("nobody")
        };
        let dir = tempfile::Builder::new()
            .prefix("inboxlog-pg-tls.")
            .tempdir()
            .unwrap();
        let path = dir.path().to_path_buf();
        let mut options = format!(
            "-c listen_addresses=127.0.0.1 -k {} -c fsync=off",
            path.display()
        );
        if let Some((cert, key)) = tls {
            std::fs::write(path.join("server.crt"), cert).unwrap();
            std::fs::write(path.join("server.key"), key).unwrap();
            std::fs::set_permissions(
                path.join("server.key"),
                std::fs::Permissions::from_mode(0o600),
            )
            .unwrap();
            options.push_str(&format!(
                " -c ssl=on -c ssl_cert_file={0}/server.crt -c ssl_key_file={0}/server.key",
                path.display()
            ));
        } else {
            options.push_str(" -c ssl=off");
        }
        if let Some(owner) = owner {
            run(Command::new("chown").args(["-R", owner]).arg(&path));
        }
        let as_owner: Vec<String> = match owner {
            Some(owner) => vec!["runuser".into(), "-u".into(), owner.into(), "--".into()],
            None => Vec::new(),
        };
        let data = path.join("data");
        let port = {
            let probe = TcpListener::bind("127.0.0.1:0").unwrap();
            probe.local_addr().unwrap().port()
        };
        let cluster = Cluster {
            bin,
            dir,
            port,
            as_owner,
        };
        run(cluster.command("initdb").arg("-D").arg(&data).args([
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
        ]));
        run(cluster
            .command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-o")
            .arg(format!("-p {port} {options}"))
            .arg("-l")
            .arg(path.join("server.log"))
            .args(["-w", "start"]));
        Some(cluster)
    }

    /// One of the server's programs, run as the cluster's owner.
    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        match self.as_owner.split_first() {
            Some((first, rest)) => {
                let mut cmd = Command::new(first);
                cmd.args(rest).arg(program);
                cmd
            }
            None => Command::new(program),
        }
    }

    /// The URL of the cluster at `host` with `query` (which may be empty).
    fn url(&self, host: &str, query: &str) -> String {
        format!(
            "postgresql://postgres:hunter2@{host}:{}/postgres?{query}",
            self.port
        )
    }

    /// A plain connection for the test's own queries.
    fn client(&self) -> postgres::Client {
        postgres::Client::connect(
            &format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port),
            postgres::NoTls,
        )
        .unwrap()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}

/// The URL [`system_roots_child`] connects to.
const CHILD_URL: &str = "INBOXLOG_TLS_CHILD_URL";

/// The child's entry point, run only by the private-CA test with [`CHILD_URL`] and
/// `SSL_CERT_FILE` set; ignored in a normal run, where it would check nothing.
#[test]
#[ignore = "the TLS test's child process: it runs it with INBOXLOG_TLS_CHILD_URL set"]
fn system_roots_child() {
    println!();
    if let Ok(url) = std::env::var(CHILD_URL) {
        // sslrootcert=system means verify-full: connecting is the chain and name checked.
        PgStore::connect(&url, PgOptions::default()).unwrap();
        println!("connected with the system's roots");
    }
}

static APPS: AtomicU64 = AtomicU64::new(0);

/// `url` with `query` added (after the URL's own parameters, if any).
fn with(url: &str, query: &str) -> String {
    match (query.is_empty(), url.contains('?')) {
        (true, _) => url.to_owned(),
        (false, true) if url.ends_with('?') => format!("{url}{query}"),
        (false, true) => format!("{url}&{query}"),
        (false, false) => format!("{url}?{query}"),
    }
}

/// Connects a store at `url` + `query`, opens a session on it and returns whether its
/// backends use TLS, as the server's `pg_stat_ssl` shows them to `client` (all of them
/// alike, or the test fails).
fn ssl_of_store(client: &mut postgres::Client, url: &str, query: &str) -> bool {
    let app = format!(
        "tls_{}_{}",
        std::process::id(),
        APPS.fetch_add(1, Ordering::Relaxed)
    );
    let schema = format!("{app}_s");
    // libpq refuses an empty query part (`?&…`), so the name joins only a query that has one.
    let named = if query.is_empty() {
        format!("application_name={app}")
    } else {
        format!("{query}&application_name={app}")
    };
    let full = with(url, &named);
    let store = PgStore::connect(
        &full,
        PgOptions {
            schema: schema.clone(),
            ..PgOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{query}: {e}"));
    let session = Session::create(&store, "s", SessionMeta::default()).unwrap();
    let ssl: Vec<bool> = client
        .query(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name = $1",
            &[&app],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    drop(session);
    drop(store);
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
        .unwrap();
    assert!(
        !ssl.is_empty() && ssl.iter().all(|s| *s == ssl[0]),
        "{query}: the store's backends: {ssl:?}"
    );
    ssl[0]
}

/// Connecting at `url` + `query` is refused as `unavailable`, naming every needle and
/// never the password.
#[track_caller]
fn refused(url: &str, query: &str, needles: &[&str]) {
    let Err(err) = PgStore::connect(&with(url, query), PgOptions::default()) else {
        panic!("{query}: connected, expected a refusal");
    };
    assert_eq!(err.kind(), ErrorKind::Unavailable, "{query}: {err}");
    let text = format!("{err} {err:?}");
    for needle in needles {
        assert!(text.contains(needle), "{query}: {needle:?} not in {err}");
    }
    assert!(!text.contains("hunter2"), "{text}");
}

const UNCHECKED: [&str; 4] = ["", "sslmode=prefer", "sslmode=allow", "sslmode=require"];

/// A throwaway CA and a server certificate for `localhost` signed by it: (CA PEM,
/// server certificate PEM, server key PEM).
fn private_ca(ca_name: &str) -> (String, String, String) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name.push(DnType::CommonName, ca_name);
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    (ca.pem(), cert.pem(), key.serialize_pem())
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    file.display().to_string()
}

#[test]
fn a_server_with_a_private_ca_is_encrypted_by_default_and_verified_only_when_asked() {
    let (ca, cert, key) = private_ca("inboxlog test CA");
    let Some(cluster) = Cluster::start(Some((&cert, &key))) else {
        return;
    };
    let mut client = cluster.client();
    let by_ip = cluster.url("127.0.0.1", "");
    let by_name = cluster.url("localhost", "");
    let files = tempfile::tempdir().unwrap();
    let root = write(files.path(), "ca.pem", &ca);
    let (other_ca, _, _) = private_ca("another CA");
    let other = write(files.path(), "other.pem", &other_ca);

    // No sslmode, allow, prefer, require: encrypted, the certificate unchecked.
    for query in UNCHECKED {
        assert!(ssl_of_store(&mut client, &by_ip, query), "{query}");
    }
    assert!(!ssl_of_store(&mut client, &by_ip, "sslmode=disable"));
    // verify-ca and verify-full need a root that signed the certificate.
    for mode in ["verify-ca", "verify-full"] {
        refused(
            &by_name,
            &format!("sslmode={mode}"),
            &[
                &format!("presented a certificate that sslmode={mode} refuses"),
                "UnknownIssuer",
                "the bundled web roots",
                "sslrootcert=/path/ca.pem",
                &format!("localhost:{}", cluster.port),
            ],
        );
        refused(
            &by_name,
            &format!("sslmode={mode}&sslrootcert={other}"),
            &["UnknownIssuer", "other.pem"],
        );
    }
    // require with a root checks the chain, as libpq's does.
    refused(
        &by_ip,
        &format!("sslmode=require&sslrootcert={other}"),
        &[
            "sslmode=require refuses",
            "no trusted root signed it",
            "leave sslrootcert out",
        ],
    );
    for query in [
        format!("sslmode=verify-ca&sslrootcert={root}"),
        format!("sslmode=require&sslrootcert={root}"),
    ] {
        // The certificate names localhost, not 127.0.0.1: the chain alone is checked.
        assert!(ssl_of_store(&mut client, &by_ip, &query), "{query}");
    }
    // verify-full checks the host name too.
    refused(
        &by_ip,
        &format!("sslmode=verify-full&sslrootcert={root}"),
        &[
            "sslmode=verify-full refuses",
            "and the host name",
            "not valid for name",
            "sslmode=verify-ca",
        ],
    );
    let full = format!("sslmode=verify-full&sslrootcert={root}");
    assert!(ssl_of_store(&mut client, &by_name, &full));
    // sslrootcert=system trusts what the platform trusts: a child process (the
    // environment is the process's) whose SSL_CERT_FILE names the throwaway CA.
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "system_roots_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SSL_CERT_FILE", &root)
        .env_remove("SSL_CERT_DIR")
        .env(CHILD_URL, with(&by_name, "sslrootcert=system"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success() && said.contains("connected with the system's roots"),
        "{said}\n{}",
        String::from_utf8_lossy(&child.stderr)
    );
    // The platform's roots do not hold a throwaway CA (or the machine has none).
    match PgStore::connect(&with(&by_name, "sslrootcert=system"), PgOptions::default()) {
        Ok(_) => panic!("sslrootcert=system trusted a throwaway CA"),
        Err(err) if err.kind() == ErrorKind::InvalidInput => {
            assert!(err.to_string().contains("sslrootcert=system"), "{err}");
        }
        Err(err) => {
            assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
            let text = err.to_string();
            assert!(text.contains("the system's trusted roots"), "{text}");
            assert!(text.contains("UnknownIssuer"), "{text}");
        }
    }
}

#[test]
fn a_server_without_tls_gets_plain_text_from_prefer_and_a_refusal_from_require() {
    let Some(cluster) = Cluster::start(None) else {
        return;
    };
    let mut client = cluster.client();
    let url = cluster.url("127.0.0.1", "");
    for query in ["", "sslmode=prefer", "sslmode=allow", "sslmode=disable"] {
        assert!(!ssl_of_store(&mut client, &url, query), "{query}");
    }
    for mode in ["require", "verify-ca", "verify-full"] {
        refused(
            &url,
            &format!("sslmode={mode}"),
            &[
                &format!("does not offer TLS, which sslmode={mode} requires"),
                &format!("127.0.0.1:{}", cluster.port),
            ],
        );
    }
}

#[test]
fn the_machine_server_is_encrypted_whenever_it_offers_tls() {
    let Some(mut client) = pg_common::client() else {
        return;
    };
    let ssl: String = client.query_one("SHOW ssl", &[]).unwrap().get(0);
    let url = pg_common::url();
    let with_password = url.replacen("://postgres@", "://postgres:hunter2@", 1);
    assert!(!ssl_of_store(&mut client, &url, "sslmode=disable"));
    if ssl != "on" {
        for query in ["", "sslmode=prefer", "sslmode=allow"] {
            assert!(!ssl_of_store(&mut client, &url, query), "{query}");
        }
        refused(&with_password, "sslmode=require", &["does not offer TLS"]);
        return;
    }
    for query in UNCHECKED {
        assert!(ssl_of_store(&mut client, &url, query), "{query}");
    }
    // A self-signed certificate (Debian's snakeoil) is in no bundled root.
    for mode in ["verify-ca", "verify-full"] {
        refused(
            &with_password,
            &format!("sslmode={mode}"),
            &[&format!("sslmode={mode} refuses"), "UnknownIssuer"],
        );
    }
    // The server's own certificate, where this process may read it, is its root.
    let cert_file: String = client.query_one("SHOW ssl_cert_file", &[]).unwrap().get(0);
    let data_dir: String = client.query_one("SHOW data_directory", &[]).unwrap().get(0);
    let cert_file = Path::new(&data_dir).join(cert_file);
    if std::fs::read(&cert_file).is_ok() {
        let query = format!("sslmode=verify-ca&sslrootcert={}", cert_file.display());
        assert!(ssl_of_store(&mut client, &url, &query));
    } else {
        eprintln!(
            "note: {} is not readable here; the private-CA test covers verify-ca",
            cert_file.display()
        );
    }
}

/// Shows one certificate and signs with one key, whatever the client asks.
#[derive(Debug)]
struct Shows(Arc<CertifiedKey>);

impl ResolvesServerCert for Shows {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

#[test]
fn the_unchecked_modes_refuse_a_server_that_shows_a_certificate_without_its_key() {
    // A fake server: says yes to the client's SSLRequest, then shows a real certificate
    // but signs the handshake with a key of its own, as an impersonator would.
    let real = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let stranger = KeyPair::generate().unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(stranger.serialize_der()));
    let signing = provider.key_provider.load_private_key(key).unwrap();
    let shows = Shows(Arc::new(CertifiedKey::new(
        vec![real.cert.der().clone()],
        signing,
    )));
    let config = Arc::new(
        ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(shows)),
    );
    let modes = ["prefer", "allow", "require"];
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        for _ in modes {
            let (mut tcp, _) = listener.accept().unwrap();
            let mut request = [0u8; 8];
            tcp.read_exact(&mut request).unwrap();
            // Length 8, then the SSLRequest code 80877103.
            assert_eq!(request, [0, 0, 0, 8, 4, 210, 22, 47]);
            tcp.write_all(b"S").unwrap();
            let mut tls = ServerConnection::new(config.clone()).unwrap();
            // Ends when the client refuses the handshake (its alert, or its close).
            while tls.is_handshaking() && tls.complete_io(&mut tcp).is_ok() {}
        }
    });
    for mode in modes {
        refused(
            &format!("postgresql://postgres:hunter2@127.0.0.1:{port}/test"),
            &format!("sslmode={mode}"),
            &[
                "did not sign the TLS handshake with its certificate's key",
                "BadSignature",
                &format!("sslmode={}", if mode == "allow" { "prefer" } else { mode }),
                &format!("127.0.0.1:{port}"),
            ],
        );
    }
    server.join().unwrap();
}
