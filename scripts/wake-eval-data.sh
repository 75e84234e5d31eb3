#!/usr/bin/env bash
# Build the wake-word eval sets (issue 17, point 4) into OUT_DIR:
#   OUT_DIR/positives/<source>/*.wav  clips that hold "hey Jarvis"
#   OUT_DIR/negatives/<source>/*.wav  audio without it (each file <= 5 min)
# then run:
#   earshot eval wake --positives OUT_DIR/positives --negatives OUT_DIR/negatives
#
# Usage: scripts/wake-eval-data.sh OUT_DIR [--long]
#   --long: instead, add OUT_DIR/negatives-long/ (about 5 h more speech
#   without the wake word, the rest of the text, mostly espeak-ng), for a
#   false-accept rate that 1.7 h cannot bound (zero accepts in T hours only
#   says the rate is below 3/T per hour at 95 %); run it after a plain run.
#   EARSHOT=path/to/earshot      (default target/release/earshot, then PATH)
#   EARSHOT_MODELS_DIR=DIR       (the Piper voice; default ./models)
#
# Public sources only, every download pinned by sha256 (the script stops on
# a mismatch): the crates.io crates oww-rs 0.3.3 and livekit-wakeword 0.1.3,
# the PyPI sdist pocketsphinx 5.1.1, and Debian (bookworm) packages fetched
# with apt-get download. Needs sox with MP3 support (libsox-fmt-mp3),
# espeak-ng, python3, curl, pip. Synthesis is the local voices: Piper
# (en_US-joe-medium through `earshot say`) and espeak-ng. Piper samples
# noise inside the model, so two runs give slightly different Piper audio;
# sox runs with -R (repeatable noise) and every list is in a fixed order.
# Keep OUT_DIR outside the repository: about 450 MB with the downloads,
# 1 GB with --long.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 || ${2:---long} != --long ]]; then
    echo "usage: $0 OUT_DIR [--long]" >&2
    exit 2
fi
LONG=${2:-}
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")/.." && pwd)
DL="$OUT/downloads"
WORK="$OUT/work"
POS="$OUT/positives"
NEG="$OUT/negatives"
mkdir -p "$DL" "$WORK"
if [[ -z $LONG ]]; then
    rm -rf "$POS" "$NEG"
    mkdir -p "$POS" "$NEG"
fi

EARSHOT=${EARSHOT:-$HERE/target/release/earshot}
if [[ ! -x $EARSHOT ]]; then
    EARSHOT=$(command -v earshot || true)
fi
[[ -n $EARSHOT && -x $EARSHOT ]] || {
    echo "no earshot binary: build it (cargo build --release) or set EARSHOT" >&2
    exit 1
}
MODELS=$(cd "${EARSHOT_MODELS_DIR:-$HERE/models}" && pwd)
[[ -f $MODELS/en_US-joe-medium.onnx.json ]] || {
    echo "no Piper voice in $MODELS: run scripts/fetch-piper.sh or set EARSHOT_MODELS_DIR" >&2
    exit 1
}
for tool in sox espeak-ng python3 curl pip dpkg-deb apt-get; do
    command -v "$tool" >/dev/null || {
        echo "$tool is missing (apt-get install sox espeak-ng python3 curl python3-pip)" >&2
        exit 1
    }
done
sox -h 2>/dev/null | grep -q ' mp3 ' || {
    echo "sox cannot read MP3: apt-get install libsox-fmt-mp3" >&2
    exit 1
}

say() { echo "wake-eval-data: $*" >&2; }

check() { # FILE SHA256
    local got
    got=$(sha256sum "$1" | cut -d' ' -f1)
    if [[ $got != "$2" ]]; then
        echo "$1: sha256 $got, want $2" >&2
        exit 1
    fi
}

crate() { # NAME VERSION SHA256 -> $DL/NAME-VERSION/
    local f="$DL/$1-$2.crate"
    [[ -f $f ]] || curl -sSfL -o "$f" "https://static.crates.io/crates/$1/$1-$2.crate"
    check "$f" "$3"
    tar -xzf "$f" -C "$DL"
}

deb() { # PACKAGE VERSION SHA256 -> $DL/deb/ (extracted)
    local f
    f=$(ls "$DL"/"$1"_*.deb 2>/dev/null | head -1 || true)
    if [[ -z $f ]]; then
        (cd "$DL" && apt-get download "$1=$2" 2>&1 | grep -v '^W:' >&2 || true)
        f=$(ls "$DL"/"$1"_*.deb | head -1)
    fi
    check "$f" "$3"
    dpkg-deb -x "$f" "$DL/deb"
}

# --- downloads --------------------------------------------------------------
say "fetching the pinned sources into $DL"
crate oww-rs 0.3.3 d2a492188104214331630dee9125e20b13b7d54cc375f28e01163d1490884ac7
crate livekit-wakeword 0.1.3 4f66023a64fefe9aa5b717223379936d4a6ee15f6af93f94e15f1790b4c7f887
if [[ ! -f $DL/pocketsphinx-5.1.1.tar.gz ]]; then
    pip download --quiet --no-deps --no-binary :all: -d "$DL" pocketsphinx==5.1.1 >&2 ||
        [[ -f $DL/pocketsphinx-5.1.1.tar.gz ]]
fi
check "$DL/pocketsphinx-5.1.1.tar.gz" 675778b309a22dfc9b7d37f7621976bba491d2a5f8c59696bd77fd6d07271355
tar -xzf "$DL/pocketsphinx-5.1.1.tar.gz" -C "$DL" pocketsphinx-5.1.1/test
# Real English speech (Asterisk's prompts, CC-BY-SA 3.0), music (Advanced
# Strategic Command's soundtrack, GPL-2+), keyboard noise (bucklespring,
# GPL-2+), public-domain text (Bierce's The Devil's Dictionary, 1911).
deb asterisk-core-sounds-en-wav 1.6.1-1 2be3ea287d83299d143815fa804f11179a75b7affd4a758b98b55f5afc18a35d
deb asc-music 1.3-6 369f2d396adb8db9003ef73b797d529e284a7764a5ff4b59a50a4c8b9294da5f
deb bucklespring-data 1.4.0-2 2add9f5583b3afc9c0b528066f4578baff930b74d4a94c8a25d103ef79a444e5
deb dict-devil 1.0-13.1 6a535684def2a1f70cd42da16d12d43f0e9dc3e54e4a329178eebab3170e3154

to16k() { # IN OUT [sox input options before IN]
    sox -V1 -R "$1" -r 16000 -c 1 -b 16 "$2"
}

rms() { # FILE -> RMS amplitude (0..1)
    sox "$1" -n stat 2>&1 | awk '/RMS +amplitude/ {print $3}'
}

# Mix NOISE under SPEECH at SNR dB (RMS over the whole speech file), the
# noise looped or cut to the speech's length, starting OFFSET s into it.
mix() { # SPEECH NOISE SNR OFFSET OUT
    local len s n v
    len=$(soxi -D "$1")
    s=$(rms "$1")
    sox -R "$2" "$WORK/mix-noise.wav" trim "$4" "$len" 2>/dev/null
    n=$(rms "$WORK/mix-noise.wav")
    v=$(python3 -c "import sys; s,n,snr=map(float,sys.argv[1:]); print(s/max(n,1e-9)/10**(snr/20))" "$s" "$n" "$3")
    sox -R -m -v 1 "$1" -v "$v" "$WORK/mix-noise.wav" -r 16000 -c 1 -b 16 "$5" gain -n -1 2>/dev/null
}

# Piper through `earshot say` with the voice's inference settings changed:
# a models dir of links whose .onnx.json sets length_scale and noise_scale.
piper_dir() { # LENGTH NOISE -> prints the dir
    local d="$WORK/piper-$1-$2"
    mkdir -p "$d"
    for f in "$MODELS"/*; do
        [[ $(basename "$f") == en_US-joe-medium.onnx.json ]] || ln -sf "$f" "$d/"
    done
    python3 - "$MODELS/en_US-joe-medium.onnx.json" "$d/en_US-joe-medium.onnx.json" "$1" "$2" <<'EOF'
import json, sys
voice = json.load(open(sys.argv[1]))
voice["inference"]["length_scale"] = float(sys.argv[3])
voice["inference"]["noise_scale"] = float(sys.argv[4])
json.dump(voice, open(sys.argv[2], "w"))
EOF
    echo "$d"
}

piper_say() { # MODELS_DIR TEXT OUT
    : >"$WORK/empty.toml"
    # `--` before the text: a part may start with "--".
    EARSHOT_CONFIG="$WORK/empty.toml" EARSHOT_STATE_DIR="$WORK/state" EARSHOT_MODELS_DIR="$1" \
        "$EARSHOT" say --engine piper --out "$WORK/say.wav" -- "$2" 2>"$WORK/say.err" || {
        cat "$WORK/say.err" >&2
        echo "earshot say failed (above)" >&2
        exit 1
    }
    to16k "$WORK/say.wav" "$3"
}

# Keyboard noise: every key sound of bucklespring, in name order, 0.15 s apart.
keys=("$DL"/deb/usr/share/buckle/wav/*.wav)
for i in "${!keys[@]}"; do
    sox "${keys[$i]}" -r 16000 -c 1 -b 16 "$WORK/key-$(printf %03d "$i").wav" pad 0 0.15
done
sox "$WORK"/key-*.wav "$WORK/keyboard.wav"
rm -f "$WORK"/key-*.wav
# Music: the three tracks of asc-music, one after the other.
music=("$DL"/deb/usr/share/games/asc/music/*.mp3)
sox "${music[@]}" -r 16000 -c 1 -b 16 "$WORK/music.wav"
# Pink noise (a fan, a road), repeatable.
sox -R -n -r 16000 -c 1 -b 16 "$WORK/pink.wav" synth 120 pinknoise

# The Devil's Dictionary as plain sentences, cut into parts of ~600 words
# (text-000.txt …): the same parts on every run.
make_texts() {
zcat "$DL/deb/usr/share/dictd/devil.dict.dz" | python3 -c '
import re, sys
text = sys.stdin.read()
start = text.find("PREFACE")
text = text[start:] if start >= 0 else text
text = re.sub(r"[{}_]", "", text)
text = re.sub(r"\s+", " ", text)
words = text.split(" ")
os = sys.argv[1]
for i in range(0, len(words), 600):
    open(f"{os}/text-{i // 600:03d}.txt", "w").write(" ".join(words[i:i + 600]) + "\n")
' "$WORK"
}

if [[ -n $LONG ]]; then
    [[ -d $NEG ]] || {
        echo "run $0 $OUT first (without --long)" >&2
        exit 1
    }
    make_texts
    texts=("$WORK"/text-*.txt)
    LNEG="$OUT/negatives-long"
    rm -rf "$LNEG"
    mkdir -p "$LNEG/synth-piper" "$LNEG/synth-espeak" "$LNEG/mixed-music"
    say "long negatives: parts 17-$((${#texts[@]} - 1)) of the text; every 4th with Piper, the rest with 8 espeak-ng voices, every 5th over music (10 dB SNR)"
    voices=(en-us en-gb+f3 en-gb-scotland+m3 en-gb-x-rp en-029+f4 en-us-nyc+klatt en-us+m3 en-gb-x-gbclan+f2)
    scales=(0.9 1.0 1.1)
    for ((i = 17; i < ${#texts[@]}; i++)); do
        if ((i % 4 == 0)); then
            piper_say "$(piper_dir "${scales[$((i % 3))]}" 0.667)" "$(cat "${texts[$i]}")" "$WORK/speech.wav"
            name=part$i-piper
        else
            voice=${voices[$((i % 8))]}
            espeak-ng -v "$voice" -s $((150 + i % 3 * 15)) -f "${texts[$i]}" -w "$WORK/espeak.wav"
            to16k "$WORK/espeak.wav" "$WORK/speech.wav"
            name=part$i-${voice/+/-}
        fi
        if ((i % 5 == 0)); then
            mix "$WORK/speech.wav" "$WORK/music.wav" 10 $((i * 37 % 600)) "$LNEG/mixed-music/$name.wav"
        elif [[ $name == *piper ]]; then
            cp "$WORK/speech.wav" "$LNEG/synth-piper/$name.wav"
        else
            cp "$WORK/speech.wav" "$LNEG/synth-espeak/$name.wav"
        fi
    done
    for dir in "$LNEG"/*/; do
        secs=$(for f in "$dir"*.wav; do soxi -D "$f"; done | awk '{s += $1} END {printf "%.1f", s}')
        echo "  negatives-long/$(basename "$dir"): $(ls "$dir" | wc -l) files, $secs s" >&2
    done
    exit 0
fi

# --- positives --------------------------------------------------------------
say "positives: Piper at 4 speeds x 3 noise scales x 2 phrasings"
mkdir -p "$POS/piper"
for ls in 0.8 1.0 1.25 1.5; do
    for ns in 0.333 0.667 1.0; do
        d=$(piper_dir "$ls" "$ns")
        piper_say "$d" "Hey Jarvis." "$POS/piper/ls$ls-ns$ns-a.wav"
        piper_say "$d" "Hey, Jarvis!" "$POS/piper/ls$ls-ns$ns-b.wav"
    done
done

say "positives: espeak-ng, 6 voices x 4 variants"
mkdir -p "$POS/espeak"
speeds=(140 175)
n=0
for voice in en-us en-gb en-gb-scotland en-gb-x-rp en-029 en-us-nyc; do
    for variant in "" +f3 +m3 +klatt; do
        s=${speeds[$((n % 2))]}
        espeak-ng -v "$voice$variant" -s "$s" -w "$WORK/espeak.wav" "Hey Jarvis"
        to16k "$WORK/espeak.wav" "$POS/espeak/$voice${variant/+/-}-s$s.wav"
        n=$((n + 1))
    done
done

say "positives: the real recording oww-rs ships (16 kHz mono and its 48 kHz stereo copy)"
mkdir -p "$POS/real"
cp "$DL/oww-rs-0.3.3/hey_jarvis.wav" "$POS/real/oww-hey_jarvis.wav"
cp "$DL/oww-rs-0.3.3/test_data/hey_jarvis_48k_stereo.wav" "$POS/real/oww-hey_jarvis_48k_stereo.wav"

say "positives: added noise (pink 10 dB, keyboard 5 dB, music 5 dB SNR) and room reverb"
mkdir -p "$POS/piper-noise" "$POS/piper-reverb" "$POS/real-noise" "$POS/real-reverb"
kinds=(pink keyboard music)
n=0
for f in "$POS"/piper/*-a.wav "$POS/real/oww-hey_jarvis.wav"; do
    case $f in
    */real/*) dest=real ;;
    *) dest=piper ;;
    esac
    base=$(basename "$f" .wav)
    kind=${kinds[$((n % 3))]}
    case $kind in
    pink) snr=10 ;;
    *) snr=5 ;;
    esac
    mix "$f" "$WORK/$kind.wav" "$snr" "$((n * 7 % 60))" "$POS/$dest-noise/$base-$kind$snr.wav"
    if [[ $dest == real ]]; then
        # The one real utterance under every kind of noise.
        mix "$f" "$WORK/keyboard.wav" 5 3 "$POS/real-noise/$base-keyboard5.wav"
        mix "$f" "$WORK/music.wav" 5 30 "$POS/real-noise/$base-music5.wav"
    fi
    # A small room and a large one (reverberance %, HF damping %, room
    # scale %): the Piper clips take turns, the real one gets both.
    rooms=$((n % 2 == 0 ? 40 : 90))
    [[ $dest == real ]] && rooms="40 90"
    for room in $rooms; do
        sox "$f" -r 16000 -c 1 -b 16 "$POS/$dest-reverb/$base-room$room.wav" \
            pad 0 0.5 reverb 50 50 "$room" 100 10 0 channels 1 gain -n -1
    done
    n=$((n + 1))
done

# --- negatives --------------------------------------------------------------
# Split a long file into 5-minute pieces named PREFIX-NNN.wav.
split5() { # IN PREFIX
    sox "$1" "$2-.wav" trim 0 300 : newfile : restart 2>/dev/null
    local i=0
    for p in "$2"-*.wav; do
        [[ -e $p ]] || continue
        mv "$p" "$(dirname "$2")/$(basename "$2")-$(printf %03d "$i").wav"
        i=$((i + 1))
    done
}

say "negatives: real speech (Asterisk's English prompts, pocketsphinx's test speech, other wake words)"
mkdir -p "$NEG/real-asterisk" "$NEG/real-registries"
# Every prompt (one speaker, 8 kHz), in name order, back to back; not the
# ten files of plain silence (silence/1.wav … 10.wav, 55 s).
find "$DL/deb/usr/share/asterisk/sounds" -name '*.wav' -not -path '*/silence/*' |
    LC_ALL=C sort >"$WORK/asterisk.lst"
mapfile -t prompts <"$WORK/asterisk.lst"
sox "${prompts[@]}" -r 16000 -c 1 -b 16 "$WORK/asterisk.wav"
split5 "$WORK/asterisk.wav" "$NEG/real-asterisk/asterisk"
ps="$DL/pocketsphinx-5.1.1/test"
for f in "$ps"/data/librivox/*.wav "$ps"/data/cards/*.wav "$ps"/data/forever/*.wav \
    "$ps"/data/vad/leak-test.wav "$ps"/regression/chan3.wav; do
    to16k "$f" "$NEG/real-registries/pocketsphinx-$(basename "$(dirname "$f")")-$(basename "$f")"
done
for f in goforward numbers something; do
    sox -t raw -r 16000 -e signed -b 16 -c 1 "$ps/data/$f.raw" -b 16 "$NEG/real-registries/pocketsphinx-$f.wav"
done
to16k "$DL/oww-rs-0.3.3/negative.wav" "$NEG/real-registries/oww-negative.wav"
to16k "$DL/livekit-wakeword-0.1.3/tests/fixtures/positive.wav" "$NEG/real-registries/livekit-hey_livekit.wav"
to16k "$DL/livekit-wakeword-0.1.3/tests/fixtures/negative.wav" "$NEG/real-registries/livekit-negative.wav"
to16k "$DL/oww-rs-0.3.3/test_data/ahoj_hugo_man.wav" "$NEG/real-registries/oww-ahoj_hugo_man.wav"
to16k "$DL/oww-rs-0.3.3/test_data/ahoj_hugo_woman.wav" "$NEG/real-registries/oww-ahoj_hugo_woman.wav"

make_texts
texts=("$WORK"/text-*.txt)
say "negatives: ${#texts[@]} parts of The Devil's Dictionary; synthesising"

mkdir -p "$NEG/synth-piper" "$NEG/synth-espeak" "$NEG/mixed-music" "$NEG/mixed-keyboard" "$NEG/music"
d=$(piper_dir 1.0 0.667)
# Piper: parts 0-3 at the voice's own settings, 4-5 faster and slower.
for i in 0 1 2 3; do
    piper_say "$d" "$(cat "${texts[$i]}")" "$NEG/synth-piper/part$i.wav"
done
piper_say "$(piper_dir 0.85 0.667)" "$(cat "${texts[4]}")" "$NEG/synth-piper/part4-fast.wav"
piper_say "$(piper_dir 1.2 0.667)" "$(cat "${texts[5]}")" "$NEG/synth-piper/part5-slow.wav"
# espeak-ng: one part per voice.
i=6
for voice in en-us en-gb+f3 en-gb-scotland+m3 en-gb-x-rp en-029+f4 en-us-nyc+klatt; do
    espeak-ng -v "$voice" -s 160 -f "${texts[$i]}" -w "$WORK/espeak.wav"
    to16k "$WORK/espeak.wav" "$NEG/synth-espeak/part$i-${voice/+/-}.wav"
    i=$((i + 1))
done
# Speech over music (5 dB SNR) and over keyboard noise (10 dB SNR).
for voice in en-us+m3 en-gb; do
    espeak-ng -v "$voice" -s 160 -f "${texts[$i]}" -w "$WORK/espeak.wav"
    to16k "$WORK/espeak.wav" "$WORK/speech.wav"
    mix "$WORK/speech.wav" "$WORK/music.wav" 5 $((i * 37 % 300)) "$NEG/mixed-music/part$i-${voice/+/-}.wav"
    i=$((i + 1))
done
piper_say "$d" "$(cat "${texts[$i]}")" "$WORK/speech.wav"
mix "$WORK/speech.wav" "$WORK/music.wav" 5 400 "$NEG/mixed-music/part$i-piper.wav"
i=$((i + 1))
piper_say "$d" "$(cat "${texts[$i]}")" "$WORK/speech.wav"
mix "$WORK/speech.wav" "$WORK/keyboard.wav" 10 0 "$NEG/mixed-keyboard/part$i-piper.wav"
i=$((i + 1))
espeak-ng -v en-gb-x-rp -s 160 -f "${texts[$i]}" -w "$WORK/espeak.wav"
to16k "$WORK/espeak.wav" "$WORK/speech.wav"
mix "$WORK/speech.wav" "$WORK/keyboard.wav" 10 20 "$NEG/mixed-keyboard/part$i-en-gb-x-rp.wav"
# The music alone.
split5 "$WORK/music.wav" "$NEG/music/asc"

say "done:"
for set in "$POS" "$NEG"; do
    for dir in "$set"/*/; do
        secs=$(for f in "$dir"*.wav; do soxi -D "$f"; done | awk '{s += $1} END {printf "%.1f", s}')
        echo "  $(basename "$set")/$(basename "$dir"): $(ls "$dir" | wc -l) files, $secs s" >&2
    done
done
