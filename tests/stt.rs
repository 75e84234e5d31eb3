//! The listening half end to end: WAV reading, VAD endpointing on real
//! speech, whisper.cpp (model loaded once for the binary), the fast path's
//! bad-input behaviour, the Groq fallback over a loopback socket, and cpal
//! capture through ALSA's file plugin in a child process.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::http::{Reply, TestServer};
use earshot::audio::{self, vad, SAMPLE_RATE};
use earshot::cancel::CancelToken;
use earshot::stt::{
    groq::GroqStt, text, whisper::WhisperStt, Stt, SttConfig, SttError, Transcriber,
};

fn speech(name: &str) -> PathBuf {
    common::data("speech").join(name)
}

fn reference(name: &str) -> String {
    let tsv = std::fs::read_to_string(speech("transcripts.tsv")).unwrap();
    tsv.lines()
        .find_map(|l| {
            l.split_once('\t')
                .filter(|(n, _)| *n == name)
                .map(|(_, r)| r.to_string())
        })
        .unwrap()
}

fn clip_i16(name: &str) -> Vec<i16> {
    let (s, _) = audio::wav::read_16k_mono(&speech(name), None).unwrap();
    audio::to_i16(&s)
}

/// The whisper engine, loaded once per test binary.
fn whisper() -> Arc<WhisperStt> {
    static W: OnceLock<Arc<WhisperStt>> = OnceLock::new();
    W.get_or_init(|| {
        let model = common::models_dir().join("ggml-tiny.en.bin");
        let w = Arc::new(
            WhisperStt::load(&model, &SttConfig::default()).expect("load ggml-tiny.en.bin"),
        );
        w.warm_up().unwrap();
        w
    })
    .clone()
}

fn stt() -> Stt {
    Stt::with_engines(
        vec![whisper() as Arc<dyn Transcriber>],
        SttConfig::default().min_voiced_ms,
    )
}

/// Deterministic white noise (xorshift), amplitude `amp`.
fn noise(n: usize, amp: f32, seed: u32) -> Vec<i16> {
    let mut x = seed.max(1);
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            ((x as f32 / u32::MAX as f32 * 2.0 - 1.0) * amp) as i16
        })
        .collect()
}

#[test]
fn jfk_word_for_word_and_every_clip_within_10_percent() {
    let stt = stt();
    for name in [
        "jfk.wav",
        "goforward.wav",
        "sense_and_sensibility_01_austen_64kb-0870.wav",
        "sense_and_sensibility_01_austen_64kb-0880.wav",
    ] {
        let (samples, _) = audio::wav::read_16k_mono(&speech(name), None).unwrap();
        let mut drafts: Vec<String> = Vec::new();
        let t = stt
            .transcribe_drafting(
                &samples,
                &mut |d| {
                    drafts.push(d.to_string());
                    false
                },
                &CancelToken::new(),
            )
            .unwrap();
        let wer = text::wer(&reference(name), &t.text);
        match name {
            // 11 s: past the greedy trial (greedy_try_max_ms), so no draft.
            "jfk.wav" => assert!(drafts.is_empty(), "{drafts:?}"),
            // Its greedy trial is unsure (avg log-probability about
            // −0.29): the trial's words are given before the beams'.
            "sense_and_sensibility_01_austen_64kb-0880.wav" => {
                assert_eq!(drafts.len(), 1, "{drafts:?}");
                assert!(text::wer(&reference(name), &drafts[0]) <= 0.3, "{drafts:?}");
                // Confirmed by the caller, the draft is the transcript: no
                // beam pass after it.
                let kept = stt
                    .transcribe_drafting(&samples, &mut |_| true, &CancelToken::new())
                    .unwrap();
                assert_eq!(kept.text.trim(), drafts[0].trim());
                assert!(kept.timings.fast_ms < t.timings.fast_ms, "{kept:?}");
                // Cancelled at the draft (the voice loop's look, once
                // speech went on), the beams do not decode it.
                let cancel = CancelToken::new();
                let dropped = stt.transcribe_drafting(
                    &samples,
                    &mut |_| {
                        cancel.cancel();
                        false
                    },
                    &cancel,
                );
                assert!(matches!(dropped, Err(SttError::Cancelled)), "{dropped:?}");
            }
            _ => {}
        }
        eprintln!("{name}: {wer:.3} via {} ({}): {}", t.path, t.reason, t.text);
        if name == "jfk.wav" {
            assert_eq!(
                text::normalise(&t.text),
                text::normalise(&reference(name)),
                "{}",
                t.text
            );
        }
        assert!(wer <= 0.10, "{name}: WER {wer:.3}: {}", t.text);
        assert_eq!(t.engine, "whisper");
        assert!(t.timings.stt_ms > 0);
        // Issue 9.4: no slow path on these clips (0880 used to need the
        // full context after a wrong fast pass).
        assert_eq!(t.path, "fast", "{name}: {}", t.reason);
    }
}

#[test]
fn a_cancelled_transcription_stops_without_decoding() {
    // The voice loop drops its look at a pause once speech goes on: the
    // words are not wanted, and whisper must not hold the cores.
    let w = whisper();
    let (jfk, _) = audio::wav::read_16k_mono(&speech("jfk.wav"), None).unwrap();
    let started = Instant::now();
    let whole = w.transcribe(&jfk).unwrap();
    let whole_took = started.elapsed();
    assert!(!whole.text.is_empty());
    // Another pass holds the engine (as the suite's other tests may): a
    // cancelled one neither waits for it nor runs.
    let busy = {
        let (w, jfk) = (w.clone(), jfk.clone());
        std::thread::spawn(move || w.transcribe(&jfk))
    };
    std::thread::sleep(Duration::from_millis(50));
    let cancel = CancelToken::new();
    cancel.cancel();
    let started = Instant::now();
    let dropped = w.transcribe_drafting(&jfk, &mut |_| false, &cancel);
    let dropped_took = started.elapsed();
    assert!(matches!(dropped, Err(SttError::Cancelled)), "{dropped:?}");
    assert!(
        dropped_took * 3 < whole_took,
        "cancelled {dropped_took:?}, whole {whole_took:?}"
    );
    assert_eq!(busy.join().unwrap().unwrap().text, whole.text);
    // And the engine is whole after it.
    assert_eq!(w.transcribe(&jfk).unwrap().text, whole.text);
}

#[test]
fn a_pass_does_not_depend_on_what_was_transcribed_before() {
    // whisper.cpp 1.8.3 + flash attention leaks padded cross-attention
    // frames from one pass into the next; each pass gets a clean state.
    let w = whisper();
    let stt = stt();
    let (hard, _) = audio::wav::read_16k_mono(
        &speech("sense_and_sensibility_01_austen_64kb-0880.wav"),
        None,
    )
    .unwrap();
    let (jfk, _) = audio::wav::read_16k_mono(&speech("jfk.wav"), None).unwrap();
    // The same fast pass twice, with no wall-time cap: on a loaded machine
    // (the suite's other tests) a capped pass stops where the clock says
    // and falls back to another path, and this test is about the state.
    let mut plan = w.fast_plan(hard.len()).unwrap();
    plan.wall_cap = Duration::from_secs(600);
    let first = w.decode(&hard, &plan).unwrap();
    // A full-context pass of another length in between.
    w.decode_library_default(&jfk).unwrap();
    let again = w.decode(&hard, &plan).unwrap();
    assert!(!first.aborted && !again.aborted);
    assert_eq!(first.text, again.text);
    assert_eq!(first.tokens, again.tokens);
    // And the whole path hears the sentence.
    let heard = stt.transcribe(&hard).unwrap();
    assert!(
        text::wer(
            &reference("sense_and_sensibility_01_austen_64kb-0880.wav"),
            &heard.text
        ) <= 0.3,
        "{}",
        heard.text
    );
}

#[test]
fn vad_cuts_real_speech_out_of_silence_and_noise() {
    let jfk = clip_i16("jfk.wav");
    let fwd = clip_i16("goforward.wav");
    let sr = SAMPLE_RATE as usize;
    // 2 s silence | jfk (11 s) | 3 s low noise | goforward (2.8 s) | 2 s silence
    let mut sig = vec![0i16; 2 * sr];
    sig.extend_from_slice(&jfk);
    sig.extend(noise(3 * sr, 200.0, 7));
    let fwd_at = sig.len();
    sig.extend_from_slice(&fwd);
    sig.extend(vec![0i16; 2 * sr]);
    let ms = |samples: usize| (samples * 1000 / sr) as u64;
    let jfk_span = (2000, 2000 + ms(jfk.len()));
    let fwd_span = (ms(fwd_at), ms(fwd_at + fwd.len()));

    let utts = vad::segment(&sig, &vad::VadConfig::default()).unwrap();
    for u in &utts {
        eprintln!(
            "utterance {}..{} ms (speech {}..{})",
            u.start_ms,
            u.end_ms(),
            u.speech_start_ms,
            u.speech_end_ms
        );
    }
    assert!(!utts.is_empty());
    // Every utterance lies in a speech region (pre-roll/tail tolerance 400 ms):
    // nothing is cut out of the silence or the noise.
    for u in &utts {
        let inside =
            |(a, b): (u64, u64)| u.speech_start_ms + 400 >= a && u.speech_end_ms <= b + 400;
        assert!(
            inside(jfk_span) || inside(fwd_span),
            "utterance outside speech: {}..{}",
            u.speech_start_ms,
            u.speech_end_ms
        );
    }
    // The first speech starts at jfk's first word (≈ 2.3 s in), the last
    // ends at goforward's end; both regions are found.
    let first = &utts[0];
    assert!(
        first.speech_start_ms >= 2000 && first.speech_start_ms <= 2700,
        "{}",
        first.speech_start_ms
    );
    assert!(first.start_ms <= first.speech_start_ms, "pre-roll kept");
    let last = utts.last().unwrap();
    assert!(
        last.speech_start_ms >= fwd_span.0 && last.speech_end_ms <= fwd_span.1 + 300,
        "{:?}",
        (last.speech_start_ms, last.speech_end_ms)
    );
    assert!(
        utts.iter()
            .any(|u| u.speech_start_ms < jfk_span.1 && u.speech_end_ms > jfk_span.1 - 2500),
        "jfk's end found"
    );
    // And the last utterance, transcribed, is the command.
    let t = stt().transcribe(&last.to_f32()).unwrap();
    assert!(
        text::wer("go forward ten meters", &t.text) <= 0.25,
        "{}",
        t.text
    );
}

#[test]
fn vad_max_utterance_cuts_long_speech() {
    let jfk = clip_i16("jfk.wav");
    let cfg = vad::VadConfig {
        max_utterance_ms: 3000,
        hangover_ms: 2000,
        ..Default::default()
    };
    let utts = vad::segment(&jfk, &cfg).unwrap();
    assert!(utts.len() >= 3, "{}", utts.len());
    assert!(utts.iter().all(|u| u.duration_ms() <= 3000));
    assert!(utts.iter().any(|u| u.reason == vad::EndReason::MaxLength));
}

#[test]
fn bad_input_is_bounded_and_never_a_hallucinated_paragraph() {
    let stt = stt();
    let sr = SAMPLE_RATE as usize;
    let bounded = |label: &str, samples: &[i16], max_words: usize| {
        let started = Instant::now();
        let t = stt.transcribe(&audio::to_f32(samples)).unwrap();
        let took = started.elapsed();
        let words = text::normalise(&t.text).len();
        eprintln!(
            "{label}: {:?} in {took:?} via {} ({})",
            t.display_text(),
            t.path,
            t.reason
        );
        assert!(took < Duration::from_secs(120), "{label} took {took:?}");
        assert!(words <= max_words, "{label}: {words} words: {}", t.text);
        t
    };
    let t = bounded("silence", &vec![0i16; 5 * sr], 0);
    assert!(t.no_speech && t.display_text() == "(no speech)");
    // A 0.3 s blip of tone between silence.
    let mut blip = vec![0i16; sr];
    blip.extend((0..sr * 3 / 10).map(|i| ((i as f32 * 0.2).sin() * 12000.0) as i16));
    blip.extend(vec![0i16; sr]);
    bounded("blip", &blip, 3);
    bounded("noise", &noise(4 * sr, 3000.0, 99), 4);
    // Clipped, very loud speech: still the words.
    let loud: Vec<i16> = clip_i16("goforward.wav")
        .iter()
        .map(|&s| s.saturating_mul(12))
        .collect();
    let t = bounded("clipped", &loud, 8);
    assert!(
        text::wer("go forward ten meters", &t.text) <= 0.5,
        "{}",
        t.text
    );
    // 60 s of speech: every clip, repeated; bounded, and not longer than the speech.
    let mut long = Vec::new();
    while long.len() < 60 * sr {
        for n in [
            "jfk.wav",
            "sense_and_sensibility_01_austen_64kb-0870.wav",
            "goforward.wav",
        ] {
            long.extend(clip_i16(n));
            long.extend(vec![0i16; sr / 2]);
        }
    }
    long.truncate(60 * sr);
    let t = bounded("60 s", &long, 240);
    assert!(
        text::normalise(&t.text).len() > 60,
        "60 s of speech gave {}",
        t.text
    );
}

#[test]
fn fast_path_is_used_and_reported_for_short_commands() {
    let (samples, _) = audio::wav::read_16k_mono(
        &speech("sense_and_sensibility_01_austen_64kb-0870.wav"),
        None,
    )
    .unwrap();
    let t = stt().transcribe(&samples).unwrap();
    assert_eq!(t.path, "fast", "{}", t.reason);
    assert!(t.reason.contains("audio_ctx"), "{}", t.reason);
    assert!(t.audio_ctx.unwrap() < 1500);
    assert!(t.timings.fast_ms.is_some() && t.timings.full_ms.is_none());
    // The lead silence keeps a word that starts at the first sample.
    assert_eq!(
        text::normalise(&t.text).first().map(String::as_str),
        Some("and"),
        "{}",
        t.text
    );

    // The retry after a rejected fast pass: twice its context, never the
    // full context (that is the last resort).
    let w = whisper();
    let plan = w.fast_plan(3 * SAMPLE_RATE as usize).unwrap();
    assert_eq!(
        plan.audio_ctx, 216,
        "(3 s + 300 ms lead + 1 s margin) × 50/s, to 8"
    );
    assert!(plan.no_timestamps && plan.single_segment);
    assert_eq!(w.wide_plan(&plan).map(|p| p.audio_ctx), Some(432));
    // A command-length pass decodes greedily; a sentence up to 6 s is
    // decoded greedily on trial (kept only when whisper is sure of it);
    // longer audio and every retry keep the beams.
    assert!(plan.greedy, "3 s: a greedy trial (greedy_try_max_ms)");
    assert!(w.greedy_on_trial(&plan, 3_000));
    let seven = w.fast_plan(7 * SAMPLE_RATE as usize).unwrap();
    assert!(!seven.greedy, "7 s > greedy_try_max_ms");
    let command = w.fast_plan(2 * SAMPLE_RATE as usize).unwrap();
    assert!(command.greedy && !w.greedy_on_trial(&command, 2_000));
    assert!(w.wide_plan(&command).is_some_and(|p| !p.greedy));
    let long = w.fast_plan(14 * SAMPLE_RATE as usize).unwrap();
    assert!(
        w.wide_plan(&long).is_none(),
        "2 × {} ≥ 1500: straight to full",
        long.audio_ctx
    );
}

/// A sentence said in two pieces with `pause_ms` of silence between
/// them (Piper clips, tests/data/speech/paused), as the paced benchmark
/// says "<pause N>".
fn paused(head: &str, tail: &str, pause_ms: usize) -> Vec<f32> {
    let piece = |name: &str| {
        audio::wav::read_16k_mono(&speech(&format!("paused/{name}.wav")), None)
            .unwrap()
            .0
    };
    let ms = |n: usize| vec![0.0f32; n * SAMPLE_RATE as usize / 1000];
    [ms(200), piece(head), ms(pause_ms), piece(tail), ms(300)].concat()
}

#[test]
fn words_after_a_long_pause_inside_a_sentence_are_not_lost() {
    let stt = stt();
    // tiny.en's fast pass read these as "Why do we have?" and "Why is the
    // ocean?" with any pause of 150 ms or more: the head sounds finished
    // and the decoder ended there (`stt::gaps`). The words after the
    // pause are tiny.en's to misread on Piper ("late peers"), but not to
    // lose: the transcript has more words than the head.
    for (head, tail, head_words) in [
        ("why_do_we_have", "leap_years", 4),
        ("why_is_the_ocean", "salty", 4),
    ] {
        for pause_ms in [450, 800] {
            let t = stt.transcribe(&paused(head, tail, pause_ms)).unwrap();
            assert!(t.timings.gap_ms.is_some(), "the check ran: {t:?}");
            assert!(
                text::normalise(&t.text).len() > head_words,
                "{head} <pause {pause_ms}> {tail}: {:?} ({}; {})",
                t.text,
                t.path,
                t.reason
            );
        }
    }
    // The voice loop's way: a look at the pause reads the head alone,
    // then the look at the end reads the whole; the head's reading is
    // the one the check compares with (no pass of its own), and the
    // words after the pause are still there.
    let whole = paused("why_do_we_have", "leap_years", 800);
    let head_len = (200 + 700 + 200) * SAMPLE_RATE as usize / 1000;
    let mut look = whole[..head_len.min(whole.len())].to_vec();
    look.resize(head_len, 0.0);
    let head = stt.transcribe(&look).unwrap();
    let t = stt.transcribe(&whole).unwrap();
    assert!(
        text::normalise(&t.text).len() > text::normalise(&head.text).len(),
        "head {:?}, whole {:?} ({})",
        head.text,
        t.text,
        t.reason
    );
    // A reading that kept its words is left as it was: the tail read
    // alone is found at its end.
    let t = stt
        .transcribe(&paused("set_a_timer", "for_ten_minutes", 450))
        .unwrap();
    let words = text::normalise(&t.text);
    assert_eq!(
        words,
        ["set", "a", "timer", "for", "ten", "minutes"],
        "{} ({})",
        t.text,
        t.reason
    );
    assert!(!t.path.contains("gap"), "{} ({})", t.path, t.reason);
}

fn wav_tmp(
    dir: &Path,
    name: &str,
    spec: hound::WavSpec,
    samples: impl Fn(&mut hound::WavWriter<std::io::BufWriter<std::fs::File>>),
) -> PathBuf {
    let p = dir.join(name);
    let mut w = hound::WavWriter::create(&p, spec).unwrap();
    samples(&mut w);
    w.finalize().unwrap();
    p
}

#[test]
fn cli_transcribes_converted_wavs_and_rejects_bad_ones_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let jfk = clip_i16("jfk.wav");
    // Stereo, 8-bit, 48 kHz (each sample held for 3 frames).
    let spec = hound::WavSpec {
        channels: 2,
        sample_rate: 48_000,
        bits_per_sample: 8,
        sample_format: hound::SampleFormat::Int,
    };
    let odd = wav_tmp(dir.path(), "odd.wav", spec, |w| {
        for &s in &jfk {
            for _ in 0..3 {
                let v = (s >> 8) as i8;
                w.write_sample(v).unwrap();
                w.write_sample(v).unwrap();
            }
        }
    });
    let out = common::run(
        common::earshot(dir.path())
            .args(["transcribe", "--json"])
            .arg(&odd)
            .env("STT_BASE_URL", ""),
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let v: serde_json::Value = serde_json::from_str(common::stdout(&out).trim()).unwrap();
    let got = v["text"].as_str().unwrap();
    assert!(text::wer(&reference("jfk.wav"), got) <= 0.10, "{got}");
    assert_eq!(v["engine"], "whisper");
    assert!(v["timings"]["stt_ms"].as_u64().unwrap() > 0);
    assert!(v["path"].is_string() && v["reason"].is_string());
    assert_eq!(v["input"]["sample_rate"], 48_000);

    // Truncated: the header promises more data than the file holds.
    let bytes = std::fs::read(speech("goforward.wav")).unwrap();
    let cut = dir.path().join("cut.wav");
    std::fs::write(&cut, &bytes[..bytes.len() / 2 + 1]).unwrap();
    let notwav = dir.path().join("notes.wav");
    std::fs::write(&notwav, "just some text, not audio\n").unwrap();
    for (file, needle) in [(&cut, "truncated"), (&notwav, "not a WAV")] {
        let out = common::run(common::earshot(dir.path()).arg("transcribe").arg(file));
        let err = common::stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        let lines: Vec<_> = err.lines().filter(|l| l.starts_with("earshot:")).collect();
        assert_eq!(lines.len(), 1, "{err}");
        assert!(lines[0].contains(needle), "{err}");
    }
}

#[test]
fn missing_or_corrupt_model_is_a_clear_error_or_falls_back_to_the_cloud() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models");
    std::fs::create_dir_all(&models).unwrap();
    let clip = speech("goforward.wav");
    // Missing, local only.
    let cfg = dir.path().join("local.toml");
    std::fs::write(&cfg, "[stt]\norder = \"local-only\"\n").unwrap();
    let out = common::run(
        common::earshot(dir.path())
            .env("EARSHOT_MODELS_DIR", &models)
            .arg("--config")
            .arg(&cfg)
            .arg("transcribe")
            .arg(&clip),
    );
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("not found") && err.contains("fetch-whisper.sh"),
        "{err}"
    );
    // Corrupt.
    std::fs::write(models.join("ggml-tiny.en.bin"), vec![7u8; 4096]).unwrap();
    let out = common::run(
        common::earshot(dir.path())
            .env("EARSHOT_MODELS_DIR", &models)
            .arg("--config")
            .arg(&cfg)
            .arg("transcribe")
            .arg(&clip),
    );
    let err = common::stderr(&out);
    assert!(err.contains("could not be loaded"), "{err}");
    // Corrupt + a cloud configured: the cloud answers, the local failure is reported.
    let server = TestServer::start(|_| Reply::json(200, r#"{"text":" Go forward ten meters."}"#));
    let out = common::run(
        common::earshot(dir.path())
            .env("EARSHOT_MODELS_DIR", &models)
            .env("STT_BASE_URL", server.url())
            .env("GROQ_API_KEY", "gsk_test_key_123456")
            .args(["transcribe", "--json"])
            .arg(&clip),
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let v: serde_json::Value = serde_json::from_str(common::stdout(&out).trim()).unwrap();
    assert_eq!(v["engine"], "groq");
    assert_eq!(v["text"], "Go forward ten meters.");
    assert!(
        v["fallbacks"][0]
            .as_str()
            .unwrap()
            .contains("could not be loaded"),
        "{v}"
    );
    assert!(!common::stdout(&out).contains("gsk_test_key_123456"));
}

#[test]
fn groq_wire_format_and_error_bodies() {
    let server = TestServer::start(|req| {
        let auth = req.header("authorization").unwrap_or("").to_string();
        match auth.as_str() {
            "Bearer good" => {
                Reply::json(200, r#"{"text":" hello there ","x_groq":{"id":"req_1"}}"#)
            }
            "Bearer bad" => Reply::json(
                401,
                r#"{"error":{"message":"Invalid API Key","type":"invalid_request_error","code":"invalid_api_key"}}"#,
            ),
            "Bearer html" => Reply::bytes(
                500,
                "text/html",
                b"<html><body><h1>502 Bad Gateway</h1></body></html>",
            ),
            _ => Reply::json(500, r#"{"error":{"message":"internal error"}}"#),
        }
    });
    let cfg = SttConfig {
        cloud_base_url: format!("{}/", server.url()),
        ..Default::default()
    };
    let audio: Vec<f32> = audio::to_f32(&clip_i16("goforward.wav"));

    let t = GroqStt::new(&cfg, "good")
        .unwrap()
        .transcribe(&audio)
        .unwrap();
    assert_eq!(t.text, "hello there");
    assert_eq!((t.engine.as_str(), t.path.as_str()), ("groq", "cloud"));
    let req = &server.requests()[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.path, "/audio/transcriptions");
    let ct = req.header("content-type").unwrap();
    let boundary = ct.strip_prefix("multipart/form-data; boundary=").expect(ct);
    let body = &req.body;
    let field = |name: &str| {
        let marker = format!("name=\"{name}\"\r\n\r\n");
        let s = String::from_utf8_lossy(body);
        let at = s.find(&marker).unwrap_or_else(|| panic!("no field {name}")) + marker.len();
        s[at..].split("\r\n").next().unwrap().to_string()
    };
    assert_eq!(field("model"), "whisper-large-v3");
    assert_eq!(field("temperature"), "0");
    assert_eq!(field("response_format"), "json");
    assert_eq!(field("language"), "en");
    let s = String::from_utf8_lossy(body);
    assert!(s.contains("filename=\"audio.wav\"\r\nContent-Type: audio/wav\r\n\r\nRIFF"));
    assert!(s.ends_with(&format!("--{boundary}--\r\n")));
    // The WAV inside is the audio, 16 kHz mono 16-bit.
    let start = body.windows(4).position(|w| w == b"RIFF").unwrap();
    let (back, info) = audio::wav::read_from(&body[start..], Path::new("part.wav"), None).unwrap();
    assert_eq!(
        (info.sample_rate, info.channels, info.bits_per_sample),
        (16_000, 1, 16)
    );
    assert_eq!(back.len(), audio.len());

    let e = GroqStt::new(&cfg, "bad")
        .unwrap()
        .transcribe(&audio)
        .unwrap_err()
        .to_string();
    assert!(e.contains("401") && e.contains("Invalid API Key"), "{e}");
    let e = GroqStt::new(&cfg, "html")
        .unwrap()
        .transcribe(&audio)
        .unwrap_err()
        .to_string();
    assert!(e.contains("500") && e.contains("HTML"), "{e}");
    assert!(!e.contains('\n'));

    // cloud-first: the cloud's 500 falls back to whisper, and says so.
    let chain = Stt::with_engines(
        vec![
            Arc::new(GroqStt::new(&cfg, "other").unwrap()) as Arc<dyn Transcriber>,
            whisper() as Arc<dyn Transcriber>,
        ],
        120,
    );
    let t = chain.transcribe(&audio).unwrap();
    assert_eq!(t.engine, "whisper");
    assert!(
        t.fallbacks[0].contains("internal error"),
        "{:?}",
        t.fallbacks
    );
    assert!(text::wer("go forward ten meters", &t.text) <= 0.25);

    // A Groq URL without a key is refused up front.
    assert!(GroqStt::new(&SttConfig::default(), "").is_err());
}

#[test]
fn cpal_capture_through_alsa_file_plugin_equals_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let jfk = clip_i16("jfk.wav");
    // Pad with silence: ALSA's file plugin repeats stale data once the file runs out.
    let mut input = vec![0i16; 8000];
    input.extend_from_slice(&jfk);
    input.extend(vec![0i16; SAMPLE_RATE as usize * 4]);
    let raw = dir.path().join("in_16k_s16le.raw");
    std::fs::write(
        &raw,
        input
            .iter()
            .flat_map(|s| s.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let asoundrc = common::alsa_file_config(dir.path(), &raw, &dir.path().join("out.raw"));
    let saved = dir.path().join("captured.wav");
    // The file device is unpaced: a ring big enough for the whole capture.
    let cfg = dir.path().join("earshot.toml");
    std::fs::write(&cfg, "[audio]\nring_ms = 60000\n").unwrap();
    let seconds = (8000 + jfk.len()) as f32 / SAMPLE_RATE as f32;
    let out = common::run(
        common::earshot(dir.path())
            .env("ALSA_CONFIG_PATH", &asoundrc)
            .arg("--config")
            .arg(&cfg)
            .args([
                "transcribe",
                "--input",
                "default",
                "--json",
                "--seconds",
                &format!("{seconds}"),
            ])
            .arg("--save")
            .arg(&saved)
            .env("STT_BASE_URL", ""),
    );
    assert!(out.status.success(), "{}", common::stderr(&out));
    let v: serde_json::Value = serde_json::from_str(common::stdout(&out).trim()).unwrap();
    let (captured, _) = audio::wav::read_16k_mono(&saved, None).unwrap();
    let captured = audio::to_i16(&captured);
    assert_eq!(captured.len(), 8000 + jfk.len(), "{v}");
    assert!(
        captured == input[..captured.len()],
        "cpal capture differs from the file"
    );
    assert_eq!(v["input"]["overruns"], 0);
    assert_eq!(
        text::normalise(v["text"].as_str().unwrap()),
        text::normalise(&reference("jfk.wav")),
        "{v}"
    );

    // A device that does not exist: one clear line.
    let out = common::run(
        common::earshot(dir.path())
            .env("ALSA_CONFIG_PATH", &asoundrc)
            .args(["transcribe", "--input", "hw:9,9", "--seconds", "1"]),
    );
    let err = common::stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("earshot devices"), "{err}");
}

#[test]
fn bench_speak_times_first_sentence_to_first_audio_with_piper() {
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("speak.wav");
    let out = common::run(
        common::earshot(dir.path())
            .args([
                "bench", "speak", "--engine", "piper", "--runs", "1", "--limit", "1",
            ])
            .args(["--json", "--out"])
            .arg(&wav),
    );
    let lines: Vec<serde_json::Value> = common::stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{}", common::stderr(&out));
    assert_eq!(lines[0]["engine"], "piper");
    assert_eq!(lines[0]["first_sentence"], "It's 6:05 PM.");
    let ms = lines[0]["first_audio_ms"].as_f64().unwrap();
    // Synthesis happens inside the measured span: the first sentence's
    // first piece (its encoder run and first decoder window, a third or
    // more of the sentence's synthesis), which plays while the rest is
    // made.
    let synth_ms = lines[0]["synth_ms"].as_f64().unwrap();
    assert!(
        ms >= synth_ms * 0.2 && ms < 5000.0,
        "first audio {ms} ms, synthesis {synth_ms} ms"
    );
    assert_eq!(lines[1]["summary"], true);
    assert_eq!(lines[1]["first_audio_p50_ms"].as_f64(), Some(ms));
    // The paced output really played the reply: > 1 s of audio.
    let played = hound::WavReader::open(&wav).unwrap();
    assert!(played.duration() as f64 / played.spec().sample_rate as f64 > 1.0);
}
