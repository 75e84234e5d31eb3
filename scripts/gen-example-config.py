#!/usr/bin/env python3
"""Regenerate earshot.example.toml: every key of Config::default() with its
value, commented with the doc comment of its field in the config structs.

    cargo test --test ops example_config   # writes $TMPDIR/earshot-default-config.toml
    python3 scripts/gen-example-config.py $TMPDIR/earshot-default-config.toml earshot.example.toml

tests/ops.rs checks the result has every key, the defaults, and a comment
above each value. A field without a doc comment needs an entry in FALLBACK.
"""
import glob
import os
import re
import sys
import tomllib

src = {p: open(p).read() for p in glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'src', '**', '*.rs'), recursive=True)}
structs = {}  # name -> {field: (type, doc)}
sdoc = {}
for path, text in src.items():
    for m in re.finditer(r'((?:\s*///[^\n]*\n)*)\s*(?:#\[[^\n]*\]\s*)*pub struct (\w+)\s*\{(.*?)\n\}', text, re.S):
        name = m.group(2); body = m.group(3)
        fields = {}
        doc = []
        for line in body.split('\n'):
            s = line.strip()
            if s.startswith('///'):
                doc.append(s[3:].strip())
            elif s.startswith('#['):
                continue
            else:
                fm = re.match(r'pub (\w+):\s*([^,]+),?', s)
                if fm:
                    fields[fm.group(1)] = (fm.group(2).split('::')[-1].strip(), ' '.join(doc))
                doc = []
        if name not in structs or len(fields) > len(structs[name]):
            structs[name] = fields

default = tomllib.load(open(sys.argv[1], 'rb'))

def fmt(v):
    if isinstance(v, bool): return 'true' if v else 'false'
    if isinstance(v, float):
        s = f'{v:.6g}'
        if '.' not in s and 'e' not in s: s += '.0'
        return s
    if isinstance(v, int): return str(v)
    if isinstance(v, str): return '"' + v.replace('\\', '\\\\').replace('"', '\\"') + '"'
    if isinstance(v, list): return '[' + ', '.join(fmt(x) for x in v) + ']'
    raise ValueError(v)

import textwrap
def comment(doc, out):
    if not doc: return
    for l in textwrap.wrap(doc, 76):
        out.append('# ' + l)

FALLBACK = {
 'llm.temperature': 'Sampling temperature for answers (0-2; R-MODEL: 0.7).',
 'llm.agent_temperature': 'Sampling temperature for tool calls (0 = deterministic).',
 'llm.max_completion_tokens': 'Longest answer the model may write, in tokens.',
 'llm.top_p': 'Nucleus sampling (1.0 = off).',
 'llm.connect_timeout_secs': 'Give up connecting to the LLM after this long.',
 'stt.fast.enabled': 'Shrink whisper\'s encoder context to the utterance (much faster on a Pi); rerun in full when the result looks wrong.',
 'memory.enabled': 'Remember facts across conversations (R-MEM); off = no recall, no extraction.',
 'memory.bm25_threshold': 'Minimum keyword (BM25) score for a memory to be recalled.',
}
out = []
def emit(table, struct, prefix):
    fields = structs.get(struct, {})
    subs = []
    for k, v in table.items():
        typ, doc = fields.get(k, ('', ''))
        if isinstance(v, dict):
            subs.append((k, v, typ, doc)); continue
        doc = doc or FALLBACK.get(f'{prefix}.{k}', '')
        if not doc: print('UNDOCUMENTED', prefix, k, file=sys.stderr)
        comment(doc, out)
        if prefix == '' and k == 'state_dir':
            out.append('# Default: $XDG_STATE_HOME/earshot or ~/.local/state/earshot; the')
            out.append('# installed service uses /var/lib/earshot.')
            out.append('# state_dir = "/var/lib/earshot"')
        elif k.endswith('api_key') or k == 'token':
            out.append('# Secret: prefer the environment file (/etc/earshot/earshot.env).')
            out.append(f'{k} = {fmt(v)}')
        else:
            out.append(f'{k} = {fmt(v)}')
        out.append('')
    for k, v, typ, doc in subs:
        name = f'{prefix}.{k}' if prefix else k
        out.append(f'[{name}]')
        comment(doc, out)
        sub_struct = typ
        emit(v, sub_struct, name)

out += [
 '# earshot.example.toml — every setting with its default and what it does.',
 '#',
 '# Copy to /etc/earshot/earshot.toml (scripts/install.sh does) or ./earshot.toml.',
 '# Environment variables override the file (GROQ_API_KEY, LLM_BASE_URL, …;',
 '# see `earshot config show` for each value and where it came from).',
 '# Keep secrets in /etc/earshot/earshot.env, not here.',
 '',
]
emit(default, 'Config', '')
text = '\n'.join(out).rstrip() + '\n'
text = re.sub(r'\n\n\n+', '\n\n', text)
open(sys.argv[2], 'w').write(text)
