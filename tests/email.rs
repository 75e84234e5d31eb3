//! Email over IMAP through the real binary, against a real Dovecot
//! (Debian `dovecot-imapd`, installed by `scripts/dovecot.sh`) that this
//! test binary starts once in a temporary folder as an unprivileged
//! process: passwd-file users, a Maildir seeded with real-looking mail
//! (multipart, HTML only, an attachment, an image only, an unknown
//! charset, a 50 MB message), and a certificate signed by a CA the test
//! makes with the openssl program and hands over as `[email] ca_file`.
//!
//! Dovecot listens on an unprivileged port, so the client goes through
//! STARTTLS (implicit TLS is port 993 only); the dropped connection is a
//! small proxy in front of the plain-text listener that cuts the reply to
//! a message fetch.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

const PASSWORD: &str = "correct-horse-7";

/// A Dovecot for the whole binary, behind `sh` that kills it when this
/// process's end of the pipe closes (statics are never dropped).
struct Dovecot {
    port: u16,
    /// The IMAPS listener (implicit TLS).
    tls_port: u16,
    ca: PathBuf,
    dir: tempfile::TempDir,
    _guard: Child,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn sh(dir: &Path, script: &str) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a `localhost` certificate it signed.
fn make_certificates(dir: &Path) {
    sh(
        dir,
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=earshot-test-ca 2>/dev/null \
         && openssl req -newkey rsa:2048 -nodes -keyout key.pem -out cert.csr -subj /CN=localhost 2>/dev/null \
         && printf 'subjectAltName=DNS:localhost\\nbasicConstraints=CA:FALSE\\n' > ext.cnf \
         && openssl x509 -req -in cert.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out cert.pem -days 2 -extfile ext.cnf 2>/dev/null",
    );
}

fn mail(from: &str, subject: &str, date: &str, rest: &str) -> String {
    format!(
        "Return-Path: <x@example.org>\r\nFrom: {from}\r\nTo: Alex Morgan <alex@example.org>\r\nSubject: {subject}\r\nDate: {date}\r\nMessage-ID: <{}@example.org>\r\nMIME-Version: 1.0\r\n{rest}",
        subject.len() * 7 + date.len()
    )
}

/// The seeded mailbox, oldest first (Dovecot gives UIDs in file-name
/// order): UID 1 is the 50 MB message.
fn seed(maildir: &Path, big: bool) {
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(maildir.join(sub)).unwrap();
    }
    let mut messages: Vec<(bool, Vec<u8>)> = Vec::new();
    if big {
        let mut raw = mail(
            "Backup Robot <robot@example.net>",
            "Nightly backup log",
            "Mon, 30 Nov 2026 03:00:00 +0000",
            "Content-Type: text/plain; charset=utf-8\r\n\r\nThe backup finished. Full log follows.\r\n",
        )
        .into_bytes();
        let line = b"2026-11-30T03:00:00 copied /home/alex/photos/IMG_0001.jpg ok\r\n";
        while raw.len() < 50 * 1024 * 1024 {
            raw.extend_from_slice(line);
        }
        messages.push((true, raw));
    }
    let today = chrono::Local::now().format("%a, %d %b %Y").to_string();
    messages.extend([
        (true, mail(
            "Sam Lee <sam@example.net>",
            "Train times",
            "Tue, 01 Dec 2026 08:15:00 +0000",
            "Content-Type: text/plain; charset=utf-8\r\n\r\nThe 9:40 is cancelled, take the 10:10.\r\n\r\nSam\r\n",
        ).into_bytes()),
        (true, mail(
            "Bakery Weekly <news@bakery.example>",
            "This week's loaves",
            "Tue, 01 Dec 2026 09:00:00 +0000",
            "Content-Type: text/html; charset=utf-8\r\n\r\n<html><head><style>.x{color:red}</style></head><body><h1>Rye is back</h1><p>Our <b>dark rye</b> returns on Friday &amp; Saturday.</p><img src=\"cid:logo\"></body></html>\r\n",
        ).into_bytes()),
        (false, mail(
            "Ana Ruiz <ana@example.com>",
            "=?UTF-8?Q?Caf=C3=A9_receipt?=",
            "Tue, 01 Dec 2026 12:30:00 +0000",
            "Content-Type: multipart/mixed; boundary=\"mix\"\r\n\r\n--mix\r\nContent-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nHere is the receipt from the caf=E9 for the team lunch.\r\n--mix\r\nContent-Type: application/pdf; name=\"receipt-1201.pdf\"\r\nContent-Disposition: attachment; filename=\"receipt-1201.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQKJcfsj6IKMSAwIG9iago8PD4+CmVuZG9iagp0cmFpbGVyCjw8Pj4KJSVFT0YK\r\n--mix--\r\n",
        ).into_bytes()),
        (false, mail(
            "Dad <dad@example.org>",
            "Photo",
            "Tue, 01 Dec 2026 15:00:00 +0000",
            "Content-Type: image/jpeg; name=\"garden.jpg\"\r\nContent-Disposition: attachment; filename=\"garden.jpg\"\r\nContent-Transfer-Encoding: base64\r\n\r\n/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgHBwcJCQgKDBQNDAsLDBkSEw8U\r\n",
        ).into_bytes()),
        (true, {
            let mut m = mail(
                "Odd Mailer <odd@example.net>",
                "Strange charset",
                "Tue, 01 Dec 2026 16:00:00 +0000",
                "Content-Type: multipart/alternative; boundary=\"never-closed\"\r\n\r\n--never-closed\r\nContent-Type: text/plain; charset=x-klingon-42\r\n\r\nMeeting moved to room ",
            )
            .into_bytes();
            m.extend_from_slice(b"\xe9\xff 4B.\r\n--never-closed\r\nContent-Type: text/html\r\n\r\n<p>unterminated");
            m
        }),
        (false, mail(
            "Priya Shah <priya@example.org>",
            "Saturday's dinner",
            &format!("{today} 07:00:00 +0000"),
            "Content-Type: multipart/alternative; boundary=\"alt\"\r\n\r\n--alt\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nHi Alex,\r\n\r\nDinner on Saturday at 7 pm at our place. Can you bring dessert?\r\n\r\n-- \r\nPriya Shah\r\nProduct Lead, Example Org\r\n--alt\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<div>Hi Alex,<br><br>Dinner on <b>Saturday</b> at 7 pm at our place. Can you bring dessert?</div>\r\n--alt--\r\n",
        ).into_bytes()),
        (false, mail(
            "Priya Shah <priya@example.org>",
            "Re: Saturday's dinner",
            &format!("{today} 08:00:00 +0000"),
            "Content-Type: text/plain; charset=utf-8\r\n\r\nGreat, see you at seven. Tom is coming too.\r\n\r\nOn Tue, 1 Dec 2026 at 18:04, Alex Morgan <alex@example.org>\r\nwrote:\r\n> Sure, I'll bring a tart.\r\n> Alex\r\n\r\nSent from my iPhone\r\n",
        ).into_bytes()),
    ]);
    for (i, (seen, raw)) in messages.into_iter().enumerate() {
        let name = format!("17648{:05}.M{i}P1.earshot-test", i);
        let path = if seen {
            maildir.join("cur").join(format!("{name}:2,S"))
        } else {
            maildir.join("new").join(name)
        };
        std::fs::write(path, raw).unwrap();
    }
}

fn start_dovecot() -> Dovecot {
    let dovecot = ["/usr/sbin/dovecot", "/usr/local/sbin/dovecot"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("Dovecot is not installed: run scripts/dovecot.sh (scripts/test.sh does)");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    make_certificates(root);
    // As root, Dovecot runs as `nobody` (it refuses root for its login
    // processes, and a test server should hold no privileges anyway).
    let as_root = current_uid() == 0;
    let (user, group, uid, gid) = if as_root {
        let uid = id("-u", "nobody");
        let gid = id("-g", "nobody");
        ("nobody".to_string(), group_name(gid), uid, gid)
    } else {
        (id_name("-un"), id_name("-gn"), id("-u", ""), id("-g", ""))
    };
    let mut passwd = String::new();
    for (name, big) in [("alex", true), ("bob", false)] {
        seed(&root.join(format!("mail/{name}/Maildir")), big);
        passwd.push_str(&format!(
            "{name}:{{PLAIN}}{PASSWORD}:{uid}:{gid}::{}::\n",
            root.join(format!("mail/{name}")).display()
        ));
    }
    std::fs::write(root.join("passwd"), passwd).unwrap();
    std::fs::create_dir_all(root.join("run")).unwrap();
    let port = free_port();
    let tls_port = free_port();
    let r = root.display();
    std::fs::write(
        root.join("dovecot.conf"),
        format!(
            "base_dir = {r}/run\nstate_dir = {r}/run/state\nlog_path = {r}/dovecot.log\n\
             instance_name = earshot-test-{port}\nprotocols = imap\nlisten = 127.0.0.1\n\
             ssl = yes\nssl_cert = <{r}/cert.pem\nssl_key = <{r}/key.pem\n\
             disable_plaintext_auth = no\nauth_mechanisms = plain login\n\
             default_internal_user = {user}\ndefault_internal_group = {group}\ndefault_login_user = {user}\n\
             mail_location = maildir:~/Maildir\n\
             passdb {{\n  driver = passwd-file\n  args = {r}/passwd\n}}\n\
             userdb {{\n  driver = passwd-file\n  args = {r}/passwd\n}}\n\
             service imap-login {{\n  chroot =\n  inet_listener imap {{\n    port = {port}\n  }}\n  inet_listener imaps {{\n    port = {tls_port}\n    ssl = yes\n  }}\n}}\n\
             service anvil {{\n  chroot =\n}}\n\
             service stats {{\n  unix_listener stats-writer {{\n    mode = 0666\n  }}\n}}\n"
        ),
    )
    .unwrap();
    if as_root {
        sh(root, &format!("chown -R {uid}:{gid} ."));
        std::fs::set_permissions(root, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    let run = if as_root {
        format!("setpriv --reuid={uid} --regid={gid} --clear-groups {dovecot}")
    } else {
        dovecot.to_string()
    };
    let script = format!("{run} -F -c '{r}/dovecot.conf' & pid=$!; cat >/dev/null; kill $pid");
    let guard = Command::new("sh")
        .arg("-c")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    // Ready when it greets (the listener accepts before the login
    // process is up).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut buf = [0u8; 64];
            if matches!(s.read(&mut buf), Ok(n) if n > 0 && buf.starts_with(b"* OK")) {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "Dovecot did not start on port {port}: {}",
            std::fs::read_to_string(root.join("dovecot.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Dovecot {
        port,
        tls_port,
        ca: root.join("ca.pem"),
        dir,
        _guard: guard,
    }
}

fn current_uid() -> u32 {
    id("-u", "")
}

fn id_name(flag: &str) -> String {
    let out = Command::new("id").arg(flag).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn id(flag: &str, user: &str) -> u32 {
    let mut cmd = Command::new("id");
    cmd.arg(flag);
    if !user.is_empty() {
        cmd.arg(user);
    }
    let out = cmd.output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

fn group_name(gid: u32) -> String {
    let out = Command::new("getent")
        .args(["group", &gid.to_string()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split(':')
        .next()
        .unwrap()
        .to_string()
}

fn dovecot() -> &'static Dovecot {
    static SERVER: OnceLock<Dovecot> = OnceLock::new();
    SERVER.get_or_init(start_dovecot)
}

/// A state dir with an `earshot.toml` whose `[email]` is `extra` plus
/// the defaults for the test server.
fn setup(user: &str, extra: &str) -> (tempfile::TempDir, PathBuf) {
    let d = dovecot();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("earshot.toml");
    let mut section = format!("[email]\nusername = \"{user}\"\n");
    if !extra.contains("imap_host") {
        section.push_str("imap_host = \"localhost\"\n");
    }
    if !extra.contains("imap_port") {
        section.push_str(&format!("imap_port = {}\n", d.port));
    }
    if !extra.contains("ca_file") {
        section.push_str(&format!("ca_file = \"{}\"\n", d.ca.display()));
    }
    section.push_str("timeout_ms = 20000\n");
    section.push_str(extra);
    std::fs::write(&config, section).unwrap();
    (dir, config)
}

fn tool(dir: &Path, config: &Path, password: &str, name: &str, args: &str) -> Output {
    common::run(
        common::earshot(dir)
            .env("EMAIL_PASSWORD", password)
            .arg("--config")
            .arg(config)
            .args(["tool", name, args]),
    )
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "stdout: {}\nstderr: {}",
        common::stdout(o),
        common::stderr(o)
    );
    common::stdout(o)
}

#[test]
fn listing_and_reading_real_mail_never_marks_it_seen() {
    let (dir, config) = setup("alex", "");
    let (d, c) = (dir.path(), config.as_path());

    let list = ok(&tool(d, c, PASSWORD, "list_emails", "{}"));
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), 5, "{list}");
    assert!(
        lines[0].contains("unread")
            && lines[0].contains("Priya Shah <priya@example.org>")
            && lines[0].contains("Re: Saturday's dinner"),
        "{list}"
    );
    assert!(
        list.contains("Café receipt"),
        "encoded-word subject decoded: {list}"
    );

    let unread = ok(&tool(
        d,
        c,
        PASSWORD,
        "list_emails",
        r#"{"unread": true, "limit": 20}"#,
    ));
    assert_eq!(unread.lines().count(), 4, "{unread}");
    let from = ok(&tool(
        d,
        c,
        PASSWORD,
        "list_emails",
        r#"{"from": "priya", "since": "2026-01-01"}"#,
    ));
    assert_eq!(from.lines().count(), 2, "{from}");
    let subject = ok(&tool(
        d,
        c,
        PASSWORD,
        "list_emails",
        r#"{"subject": "café"}"#,
    ));
    assert!(
        subject.contains("Ana Ruiz") && subject.lines().count() == 1,
        "non-ASCII filter: {subject}"
    );

    // The newest: the quoted reply and the signature are gone.
    let newest = ok(&tool(d, c, PASSWORD, "read_email", "{}"));
    assert!(
        newest.contains("Great, see you at seven. Tom is coming too."),
        "{newest}"
    );
    assert!(
        !newest.contains("tart") && !newest.contains("iPhone") && !newest.contains("wrote"),
        "{newest}"
    );

    // multipart/alternative: the text part, the signature trimmed.
    let dinner = ok(&tool(
        d,
        c,
        PASSWORD,
        "read_email",
        r#"{"subject": "Saturday's dinner", "from": "Priya", "unread": true}"#,
    ));
    assert!(
        dinner.contains("Re: Saturday"),
        "newest match wins: {dinner}"
    );

    // HTML only: text with no tags, no style sheet.
    let news = ok(&tool(d, c, PASSWORD, "read_email", r#"{"from": "bakery"}"#));
    assert!(
        news.contains("Rye is back") && news.contains("dark rye returns on Friday & Saturday"),
        "{news}"
    );
    let body = news.split_once("\n\n").unwrap().1;
    assert!(
        !body.contains('<') && !body.contains('>') && !body.contains("color"),
        "{news}"
    );

    // An attachment is named, not read; Latin-1 quoted-printable decoded.
    let receipt = ok(&tool(
        d,
        c,
        PASSWORD,
        "read_email",
        r#"{"from": "ana@example.com"}"#,
    ));
    assert!(
        receipt.contains("receipt from the café for the team lunch"),
        "{receipt}"
    );
    assert!(
        receipt.contains("Attachments (not read): receipt-1201.pdf") && !receipt.contains("JVBER"),
        "{receipt}"
    );

    // Only an image.
    let photo = ok(&tool(d, c, PASSWORD, "read_email", r#"{"from": "dad"}"#));
    assert!(
        photo.contains("garden.jpg") && photo.contains("(no text)"),
        "{photo}"
    );

    // An unknown charset and a multipart that never closes.
    let odd = ok(&tool(d, c, PASSWORD, "read_email", r#"{"from": "odd"}"#));
    assert!(
        odd.contains("Meeting moved to room") && odd.contains("4B"),
        "{odd}"
    );

    // Reading used BODY.PEEK: still four unread.
    let unread = ok(&tool(
        d,
        c,
        PASSWORD,
        "list_emails",
        r#"{"unread": true, "limit": 20}"#,
    ));
    assert_eq!(
        unread.lines().count(),
        4,
        "reading marked mail seen: {unread}"
    );
    // read_only (the default) does not offer mark_read.
    let o = tool(d, c, PASSWORD, "mark_read", r#"{"id": 2}"#);
    assert!(
        !o.status.success() && common::stdout(&o).contains("read_only"),
        "{o:?}"
    );
    assert!(common::stdout(&o).lines().count() == 1);
}

#[test]
fn a_fifty_megabyte_email_is_read_from_its_start_only() {
    let (dir, config) = setup("alex", "");
    let start = Instant::now();
    let o = ok(&tool(
        dir.path(),
        &config,
        PASSWORD,
        "read_email",
        r#"{"id": 1}"#,
    ));
    assert!(o.contains("The backup finished."), "{o}");
    assert!(
        o.contains("(The rest of this long email was not read.)"),
        "{o}"
    );
    assert!(
        o.chars().count() < 2500,
        "capped: {} chars",
        o.chars().count()
    );
    // Bounded: far less than reading 50 MB would take over TLS in a debug build.
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "{:?}",
        start.elapsed()
    );
}

#[test]
fn mark_read_needs_read_only_off_and_then_works() {
    let (dir, config) = setup("bob", "read_only = false\n");
    let (d, c) = (dir.path(), config.as_path());
    let before = ok(&tool(
        d,
        c,
        PASSWORD,
        "list_emails",
        r#"{"unread": true, "from": "dad"}"#,
    ));
    let id: String = before.split_whitespace().nth(1).unwrap().to_string();
    let said = ok(&tool(
        d,
        c,
        PASSWORD,
        "mark_read",
        &format!("{{\"id\": {id}}}"),
    ));
    assert_eq!(said.trim(), format!("Email {id} is marked read."));
    let after = ok(&tool(d, c, PASSWORD, "list_emails", r#"{"from": "dad"}"#));
    assert!(after.contains(" · read · "), "{after}");
    let o = tool(d, c, PASSWORD, "mark_read", r#"{"id": 999}"#);
    assert!(
        !o.status.success() && common::stdout(&o).contains("no email with id 999"),
        "{o:?}"
    );
}

#[test]
fn a_wrong_password_is_one_line_naming_what_to_fix() {
    let (dir, config) = setup("alex", "");
    let o = tool(
        dir.path(),
        &config,
        "wrong-pass-planted",
        "list_emails",
        "{}",
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let out = format!("{}{}", common::stdout(&o), common::stderr(&o));
    assert_eq!(common::stdout(&o).trim().lines().count(), 1, "{out}");
    assert!(
        out.contains("EMAIL_PASSWORD") && out.contains("[email] username"),
        "{out}"
    );
    assert!(!out.contains("wrong-pass-planted"), "{out}");
    // config show masks nothing it does not have: the password is not a key.
    let shown = common::run(
        common::earshot(dir.path())
            .env("EMAIL_PASSWORD", "wrong-pass-planted")
            .arg("--config")
            .arg(&config)
            .args(["config", "show"]),
    );
    let shown = common::stdout(&shown);
    assert!(
        shown.contains("email.imap_host") && !shown.contains("wrong-pass-planted"),
        "{shown}"
    );
}

#[test]
fn a_certificate_that_does_not_match_is_refused() {
    // The certificate names `localhost`; asking for 127.0.0.1 must fail.
    let (dir, config) = setup("alex", "imap_host = \"127.0.0.1\"\n");
    let o = tool(dir.path(), &config, PASSWORD, "list_emails", "{}");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let out = common::stdout(&o);
    assert!(out.contains("certificate was not accepted"), "{out}");
    // And an unknown CA (no ca_file) is refused too.
    let (dir, config) = setup("alex", "ca_file = \"\"\n");
    let o = tool(dir.path(), &config, PASSWORD, "list_emails", "{}");
    assert!(
        common::stdout(&o).contains("certificate was not accepted"),
        "{o:?}"
    );
    // Plain text is never used unless allowed: the STARTTLS path was taken.
    assert!(!common::stdout(&o).contains("Priya"));
}

#[test]
fn implicit_tls_reads_the_same_mail_and_checks_the_certificate() {
    // Dovecot's IMAPS listener: TLS from the first byte, as on port 993.
    let port = dovecot().tls_port;
    let (dir, config) = setup(
        "alex",
        &format!("imap_port = {port}\nimplicit_tls = true\n"),
    );
    let list = ok(&tool(dir.path(), &config, PASSWORD, "list_emails", "{}"));
    assert!(list.contains("Re: Saturday's dinner"), "{list}");
    // Without implicit_tls the client would send STARTTLS to a TLS port:
    // refused in one sentence, never a hang or plain text.
    let (dir, config) = setup("alex", &format!("imap_port = {port}\n"));
    let o = tool(dir.path(), &config, PASSWORD, "list_emails", "{}");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(!common::stdout(&o).contains("Priya"), "{o:?}");
    // The certificate is checked on this path too.
    let (dir, config) = setup(
        "alex",
        &format!("imap_port = {port}\nimplicit_tls = true\nimap_host = \"127.0.0.1\"\n"),
    );
    let o = tool(dir.path(), &config, PASSWORD, "list_emails", "{}");
    assert!(
        common::stdout(&o).contains("certificate was not accepted"),
        "{o:?}"
    );
}

/// A proxy in front of the plain-text listener that cuts the connection
/// once a whole-message fetch has been asked for and a little of its
/// reply has passed.
fn cutting_proxy(target: u16) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let server = TcpStream::connect(("127.0.0.1", target)).unwrap();
            let asked = Arc::new(AtomicBool::new(false));
            let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let flag = asked.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = c_in.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if String::from_utf8_lossy(&buf[..n]).contains("BODY.PEEK[]<") {
                        flag.store(true, Ordering::SeqCst);
                    }
                    if s_out.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
            let (mut s_in, mut c_out) = (server, client);
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut after = 0;
                while let Ok(n) = s_in.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let n = if asked.load(Ordering::SeqCst) {
                        let keep = n.min(60 - after.min(60));
                        after += keep;
                        keep
                    } else {
                        n
                    };
                    let _ = c_out.write_all(&buf[..n]);
                    if asked.load(Ordering::SeqCst) && after >= 60 {
                        let _ = c_out.shutdown(Shutdown::Both);
                        let _ = s_in.shutdown(Shutdown::Both);
                        break;
                    }
                }
            });
        }
    });
    port
}

#[test]
fn a_connection_dropped_mid_fetch_is_one_sentence() {
    let proxy = cutting_proxy(dovecot().port);
    let (dir, config) = setup(
        "alex",
        &format!("imap_port = {proxy}\nallow_plaintext = true\n"),
    );
    let listed = ok(&tool(
        dir.path(),
        &config,
        PASSWORD,
        "list_emails",
        r#"{"limit": 1}"#,
    ));
    assert!(listed.contains("Priya"), "plain text allowed: {listed}");
    let o = tool(dir.path(), &config, PASSWORD, "read_email", "{}");
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert_eq!(
        common::stdout(&o).trim(),
        "The mail server closed the connection while reading mail; try again in a moment."
    );
    let _ = &dovecot().dir;
}

/// `earshot chat TEXT --json` with `[email]` set up; the spoken answer.
fn chat(dir: &Path, config: &Path, text: &str, env: &[(&str, String)]) -> String {
    let mut cmd = common::earshot(dir);
    cmd.env("EMAIL_PASSWORD", PASSWORD)
        .arg("--config")
        .arg(config)
        .args(["chat", text, "--json"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = common::run(&mut cmd);
    assert!(out.status.success(), "{text}: {}", common::stderr(&out));
    common::stdout(&out)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"] == "content")
        .map(|e| e["data"].as_str().unwrap_or("").to_string())
        .collect()
}

/// With no language model at all, the intent tree answers the common mail
/// sentences itself, through the same mailbox as the tools.
#[test]
fn spoken_mail_questions_are_answered_by_the_tree_with_no_model() {
    let (dir, config) = setup("alex", "");
    let (d, c) = (dir.path(), config.as_path());
    assert_eq!(
        chat(d, c, "Do I have any new emails?", &[]),
        "You have 4 unread emails; the newest is from Priya Shah about Saturday's dinner."
    );
    assert_eq!(
        chat(d, c, "read my newest email", &[]),
        "From Priya Shah about Saturday's dinner. It says: Great, see you at seven. Tom is coming too."
    );
    assert_eq!(
        chat(d, c, "any emails from Priya today?", &[]),
        "You have 2 emails from Priya; the newest is about Saturday's dinner."
    );
    let said = chat(d, c, "read the email from dad", &[]);
    assert_eq!(
        said,
        "From Dad about Photo. It has no text, only an attachment."
    );
    // Still unread: reading by voice never marks mail seen.
    assert!(chat(d, c, "check my inbox", &[]).starts_with("You have 4 unread emails"));
}

/// A chat-completions reply for the scripted agent.
fn completion(content: Option<&str>, calls: &[(&str, &str, &str)]) -> common::http::Reply {
    let mut message = serde_json::json!({"role": "assistant", "content": content});
    if !calls.is_empty() {
        message["tool_calls"] = calls
            .iter()
            .map(|(id, name, args)| serde_json::json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}}))
            .collect();
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    common::http::Reply::json(
        200,
        &serde_json::json!({
            "id": "chatcmpl-test", "object": "chat.completion", "created": 1_764_000_000,
            "model": "agent-test",
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        })
        .to_string(),
    )
}

/// With a model that can call tools, a mail sentence goes past the tree's
/// mail action to the agent (keyword precheck), which reads with the tools.
#[test]
fn with_a_tool_model_the_agent_answers_mail_with_the_tools() {
    use std::sync::atomic::AtomicUsize;
    let (dir, config) = setup("alex", "");
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let llm = common::http::TestServer::start(move |req| {
        let body = req.json();
        if body.get("tools").is_none() {
            return completion(Some("simple"), &[]);
        }
        let offered: Vec<String> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect();
        assert!(offered.contains(&"read_email".to_string()), "{offered:?}");
        match seen.fetch_add(1, Ordering::SeqCst) {
            0 => completion(None, &[("call_1", "read_email", "{}")]),
            _ => {
                let tool = body["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .rev()
                    .find(|m| m["role"] == "tool")
                    .unwrap()["content"]
                    .as_str()
                    .unwrap()
                    .to_string();
                assert!(tool.contains("Tom is coming too"), "{tool}");
                completion(
                    Some("Priya says see you at seven, and Tom is coming too."),
                    &[],
                )
            }
        }
    });
    let said = chat(
        dir.path(),
        &config,
        "read my newest email",
        &[
            ("LLM_BASE_URL", format!("{}/openai/v1", llm.url())),
            ("GROQ_API_KEY", "gsk_test".into()),
            ("GROQ_AGENT_MODEL", "agent-test".into()),
        ],
    );
    assert_eq!(said, "Priya says see you at seven, and Tom is coming too.");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

/// `earshot doctor --json`: the email line.
fn doctor_email(dir: &Path, config: &Path, password: &str) -> serde_json::Value {
    let out = common::run(
        common::earshot(dir)
            .env("EMAIL_PASSWORD", password)
            // No model files to hash: only the email line is looked at.
            .env("EARSHOT_MODELS_DIR", dir.join("no-models"))
            .arg("--config")
            .arg(config)
            .args(["doctor", "--json"]),
    );
    let text = common::stdout(&out);
    assert!(!text.contains(password), "the password leaked: {text}");
    let report: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "email")
        .cloned()
        .unwrap_or_else(|| panic!("no email check in {report}"))
}

#[test]
fn doctor_logs_in_and_opens_the_mailbox_or_says_the_fix() {
    let (dir, config) = setup("alex", "");
    let ok = doctor_email(dir.path(), &config, PASSWORD);
    assert_eq!(ok["status"], "ok", "{ok}");
    assert!(
        ok["detail"]
            .as_str()
            .unwrap()
            .contains("logged in, 8 message(s), 4 unread"),
        "{ok}"
    );
    let bad = doctor_email(dir.path(), &config, "wrong-pass-planted");
    assert_eq!(bad["status"], "fail", "{bad}");
    assert!(
        bad["fix"].as_str().unwrap().contains("EMAIL_PASSWORD"),
        "{bad}"
    );
    let (dir, config) = setup("alex", "mailbox = \"Archive\"\n");
    let missing = doctor_email(dir.path(), &config, PASSWORD);
    assert_eq!(missing["status"], "fail", "{missing}");
    assert!(
        missing["fix"].as_str().unwrap().contains("[email] mailbox"),
        "{missing}"
    );
}
