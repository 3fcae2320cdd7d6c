//! TLS per `sslmode`, with libpq's meanings (ARCHITECTURE.md#postgresql), through rustls:
//!
//! | `sslmode` | TLS | certificate checked |
//! | --- | --- | --- |
//! | `disable` | never | — |
//! | `allow`, `prefer` (default) | whenever the server offers it | no |
//! | `require` | always | only with `sslrootcert`: the chain, as `verify-ca` |
//! | `verify-ca` | always | the chain |
//! | `verify-full` | always | the chain and the host name |
//!
//! When the server offers TLS, `allow` and `prefer` use it and never fall back to plain
//! text (a failed handshake fails the connection). A certificate that is not checked
//! still has to sign the handshake: [`Unnamed`] without roots accepts any certificate
//! but verifies the handshake signatures with it, so a party that shows a certificate
//! without holding its key is refused. That is confined to the modes above that check
//! no certificate; with roots it checks the chain but no name (`verify-ca`).
//!
//! Roots: the PEM file `sslrootcert` names; `sslrootcert=system`, the platform's trusted
//! roots (then the mode is `verify-full`, and a weaker one is refused, as in libpq);
//! otherwise the bundled web roots of webpki-roots.

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{WebPkiServerVerifier, verify_server_cert_signed_by_trust_anchor};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::url::{PgUrl, SslMode};
use crate::error::{Error, ErrorKind, Result};

/// The `sslrootcert` value that means the platform's trusted roots (libpq's spelling).
pub(super) const SYSTEM_ROOTS: &str = "system";

/// What a connection checks of the server's certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Check {
    /// Nothing but the handshake signatures (`allow`, `prefer`, `require` without a
    /// root file).
    Signatures,
    /// The chain up to a root, not the host name (`verify-ca`, `require` with
    /// `sslrootcert`).
    Chain,
    /// The chain and the host name (`verify-full`).
    Full,
}

impl Check {
    /// What `url`'s `sslmode` (and `sslrootcert`) check; `None` for `disable`.
    pub fn of(url: &PgUrl) -> Option<Check> {
        Some(match url.sslmode {
            SslMode::Disable => return None,
            SslMode::Require if url.sslrootcert.is_some() => Check::Chain,
            SslMode::Prefer | SslMode::Require => Check::Signatures,
            SslMode::VerifyCa => Check::Chain,
            SslMode::VerifyFull => Check::Full,
        })
    }

    /// What this check verifies, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Check::Signatures => "encrypts without checking the certificate",
            Check::Chain => "checks the certificate chain",
            Check::Full => "checks the certificate chain and the host name",
        }
    }
}

/// Where the trusted roots of `url` come from, for messages.
pub(super) fn roots_source(url: &PgUrl) -> String {
    match &url.sslrootcert {
        None => "the bundled web roots (no sslrootcert given)".to_owned(),
        Some(p) if p.as_os_str() == SYSTEM_ROOTS => "the system's trusted roots".to_owned(),
        Some(p) => format!("the certificates of sslrootcert {}", p.display()),
    }
}

/// The rustls client configuration for `url`, or `None` for `sslmode=disable`. Reads
/// the roots now, so a bad `sslrootcert` fails here, before any connection.
pub(super) fn config(url: &PgUrl) -> Result<Option<ClientConfig>> {
    let Some(check) = Check::of(url) else {
        return Ok(None);
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::new(ErrorKind::InvalidInput, format!("TLS setup: {e}")))?;
    let verifier: Arc<dyn ServerCertVerifier> = match check {
        Check::Signatures => Arc::new(Unnamed {
            roots: None,
            provider,
        }),
        Check::Chain => Arc::new(Unnamed {
            roots: Some(Arc::new(roots(url)?)),
            provider,
        }),
        Check::Full => WebPkiServerVerifier::builder_with_provider(Arc::new(roots(url)?), provider)
            .build()
            .map_err(|e| Error::new(ErrorKind::InvalidInput, format!("TLS setup: {e}")))?,
    };
    Ok(Some(
        builder
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth(),
    ))
}

/// The roots `url` trusts (see the module doc).
fn roots(url: &PgUrl) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    match &url.sslrootcert {
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        Some(path) if path.as_os_str() == SYSTEM_ROOTS => {
            system_roots(&mut roots, rustls_native_certs::load_native_certs())?;
        }
        Some(path) => file_roots(&mut roots, path)?,
    }
    Ok(roots)
}

/// Adds the certificates of the PEM file at `path`; refuses a file that cannot be read,
/// holds no certificate or holds one that cannot be a root.
fn file_roots(roots: &mut RootCertStore, path: &Path) -> Result<()> {
    use rustls::pki_types::pem::PemObject;
    let bad = |why: String| {
        Error::new(
            ErrorKind::InvalidInput,
            format!("sslrootcert {}: {why}", path.display()),
        )
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("holds no PEM certificate".to_owned()));
    }
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| bad(format!("not a usable CA certificate: {e}")))?;
    }
    Ok(())
}

/// Adds the platform's roots as loaded; refuses a platform where none loaded (files
/// that failed to read are named then; ones that failed beside usable roots are
/// skipped, as every TLS client on the platform skips them).
fn system_roots(
    roots: &mut RootCertStore,
    loaded: rustls_native_certs::CertificateResult,
) -> Result<()> {
    let (added, _) = roots.add_parsable_certificates(loaded.certs);
    if added == 0 {
        let why: Vec<String> = loaded.errors.iter().map(ToString::to_string).collect();
        return Err(Error::new(
            ErrorKind::InvalidInput,
            format!(
                "sslrootcert=system: no trusted root certificate found on this machine{}; \
                 set SSL_CERT_FILE to a CA bundle, or name one with sslrootcert=/path/ca.pem",
                if why.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", why.join("; "))
                }
            ),
        ));
    }
    Ok(())
}

/// The verifier of the modes that never check the host name: `roots` `None` accepts
/// any certificate (`allow`, `prefer`, `require` without `sslrootcert`); `Some` checks
/// the chain up to one of them (validity dates, key usage, signatures): libpq's
/// `verify-ca`. Either way the server must sign the handshake with the certificate's
/// key.
#[derive(Debug)]
struct Unnamed {
    roots: Option<Arc<RootCertStore>>,
    provider: Arc<CryptoProvider>,
}

impl Unnamed {
    /// The provider's algorithms: the supported schemes and the handshake checks.
    fn algorithms(&self) -> &rustls::crypto::WebPkiSupportedAlgorithms {
        &self.provider.signature_verification_algorithms
    }
}

impl ServerCertVerifier for Unnamed {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let cert = ParsedCertificate::try_from(end_entity)?;
            verify_server_cert_signed_by_trust_anchor(
                &cert,
                roots,
                intermediates,
                now,
                self.algorithms().all,
            )?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, self.algorithms())
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, self.algorithms())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms().supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    use rustls::server::{ClientHello, ResolvesServerCert, ServerConfig};
    use rustls::sign::CertifiedKey;
    use rustls::{ClientConnection, ServerConnection};

    use super::*;

    fn url(query: &str) -> PgUrl {
        PgUrl::parse(&format!("postgresql://u:pw@h/db?{query}")).unwrap()
    }

    /// A server that shows `chain` and signs its handshakes with `key` (which need not
    /// be the certificate's: that is the point of some tests).
    #[derive(Debug)]
    struct Shows(Arc<CertifiedKey>);

    impl ResolvesServerCert for Shows {
        fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
            Some(self.0.clone())
        }
    }

    fn server(
        chain: Vec<CertificateDer<'static>>,
        key: &KeyPair,
        tls12: bool,
    ) -> Arc<ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let signing = provider.key_provider.load_private_key(der).unwrap();
        let versions: &[&rustls::SupportedProtocolVersion] = if tls12 {
            &[&rustls::version::TLS12]
        } else {
            &[&rustls::version::TLS13]
        };
        Arc::new(
            ServerConfig::builder_with_provider(provider)
                .with_protocol_versions(versions)
                .unwrap()
                .with_no_client_auth()
                .with_cert_resolver(Arc::new(Shows(Arc::new(CertifiedKey::new(chain, signing))))),
        )
    }

    /// Runs a whole handshake in memory: the client's verdict.
    fn handshake(
        client: ClientConfig,
        server: Arc<ServerConfig>,
        name: &str,
    ) -> std::result::Result<(), rustls::Error> {
        let name = ServerName::try_from(name.to_owned()).unwrap();
        let mut c = ClientConnection::new(Arc::new(client), name).unwrap();
        let mut s = ServerConnection::new(server).unwrap();
        // A TLS 1.2 or 1.3 handshake takes at most a few flights each way.
        for _ in 0..10 {
            let mut wire = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut wire).unwrap();
            }
            let mut rd = &wire[..];
            while !rd.is_empty() {
                s.read_tls(&mut rd).unwrap();
            }
            s.process_new_packets()
                .unwrap_or_else(|e| panic!("the server failed first: {e}"));
            wire.clear();
            while s.wants_write() {
                s.write_tls(&mut wire).unwrap();
            }
            let mut rd = &wire[..];
            while !rd.is_empty() {
                c.read_tls(&mut rd).unwrap();
            }
            c.process_new_packets()?;
            if !c.is_handshaking() && !s.is_handshaking() {
                return Ok(());
            }
        }
        panic!("the handshake did not finish");
    }

    /// A CA named `ca_name`, and a server certificate for `names` signed by it, with its
    /// key.
    struct Pki {
        ca_pem: String,
        chain: Vec<CertificateDer<'static>>,
        key: KeyPair,
    }

    fn pki(ca_name: &str, names: &[&str]) -> Pki {
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, ca_name);
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        Pki {
            ca_pem: ca.pem(),
            chain: vec![cert.der().clone()],
            key,
        }
    }

    fn with_root(query: &str, pem: &str) -> (tempfile::TempDir, ClientConfig) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ca.pem");
        std::fs::write(&file, pem).unwrap();
        let config = config(&url(&format!("{query}&sslrootcert={}", file.display())))
            .unwrap()
            .unwrap();
        (dir, config)
    }

    #[test]
    fn each_mode_checks_what_libpq_says() {
        for (query, check) in [
            ("sslmode=disable", None),
            ("", Some(Check::Signatures)),
            ("sslmode=allow", Some(Check::Signatures)),
            ("sslmode=prefer", Some(Check::Signatures)),
            (
                "sslmode=prefer&sslrootcert=/ca.pem",
                Some(Check::Signatures),
            ),
            ("sslmode=require", Some(Check::Signatures)),
            ("sslmode=require&sslrootcert=/ca.pem", Some(Check::Chain)),
            ("sslmode=verify-ca", Some(Check::Chain)),
            ("sslmode=verify-full", Some(Check::Full)),
            ("sslrootcert=system", Some(Check::Full)),
        ] {
            assert_eq!(Check::of(&url(query)), check, "{query}");
        }
        assert!(config(&url("sslmode=disable")).unwrap().is_none());
        // The unchecked modes read no root file, so a missing one is no error there.
        assert!(config(&url("sslmode=prefer&sslrootcert=/nonexistent/ca.pem")).is_ok());
    }

    #[test]
    fn an_unchecked_certificate_must_still_sign_the_handshake() {
        let own = rcgen::generate_simple_self_signed(vec!["db.example".to_owned()]).unwrap();
        let stranger = KeyPair::generate().unwrap();
        for tls12 in [false, true] {
            for query in ["sslmode=prefer", "sslmode=require"] {
                let client = || config(&url(query)).unwrap().unwrap();
                let chain = vec![own.cert.der().clone()];
                // Any certificate, any name: encrypted, unchecked.
                handshake(
                    client(),
                    server(chain.clone(), &own.signing_key, tls12),
                    "x.y",
                )
                .unwrap_or_else(|e| panic!("{query} tls12={tls12}: {e}"));
                // Someone else's certificate without its key: refused.
                let err = handshake(client(), server(chain, &stranger, tls12), "x.y").unwrap_err();
                assert!(
                    matches!(
                        err,
                        rustls::Error::InvalidCertificate(rustls::CertificateError::BadSignature)
                    ),
                    "{query} tls12={tls12}: {err:?}"
                );
            }
        }
    }

    #[test]
    fn verify_ca_checks_the_chain_and_verify_full_the_name_too() {
        let ours = pki("our CA", &["db.example"]);
        let theirs = pki("their CA", &["db.example"]);
        for query in ["sslmode=verify-ca", "sslmode=require"] {
            let (_dir, client) = with_root(query, &ours.ca_pem);
            // Chain good, name not the certificate's: fine for verify-ca.
            handshake(
                client,
                server(ours.chain.clone(), &ours.key, false),
                "other",
            )
            .unwrap_or_else(|e| panic!("{query}: {e}"));
            let (_dir, client) = with_root(query, &ours.ca_pem);
            let err = handshake(
                client,
                server(theirs.chain.clone(), &theirs.key, false),
                "db.example",
            )
            .unwrap_err();
            assert!(
                matches!(
                    err,
                    rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer)
                ),
                "{query}: {err:?}"
            );
        }
        let (_dir, client) = with_root("sslmode=verify-full", &ours.ca_pem);
        handshake(
            client,
            server(ours.chain.clone(), &ours.key, true),
            "db.example",
        )
        .unwrap();
        let (_dir, client) = with_root("sslmode=verify-full", &ours.ca_pem);
        let err = handshake(
            client,
            server(ours.chain.clone(), &ours.key, false),
            "other",
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForNameContext { .. }
                        | rustls::CertificateError::NotValidForName
                )
            ),
            "{err:?}"
        );
        // Without sslrootcert, the bundled web roots know no private CA.
        let client = config(&url("sslmode=verify-ca")).unwrap().unwrap();
        let err = handshake(
            client,
            server(ours.chain.clone(), &ours.key, false),
            "db.example",
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer)
            ),
            "{err:?}"
        );
    }

    #[test]
    fn a_root_file_that_holds_no_usable_certificate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("junk.pem");
        std::fs::write(
            &file,
            "-----BEGIN CERTIFICATE-----\naGVsbG8=\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let err = config(&url(&format!(
            "sslmode=verify-ca&sslrootcert={}",
            file.display()
        )))
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        let text = err.to_string();
        assert!(text.contains("not a usable CA certificate"), "{text}");
        assert!(text.contains("junk.pem"), "{text}");
    }

    #[test]
    fn system_roots_refuse_a_platform_without_any() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("bundle.pem");
        std::fs::write(&empty, "").unwrap();
        let missing = dir.path().join("missing.pem");
        for (file, needle) in [(&empty, "no trusted root"), (&missing, "missing.pem")] {
            let loaded = rustls_native_certs::load_certs_from_paths(Some(file), None);
            let err = system_roots(&mut RootCertStore::empty(), loaded).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput);
            let text = err.to_string();
            assert!(text.contains("sslrootcert=system"), "{text}");
            assert!(text.contains(needle), "{text}");
        }
        let ours = pki("our CA", &["db.example"]);
        let bundle = dir.path().join("ca.pem");
        std::fs::write(&bundle, &ours.ca_pem).unwrap();
        let mut roots = RootCertStore::empty();
        let loaded = rustls_native_certs::load_certs_from_paths(Some(&bundle), None);
        system_roots(&mut roots, loaded).unwrap();
        assert_eq!(roots.len(), 1);
    }
}
