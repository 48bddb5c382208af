//! TLS of the server stores: rustls with ring for every client, the server's certificate checked
//! against the system's roots or a CA file the URL names, a client certificate where the server
//! asks for one, and errors that say which check failed. Each store takes its ecosystem's URL
//! convention (`rediss://`, `sslmode=`, `ssl-mode=`); this module holds what they share.

#[cfg(feature = "postgres")]
pub(crate) use config::{client_config, Check};

/// Makes ring the process's crypto provider unless one is set (every TLS client here uses the
/// process's provider).
pub(crate) fn use_ring() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// `url` without the query parameters named in `ours`, and their values (in order). The
/// drivers do not know these parameters; the stores read them.
pub(crate) fn take_params(url: &str, ours: &[&str]) -> (String, Vec<(String, String)>) {
    let (base, fragment) = match url.split_once('#') {
        Some((b, f)) => (b, Some(f)),
        None => (url, None),
    };
    let Some((path, query)) = base.split_once('?') else {
        return (url.to_owned(), Vec::new());
    };
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        if ours.contains(&name) {
            taken.push((name.to_owned(), value.to_owned()));
        } else {
            kept.push(pair);
        }
    }
    let mut rest = path.to_owned();
    if !kept.is_empty() {
        rest.push('?');
        rest.push_str(&kept.join("&"));
    }
    if let Some(f) = fragment {
        rest.push('#');
        rest.push_str(f);
    }
    (rest, taken)
}

/// A connection error's words, led by what a failed TLS check means when it is one: an
/// untrusted CA, an expired certificate, a certificate for another host, a client certificate
/// the server wants.
pub(crate) fn explain(reason: String) -> String {
    let lower = reason.to_ascii_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| lower.contains(w));
    let why = if has(&["unknownissuer", "unknown issuer", "unknown ca"]) {
        "the server's certificate is not signed by a CA this client trusts (name the CA's file in the URL)"
    } else if has(&["expired"]) && has(&["certificate"]) {
        "the server's certificate has expired (or is not valid yet)"
    } else if has(&["notvalidforname", "not valid for name"]) {
        "the server's certificate is for another host name"
    } else if has(&["certificaterequired", "certificate required"]) {
        "the server asks for a client certificate (name it and its key in the URL)"
    } else {
        return reason;
    };
    format!("TLS: {why}: {reason}")
}

/// A rustls client configuration of our own (the PostgreSQL client takes one; the Redis and
/// MySQL clients build theirs from files).
#[cfg(feature = "postgres")]
mod config {
    use std::path::Path;
    use std::sync::Arc;

    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::client::WebPkiServerVerifier;
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
    use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

    use super::use_ring;

    /// How much of the server's certificate is checked.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Check {
        /// Its chain up to a trusted root, and that it names the host connected to.
        Full,
        /// Its chain only (PostgreSQL `verify-ca`, MySQL `VERIFY_CA`).
        ChainOnly,
    }

    /// The client side of TLS: trusted roots (the CA file if given, else the system's), the check,
    /// and the client's certificate and key if both are given.
    ///
    /// # Errors
    /// A sentence naming the file that cannot be read or holds no certificate or key.
    pub(crate) fn client_config(
        ca: Option<&Path>,
        client: Option<(&Path, &Path)>,
        check: Check,
    ) -> Result<rustls::ClientConfig, String> {
        use_ring();
        let mut roots = RootCertStore::empty();
        match ca {
            Some(path) => {
                let certs = read_certs(path)?;
                for cert in certs {
                    roots
                        .add(cert)
                        .map_err(|e| format!("the CA file {}: {e}", path.display()))?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
                if roots.is_empty() {
                    return Err(
                        "no trusted roots on this system: give the CA's file in the URL".into(),
                    );
                }
            }
        }
        let verifier = WebPkiServerVerifier::builder(Arc::new(roots))
            .build()
            .map_err(|e| format!("the trusted roots: {e}"))?;
        let builder = rustls::ClientConfig::builder();
        let builder = match check {
            Check::Full => builder.with_webpki_verifier(verifier),
            Check::ChainOnly => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly(verifier))),
        };
        match client {
            Some((cert, key)) => {
                let chain = read_certs(cert)?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| format!("the client key {}: {e}", key.display()))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("the client certificate {}: {e}", cert.display()))
            }
            None => Ok(builder.with_no_client_auth()),
        }
    }

    fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
        let certs: Vec<_> = CertificateDer::pem_file_iter(path)
            .and_then(|certs| certs.collect::<Result<_, _>>())
            .map_err(|e| format!("the certificate file {}: {e}", path.display()))?;
        if certs.is_empty() {
            return Err(format!(
                "the certificate file {} holds no certificate",
                path.display()
            ));
        }
        Ok(certs)
    }

    /// Checks the chain and not the name (the server's certificate may name another host).
    #[derive(Debug)]
    struct ChainOnly(Arc<WebPkiServerVerifier>);

    impl ServerCertVerifier for ChainOnly {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            intermediates: &[CertificateDer<'_>],
            server_name: &ServerName<'_>,
            ocsp: &[u8],
            now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            // The name is checked after the chain: its error means the chain was good.
            match (self.0).verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
                Err(rustls::Error::InvalidCertificate(
                    CertificateError::NotValidForName
                    | CertificateError::NotValidForNameContext { .. },
                )) => Ok(ServerCertVerified::assertion()),
                other => other,
            }
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls12_signature(message, cert, dss)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            self.0.verify_tls13_signature(message, cert, dss)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.supported_verify_schemes()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_parameters_leave_the_url() {
        let (rest, taken) = take_params(
            "postgres://u@h/db?sslmode=require&application_name=x&sslrootcert=/ca.pem",
            &["sslmode", "sslrootcert"],
        );
        assert_eq!(rest, "postgres://u@h/db?application_name=x");
        assert_eq!(
            taken,
            vec![
                ("sslmode".into(), "require".into()),
                ("sslrootcert".into(), "/ca.pem".into())
            ]
        );
        let (rest, taken) = take_params("rediss://h:1/0?cacert=/c#insecure", &["cacert"]);
        assert_eq!((rest.as_str(), taken.len()), ("rediss://h:1/0#insecure", 1));
        assert_eq!(take_params("redis://h", &["x"]).0, "redis://h");
    }

    #[test]
    fn tls_failures_say_which_check_failed() {
        assert!(explain("invalid peer certificate: UnknownIssuer".into())
            .contains("not signed by a CA"));
        assert!(
            explain("certificate expired: verification time 1 (UNIX)".into())
                .contains("has expired")
        );
        assert!(
            explain("certificate not valid for name \"x\"".into()).contains("another host name")
        );
        assert_eq!(explain("connection refused".into()), "connection refused");
    }
}
