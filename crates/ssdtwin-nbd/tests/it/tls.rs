//! NBD_OPT_STARTTLS: modes off/on/require, client certificates, the STARTTLS
//! injection guard, and libnbd's own clients (nbdinfo, nbdcopy) over `nbds://`.
//! Certificates are made at test time with rcgen.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use ssdtwin_nbd::proto::*;
use ssdtwin_nbd::{MemBackend, Server, ServerConfig, ServerHandle, TlsMode};

use crate::common::*;

const MIB: usize = 1 << 20;

/// A CA, a server certificate for localhost/127.0.0.1 and a client certificate, laid
/// out as nbdkit (server) and libnbd (client) expect them.
pub struct Certs {
    pub _tmp: tempfile::TempDir,
    pub server: PathBuf,
    pub client: PathBuf,
    /// A client directory with only the CA (no client certificate).
    pub client_anon: PathBuf,
}

pub fn make_certs() -> Certs {
    let tmp = tempfile::tempdir().unwrap();
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "ssdtwin test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let leaf = |names: Vec<String>, usage: ExtendedKeyUsagePurpose, cn: &str| {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(names).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![usage];
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        (p.signed_by(&key, &issuer).unwrap().pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf(vec!["localhost".into(), "127.0.0.1".into()], ExtendedKeyUsagePurpose::ServerAuth, "localhost");
    let (client_cert, client_key) = leaf(vec![], ExtendedKeyUsagePurpose::ClientAuth, "client");
    let dir = |name: &str, files: &[(&str, &str)]| {
        let d = tmp.path().join(name);
        std::fs::create_dir(&d).unwrap();
        for (f, content) in files {
            std::fs::write(d.join(f), content).unwrap();
        }
        d
    };
    let ca_pem = ca_cert.pem();
    Certs {
        server: dir("server", &[("ca-cert.pem", &ca_pem), ("server-cert.pem", &server_cert), ("server-key.pem", &server_key)]),
        client: dir("client", &[("ca-cert.pem", &ca_pem), ("client-cert.pem", &client_cert), ("client-key.pem", &client_key)]),
        client_anon: dir("anon", &[("ca-cert.pem", &ca_pem)]),
        _tmp: tmp,
    }
}

fn serve_tls(mode: TlsMode, certs: &Path, verify_peer: bool) -> ServerHandle {
    Server::new(Arc::new(MemBackend::single("d", 16 << 20)))
        .with_config(ServerConfig {
            tls: mode,
            tls_certificates: Some(certs.to_path_buf()),
            tls_verify_peer: verify_peer,
            ..Default::default()
        })
        .listen_tcp("127.0.0.1:0")
        .unwrap()
        .start()
        .unwrap()
}

fn client_config(dir: &Path, with_cert: bool) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(dir.join("ca-cert.pem")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let b = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    Arc::new(if with_cert {
        let chain: Vec<_> = CertificateDer::pem_file_iter(dir.join("client-cert.pem")).unwrap().map(|c| c.unwrap()).collect();
        let key = PrivateKeyDer::from_pem_file(dir.join("client-key.pem")).unwrap();
        b.with_client_auth_cert(chain, key).unwrap()
    } else {
        b.with_no_client_auth()
    })
}

/// A raw client whose stream can be upgraded after STARTTLS.
fn plain(h: &ServerHandle) -> (Client, TcpStream) {
    let s = TcpStream::connect(h.tcp_addrs()[0]).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let keep = s.try_clone().unwrap();
    (Client::from_stream(Box::new(s)), keep)
}

/// Send STARTTLS, expect ACK, and continue the session over TLS.
fn start_tls(c: &mut Client, sock: &TcpStream, cfg: Arc<rustls::ClientConfig>) {
    c.option(OPT_STARTTLS, &[]);
    let r = c.opt_reply();
    assert_eq!((r.option, r.typ), (OPT_STARTTLS, REP_ACK), "{r:?}");
    let conn = rustls::ClientConnection::new(cfg, ServerName::try_from("localhost").unwrap()).unwrap();
    c.s = Box::new(rustls::StreamOwned::new(conn, sock.try_clone().unwrap()));
    // Whatever was negotiated before TLS is void.
    c.structured = false;
}

#[test]
fn required_tls_refuses_plain_options_and_serves_over_tls() {
    let certs = make_certs();
    let h = serve_tls(TlsMode::Require, &certs.server, false);
    let (mut c, sock) = plain(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    for opt in [OPT_STRUCTURED_REPLY, OPT_LIST, OPT_GO] {
        let data = if opt == OPT_GO { Client::info_data("d", &[]) } else { vec![] };
        c.option(opt, &data);
        let r = c.opt_reply();
        assert_eq!((r.option, r.typ), (opt, REP_ERR_TLS_REQD), "{r:?}");
        assert!(String::from_utf8_lossy(&r.data).contains("requires TLS"));
    }
    start_tls(&mut c, &sock, client_config(&certs.client_anon, false));
    // The client flags were sent already: finish the negotiation over TLS.
    c.option(OPT_STRUCTURED_REPLY, &[]);
    assert_eq!(c.opt_reply().typ, REP_ACK);
    c.structured = true;
    c.option(OPT_GO, &Client::info_data("d", &[INFO_BLOCK_SIZE]));
    assert_eq!(c.opt_replies().last().unwrap().typ, REP_ACK);
    let data = pattern(11, 4 * MIB);
    assert_eq!(c.write(1, 0, &data, 0).error, 0);
    let r = c.read(2, 0, 4 * MIB as u32);
    assert!(r.error == 0 && r.data == data);
    // Many small requests pipelined through one TLS session.
    for i in 0..200u64 {
        c.request(CMD_READ, 0, 100 + i, i * 4096, 4096, &[]);
    }
    for _ in 0..200 {
        let r = c.reply(|_| 4096);
        let off = (r.cookie - 100) as usize * 4096;
        assert!(r.error == 0 && r.data == data[off..off + 4096]);
    }
    let s = h.stats();
    assert_eq!((s.tls_sessions, s.tls_failures), (1, 0));
}

#[test]
fn export_name_before_required_tls_ends_the_session() {
    let certs = make_certs();
    let h = serve_tls(TlsMode::Require, &certs.server, false);
    let (mut c, _) = plain(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE);
    c.option(OPT_EXPORT_NAME, b"d");
    c.expect_closed();
}

#[test]
fn optional_tls_serves_both_and_forgets_plain_negotiation() {
    let certs = make_certs();
    let h = serve_tls(TlsMode::On, &certs.server, false);
    let mut p = Client::tcp(&h);
    p.negotiate("d", true, false);
    assert_eq!(p.read(1, 0, 512).error, 0);

    let (mut c, sock) = plain(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    c.option(OPT_STRUCTURED_REPLY, &[]);
    assert_eq!(c.opt_reply().typ, REP_ACK);
    start_tls(&mut c, &sock, client_config(&certs.client_anon, false));
    c.option(OPT_STARTTLS, &[]);
    assert_eq!(c.opt_reply().typ, REP_ERR_INVALID, "STARTTLS twice");
    c.option(OPT_GO, &Client::info_data("d", &[]));
    assert_eq!(c.opt_replies().last().unwrap().typ, REP_ACK);
    // Structured replies were negotiated in plain text only: READs get simple replies.
    let r = c.read(2, 0, 512);
    assert!(r.error == 0 && !r.structured, "{r:?}");
}

#[test]
fn client_certificates_are_required_with_verify_peer() {
    let certs = make_certs();
    let h = serve_tls(TlsMode::Require, &certs.server, true);
    let (mut c, sock) = plain(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    start_tls(&mut c, &sock, client_config(&certs.client_anon, false));
    c.option(OPT_GO, &Client::info_data("d", &[]));
    let mut b = [0u8; 1];
    // TLS 1.3 clients learn of the rejection on their first read.
    assert!(std::io::Read::read(&mut c.s, &mut b).map(|n| n == 0).unwrap_or(true));
    eventually("the failure is counted", || h.stats().tls_failures == 1);

    let (mut c, sock) = plain(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    start_tls(&mut c, &sock, client_config(&certs.client, true));
    c.option(OPT_GO, &Client::info_data("d", &[]));
    assert_eq!(c.opt_replies().last().unwrap().typ, REP_ACK);
    assert_eq!(c.read(1, 0, 512).error, 0);
    assert_eq!(h.stats().tls_sessions, 1);
}

#[test]
fn plaintext_after_starttls_is_not_accepted() {
    let certs = make_certs();
    let h = serve_tls(TlsMode::On, &certs.server, false);
    let mut c = Client::tcp(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    // STARTTLS and, in the same write, a plaintext option a man in the middle could
    // have injected: the server must not process it (as if it came through TLS).
    let mut m = OptionHeader { option: OPT_STARTTLS, len: 0 }.encode().to_vec();
    m.extend_from_slice(&OptionHeader { option: OPT_STRUCTURED_REPLY, len: 0 }.encode());
    c.send(&m);
    assert_eq!(c.opt_reply().typ, REP_ACK);
    c.expect_closed();
    eventually("the violation is counted", || h.stats().protocol_errors == 1);
}

#[test]
fn tls_off_answers_starttls_with_unsup() {
    let (h, _) = serve(MemBackend::single("d", MIB as u64));
    let mut c = Client::tcp(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE);
    c.option(OPT_STARTTLS, &[]);
    assert_eq!(c.opt_reply().typ, REP_ERR_UNSUP);
}

#[test]
fn bad_certificate_directories_are_clear_errors() {
    let certs = make_certs();
    let start = |dir: &Path, mode: TlsMode, verify: bool| {
        Server::new(Arc::new(MemBackend::single("d", MIB as u64)))
            .with_config(ServerConfig {
                tls: mode,
                tls_certificates: Some(dir.to_path_buf()),
                tls_verify_peer: verify,
                ..Default::default()
            })
            .listen_tcp("127.0.0.1:0")
            .unwrap()
            .start()
            .err()
            .map(|e| e.to_string())
    };
    let e = start(&certs.client, TlsMode::Require, false).expect("no server certificate");
    assert!(e.contains("server-cert.pem is missing"), "{e}");
    std::fs::remove_file(certs.server.join("ca-cert.pem")).unwrap();
    assert!(start(&certs.server, TlsMode::On, false).is_none(), "no CA needed");
    let e = start(&certs.server, TlsMode::On, true).expect("verify_peer needs the CA");
    assert!(e.contains("ca-cert.pem is missing"), "{e}");
    std::fs::write(certs.server.join("server-key.pem"), "not a key").unwrap();
    let e = start(&certs.server, TlsMode::On, false).expect("bad key");
    assert!(e.contains("server-key.pem"), "{e}");
    let e = Server::new(Arc::new(MemBackend::single("d", MIB as u64)))
        .with_config(ServerConfig { tls: TlsMode::Require, ..Default::default() })
        .listen_tcp("127.0.0.1:0")
        .unwrap()
        .start()
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("needs a certificate directory"), "{e}");
}

fn run(cmd: &mut Command) -> (bool, String, String) {
    let o = cmd.output().expect("run");
    (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn libnbd_clients_over_tls() {
    let (Some(nbdinfo), Some(nbdcopy)) = (tool("nbdinfo"), tool("nbdcopy")) else {
        return;
    };
    let certs = make_certs();
    let h = serve_tls(TlsMode::Require, &certs.server, false);
    let port = h.tcp_addrs()[0].port();
    let uri = |dir: &Path| format!("nbds://localhost:{port}/d?tls-certificates={}", dir.display());
    let (ok, out, err) = run(Command::new(&nbdinfo).args(["--json", &uri(&certs.client_anon)]));
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["exports"][0]["export-size"], 16 << 20);
    assert!(v["protocol"].as_str().unwrap_or("").contains("TLS") || out.contains("\"TLS\": true"), "{out}");

    // Data written over TLS reads back.
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("in.raw");
    let back = tmp.path().join("out.raw");
    std::fs::write(&src, pattern(5, 16 << 20)).unwrap();
    let (ok, _, err) = run(Command::new(&nbdcopy).arg("--flush").arg(&src).arg(uri(&certs.client_anon)));
    assert!(ok, "nbdcopy to the server: {err}");
    let (ok, _, err) = run(Command::new(&nbdcopy).arg(uri(&certs.client_anon)).arg(&back));
    assert!(ok, "nbdcopy from the server: {err}");
    assert!(std::fs::read(&src).unwrap() == std::fs::read(&back).unwrap());

    // A plain client is refused, and told it is about TLS.
    let (ok, _, err) = run(Command::new(&nbdinfo).args(["--size", &format!("nbd://localhost:{port}/d")]));
    assert!(!ok);
    assert!(err.contains("requires TLS"), "{err}");
    assert!(h.stats().tls_sessions >= 3);

    // With --tls-verify-peer, libnbd's client certificate is checked.
    let h = serve_tls(TlsMode::Require, &certs.server, true);
    let port = h.tcp_addrs()[0].port();
    let uri = |dir: &Path| format!("nbds://localhost:{port}/d?tls-certificates={}", dir.display());
    let (ok, _, err) = run(Command::new(&nbdinfo).args(["--size", &uri(&certs.client)]));
    assert!(ok, "{err}");
    let (ok, _, _) = run(Command::new(&nbdinfo).args(["--size", &uri(&certs.client_anon)]));
    assert!(!ok, "no client certificate must be refused");
}
