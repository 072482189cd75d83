//! Option haggling over real sockets.

use ssdtwin_nbd::proto::*;
use ssdtwin_nbd::{MemBackend, MemExport, Server};

use crate::common::*;

fn two_exports() -> MemBackend {
    MemBackend::new().with_export(MemExport::new("disk", 1 << 20).with_info(|i| i.description = "the disk".into())).with_export(
        MemExport::new("ro", 1 << 20).read_only(true).block_sizes(4096, 65536, 1 << 20).with_info(|i| i.can_multi_conn = false),
    )
}

#[test]
fn list_then_abort() {
    let (h, _) = serve(two_exports());
    let mut c = Client::tcp(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE);
    c.option(OPT_LIST, &[]);
    let r = c.opt_replies();
    assert_eq!(r.len(), 3, "{r:?}");
    assert_eq!(r[0].typ, REP_SERVER);
    assert_eq!(&r[0].data[..4], &[0, 0, 0, 4]);
    assert_eq!(&r[0].data[4..], b"diskthe disk");
    assert_eq!(&r[1].data[4..6], b"ro");
    assert_eq!(r[2].typ, REP_ACK);
    // LIST must not carry data.
    c.option(OPT_LIST, b"x");
    assert_eq!(c.opt_reply().typ, REP_ERR_INVALID);
    c.option(OPT_ABORT, &[]);
    let a = c.opt_reply();
    assert_eq!((a.option, a.typ), (OPT_ABORT, REP_ACK));
    c.expect_closed();
}

#[test]
fn unknown_options_are_refused_and_parsing_continues() {
    let (h, _) = serve(two_exports());
    let mut c = Client::tcp(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    for (opt, data) in [
        (99u32, &b"some data the server must skip"[..]),
        (OPT_STARTTLS, &[][..]),
        (OPT_EXTENDED_HEADERS, &[][..]),
        (OPT_PEEK_EXPORT, &[][..]),
        (0xdead_beef, &[0u8; 1000][..]),
    ] {
        c.option(opt, data);
        let r = c.opt_reply();
        assert_eq!((r.option, r.typ), (opt, REP_ERR_UNSUP));
    }
    let r = c.negotiate_after_flags("disk");
    assert_eq!(r.size, 1 << 20);
}

impl Client {
    /// GO without sending client flags (already sent).
    fn negotiate_after_flags(&mut self, export: &str) -> &mut Client {
        self.option(OPT_GO, &Client::info_data(export, &[]));
        let r = self.opt_replies();
        assert_eq!(r.last().unwrap().typ, REP_ACK, "{r:?}");
        match decode_info(&r[0].data).unwrap() {
            Info::Export { size, tflags } => {
                self.size = size;
                self.tflags = tflags;
            }
            other => panic!("first info should be EXPORT, got {other:?}"),
        }
        self
    }
}

#[test]
fn unknown_client_flags_drop_the_connection() {
    let (h, _) = serve(two_exports());
    let mut c = Client::tcp(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE | 0x4);
    c.expect_closed();
    // The server carries on.
    let mut c = Client::tcp(&h);
    c.negotiate("disk", false, false);
}

#[test]
fn info_and_go_report_sizes_names_and_flags() {
    let (h, _) = serve(two_exports());
    let mut c = Client::tcp(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    // Repeated and unknown info requests: each known item answered once, unknown ignored.
    c.option(OPT_INFO, &Client::info_data("ro", &[INFO_BLOCK_SIZE, INFO_NAME, 77, INFO_DESCRIPTION, INFO_NAME]));
    let r = c.opt_replies();
    let infos: Vec<Info> = r.iter().filter(|x| x.typ == REP_INFO).map(|x| decode_info(&x.data).unwrap()).collect();
    assert_eq!(infos.len(), 4, "{infos:?}");
    assert!(infos.contains(&Info::BlockSize { min: 4096, preferred: 65536, max: 1 << 20 }));
    assert!(infos.contains(&Info::Name(b"ro")));
    assert!(infos.contains(&Info::Description(b"in-memory export")));
    let want = TFLAG_HAS_FLAGS | TFLAG_READ_ONLY | TFLAG_SEND_FLUSH | TFLAG_SEND_CACHE;
    assert!(infos.contains(&Info::Export { size: 1 << 20, tflags: want }), "{infos:?}");
    assert_eq!(r.last().unwrap().typ, REP_ACK);

    // The empty name is the default export (the first one added).
    c.option(OPT_GO, &Client::info_data("", &[INFO_NAME, INFO_BLOCK_SIZE]));
    let r = c.opt_replies();
    let infos: Vec<Info> = r.iter().filter(|x| x.typ == REP_INFO).map(|x| decode_info(&x.data).unwrap()).collect();
    assert!(infos.contains(&Info::Name(b"disk")));
    assert!(infos.contains(&Info::BlockSize { min: 512, preferred: 4096, max: 32 << 20 }));
    let rw = TFLAG_HAS_FLAGS
        | TFLAG_SEND_FLUSH
        | TFLAG_SEND_FUA
        | TFLAG_SEND_TRIM
        | TFLAG_SEND_WRITE_ZEROES
        | TFLAG_SEND_FAST_ZERO
        | TFLAG_CAN_MULTI_CONN
        | TFLAG_SEND_CACHE;
    assert!(infos.contains(&Info::Export { size: 1 << 20, tflags: rw }), "{infos:?}");
    // In transmission now: a read works.
    assert_eq!(c.read(1, 0, 512).error, 0);
}

#[test]
fn go_errors_keep_the_session_alive() {
    let b = MemBackend::new().with_export(MemExport::new("disk", 1 << 20)).with_default(None);
    let (h, _) = serve(b);
    let mut c = Client::tcp(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE);
    c.option(OPT_GO, &Client::info_data("nope", &[]));
    let r = c.opt_reply();
    assert_eq!(r.typ, REP_ERR_UNKNOWN);
    assert!(String::from_utf8_lossy(&r.data).contains("nope"));
    // No default export configured.
    c.option(OPT_GO, &Client::info_data("", &[]));
    assert_eq!(c.opt_reply().typ, REP_ERR_UNKNOWN);
    // Malformed: name length larger than the data.
    c.option(OPT_GO, &[0, 0, 0, 50, b'a']);
    assert_eq!(c.opt_reply().typ, REP_ERR_INVALID);
    // Malformed: info count says 3, one given.
    c.option(OPT_INFO, &[0, 0, 0, 0, 0, 3, 0, 3]);
    assert_eq!(c.opt_reply().typ, REP_ERR_INVALID);
    c.negotiate_after_flags("disk");
    assert_eq!(c.size, 1 << 20);
}

#[test]
fn export_name_with_and_without_zeroes() {
    let (h, _) = serve(two_exports());
    for no_zeroes in [false, true] {
        let mut c = Client::tcp(&h);
        c.flags(FLAG_C_FIXED_NEWSTYLE | if no_zeroes { FLAG_C_NO_ZEROES } else { 0 });
        c.option(OPT_EXPORT_NAME, b"disk");
        let r = c.read_n(EXPORT_NAME_REPLY_LEN + if no_zeroes { 0 } else { EXPORT_NAME_ZEROES });
        assert_eq!(u64::from_be_bytes(r[..8].try_into().unwrap()), 1 << 20);
        let tflags = u16::from_be_bytes([r[8], r[9]]);
        assert!(tflags & TFLAG_SEND_FLUSH != 0 && tflags & TFLAG_READ_ONLY == 0);
        assert!(r[10..].iter().all(|&z| z == 0));
        // If the zero padding were wrong, this reply would be misparsed.
        c.write(5, 0, &[0xab; 512], 0);
        let rd = c.read(6, 0, 512);
        assert_eq!((rd.cookie, rd.error), (6, 0));
        assert_eq!(rd.data, vec![0xab; 512]);
    }
}

#[test]
fn export_name_unknown_is_a_hard_disconnect() {
    let (h, _) = serve(two_exports());
    let mut c = Client::tcp(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE);
    c.option(OPT_EXPORT_NAME, b"missing");
    c.expect_closed();
    eventually("protocol error counted", || h.stats().protocol_errors == 1);
}

#[test]
fn bad_option_magic_and_huge_option_disconnect() {
    let (h, _) = serve(two_exports());
    let mut c = Client::tcp(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE);
    let mut m = OptionHeader { option: OPT_LIST, len: 0 }.encode();
    m[0] = b'X';
    c.send(&m);
    c.expect_closed();

    let mut c = Client::tcp(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE);
    c.send(&OptionHeader { option: 1234, len: 0xffff_fff0 }.encode());
    c.expect_closed();
}

#[test]
fn meta_contexts() {
    let (h, _) = serve(two_exports());
    let mut c = Client::tcp(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    // SET before structured replies: spec says SHOULD be ERR_INVALID.
    c.option(OPT_SET_META_CONTEXT, &Client::meta_data("disk", &["base:allocation"]));
    assert_eq!(c.opt_reply().typ, REP_ERR_INVALID);
    c.option(OPT_STRUCTURED_REPLY, b"junk");
    assert_eq!(c.opt_reply().typ, REP_ERR_INVALID);
    c.option(OPT_STRUCTURED_REPLY, &[]);
    assert_eq!(c.opt_reply().typ, REP_ACK);
    // LIST with no query lists everything; the `base:` wildcard too; unknown ignored.
    for q in [&[][..], &["base:"][..], &["qemu:dirty-bitmap:x", "base:allocation"][..]] {
        c.option(OPT_LIST_META_CONTEXT, &Client::meta_data("disk", q));
        let r = c.opt_replies();
        assert_eq!(r.len(), 2, "{q:?}: {r:?}");
        assert_eq!(r[0].typ, REP_META_CONTEXT);
        assert_eq!(&r[0].data[4..], b"base:allocation");
    }
    c.option(OPT_LIST_META_CONTEXT, &Client::meta_data("disk", &["x-other:thing"]));
    let r = c.opt_replies();
    assert_eq!(r.len(), 1);
    assert_eq!(r[0].typ, REP_ACK);
    // Unknown export.
    c.option(OPT_SET_META_CONTEXT, &Client::meta_data("nope", &["base:allocation"]));
    assert_eq!(c.opt_reply().typ, REP_ERR_UNKNOWN);
    // Syntax error: query length beyond the data.
    let mut bad = Client::meta_data("disk", &["base:allocation"]);
    bad.truncate(bad.len() - 3);
    c.option(OPT_SET_META_CONTEXT, &bad);
    assert_eq!(c.opt_reply().typ, REP_ERR_INVALID);
    // Select it, then GO on the same export: BLOCK_STATUS works.
    c.option(OPT_SET_META_CONTEXT, &Client::meta_data("disk", &["base:allocation"]));
    let r = c.opt_replies();
    assert_eq!(r[0].typ, REP_META_CONTEXT);
    let id = u32::from_be_bytes(r[0].data[..4].try_into().unwrap());
    c.option(OPT_GO, &Client::info_data("disk", &[]));
    assert_eq!(c.opt_replies().last().unwrap().typ, REP_ACK);
    c.structured = true;
    c.request(CMD_BLOCK_STATUS, 0, 9, 0, 1 << 20, &[]);
    let r = c.reply_nodata();
    assert_eq!((r.cookie, r.error, r.context), (9, 0, Some(id)));
    assert_eq!(r.extents, vec![(1 << 20, STATE_HOLE | STATE_ZERO)]);
}

#[test]
fn meta_context_for_another_export_does_not_carry_over() {
    let (h, _) = serve(two_exports());
    let mut c = Client::tcp(&h);
    c.flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES);
    c.option(OPT_STRUCTURED_REPLY, &[]);
    c.opt_reply();
    c.option(OPT_SET_META_CONTEXT, &Client::meta_data("ro", &["base:allocation"]));
    c.opt_replies();
    c.option(OPT_GO, &Client::info_data("disk", &[]));
    c.opt_replies();
    c.structured = true;
    c.request(CMD_BLOCK_STATUS, 0, 1, 0, 4096, &[]);
    assert_eq!(c.reply_nodata().error, 22);
}

#[test]
fn unix_socket_and_stale_socket_file() {
    let path = temp_path("sock");
    // A stale socket file (no server behind it) is replaced.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    let backend = std::sync::Arc::new(MemBackend::single("", 1 << 20));
    let h = Server::new(backend.clone()).listen_unix(&path).unwrap().start().unwrap();
    assert!(h.uri("").starts_with("nbd+unix:///?socket="));
    // A second server on the same live socket is refused.
    assert!(matches!(Server::new(backend).listen_unix(&path).err(), Some(ssdtwin_nbd::Error::SocketInUse(_))));
    let mut c = Client::unix(&path);
    c.negotiate("", true, false);
    c.write(1, 512, &[7; 512], 0);
    assert_eq!(c.read(2, 512, 512).data, vec![7; 512]);
    drop(c);
    h.shutdown();
    assert!(!path.exists(), "socket file removed at shutdown");
}

#[test]
fn invalid_exports_are_refused_at_start() {
    let b = MemBackend::single("bad", 1 << 20).with_export(MemExport::new("x", 4096).block_sizes(3, 4096, 4096));
    let err = Server::new(std::sync::Arc::new(b)).listen_tcp("127.0.0.1:0").unwrap().start().err();
    assert!(matches!(err, Some(ssdtwin_nbd::Error::InvalidExport { .. })), "{err:?}");
}
