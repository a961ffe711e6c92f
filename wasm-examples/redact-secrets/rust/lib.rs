//! redact-secrets in Rust: the core rules of the Go module
//! (wasm-examples/redact-secrets/redact) on the Rust kit, passing the same
//! vectors (../vectors.json). Config: replacement, disable, arguments,
//! results; tokens and literals are the Go module's only.
//!
//! It works on the JSON text as it is: matches never cross a quote, escape
//! sequences count as word boundaries, replacements are JSON-escaped.

#[path = "../../../guest/kits/rust/edge.rs"]
mod edge;

const API_KEY: usize = 0;
const BEARER: usize = 1;
const JWT: usize = 2;
const PRIVATE_KEY: usize = 3;
const EMAIL: usize = 4;
const CARD: usize = 5;
const KINDS: [&str; 6] = ["api_key", "bearer", "jwt", "private_key", "email", "card"];

struct Config {
    repl: [Vec<u8>; 6],
    disabled: [bool; 6],
    arguments: bool,
    results: bool,
}

static mut CFG: Option<Config> = None;
static mut BUF: Vec<u8> = Vec::new();

fn config() -> &'static Config {
    unsafe {
        if CFG.is_none() {
            CFG = Some(new_config(b"[REDACTED]", [false; 6]));
        }
        CFG.as_ref().unwrap()
    }
}

/// repl is the replacement as raw JSON string text (escapes kept).
fn new_config(repl: &[u8], disabled: [bool; 6]) -> Config {
    let mk = |k: usize| -> Vec<u8> {
        let mut v = Vec::new();
        let mut i = 0;
        while i < repl.len() {
            if repl[i..].starts_with(b"{kind}") {
                v.extend_from_slice(KINDS[k].as_bytes());
                i += 6;
            } else {
                v.push(repl[i]);
                i += 1;
            }
        }
        v
    };
    Config { repl: [mk(0), mk(1), mk(2), mk(3), mk(4), mk(5)], disabled, arguments: true, results: true }
}

fn configure(input: &[u8], _out: &mut Vec<u8>) -> Result<(), String> {
    let mut repl: Vec<u8> = b"[REDACTED]".to_vec();
    let mut disabled = [false; 6];
    let (mut arguments, mut results) = (true, true);
    let mut err: Option<String> = None;
    let ok = edge::members(input, |k, v| {
        match k {
            b"replacement" if v.len() >= 2 && v[0] == b'"' => repl = v[1..v.len() - 1].to_vec(),
            b"disable" => {
                edge::elems(v, |e| match edge::string(e).and_then(|n| KINDS.iter().position(|k| *k == n)) {
                    Some(i) => disabled[i] = true,
                    None => err = Some(format!("config: unknown kind {} in disable", String::from_utf8_lossy(e))),
                });
            }
            b"arguments" => arguments = v != b"false",
            b"results" => results = v != b"false",
            _ => err = Some(format!("config: unknown key {}", String::from_utf8_lossy(k))),
        }
        err.is_none()
    });
    if !ok {
        return Err("config: not a JSON object".into());
    }
    if let Some(e) = err {
        return Err(e);
    }
    let mut c = new_config(&repl, disabled);
    c.arguments = arguments;
    c.results = results;
    unsafe { CFG = Some(c) };
    Ok(())
}

fn on_tool_call(input: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let c = config();
    if !c.arguments {
        return Ok(());
    }
    if let Some(args) = edge::member(input, "arguments") {
        let buf = unsafe { &mut BUF };
        buf.clear();
        if redact(c, buf, args) {
            edge::rewrite(out, buf);
        }
    }
    Ok(())
}

fn on_result(input: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let c = config();
    if !c.results {
        return Ok(());
    }
    if let Some(r) = edge::member(input, "result") {
        out.extend_from_slice(b"{\"result\":");
        if redact(c, out, r) {
            out.push(b'}');
        } else {
            out.clear();
        }
    }
    Ok(())
}

edge::hook!(edge_configure, configure);
edge::hook!(edge_hook_tool_call, on_tool_call);
edge::hook!(edge_hook_tool_result, on_result);
edge::hook!(edge_hook_resource_result, on_result);
edge::hook!(edge_hook_prompt_result, on_result);

// Character classes, one bit each in CLASS.
const ALNUM: u16 = 1;
const ALNUM_DASH: u16 = 2;
const B64: u16 = 4;
const HEX: u16 = 8;
const DOMAIN: u16 = 16;
const TOKEN: u16 = 32;
const UPPER_NUM: u16 = 64;
const EMAIL_LOCAL: u16 = 128;

const fn classes() -> [u16; 256] {
    let mut t = [0u16; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        let mut v = 0;
        let alnum = b.is_ascii_alphanumeric();
        if alnum {
            v |= ALNUM | ALNUM_DASH | B64 | DOMAIN | TOKEN | EMAIL_LOCAL;
        }
        if b == b'_' || b == b'-' {
            v |= ALNUM_DASH | B64;
        }
        if b == b'+' || b == b'/' || b == b'=' {
            v |= B64;
        }
        if b.is_ascii_hexdigit() {
            v |= HEX;
        }
        if b == b'-' || b == b'.' {
            v |= DOMAIN;
        }
        if b == b'_' || b == b'-' || b == b'.' || b == b'~' || b == b'+' || b == b'/' || b == b'=' {
            v |= TOKEN;
        }
        if b.is_ascii_uppercase() || b.is_ascii_digit() {
            v |= UPPER_NUM;
        }
        if b == b'.' || b == b'_' || b == b'%' || b == b'+' || b == b'-' {
            v |= EMAIL_LOCAL;
        }
        t[c] = v;
        c += 1;
    }
    t
}

static CLASS: [u16; 256] = classes();

// The first two bytes of every pattern: a match can start at p only if
// NEED[s[p]] & NEXT[s[p+1]] != 0 (sk rk gh gi xo AK AS AI ey be/BE, two
// digits, two dashes, '@' and a letter or digit). redact skips eight
// positions at a time where no pair fits.
const NK: u16 = 1;
const NHI: u16 = 2;
const NO: u16 = 4;
const NKSI: u16 = 8;
const NY: u16 = 16;
const NE: u16 = 32;
const NDIGIT: u16 = 64;
const NDASH: u16 = 128;
const NALNUM: u16 = 256;

const fn pairs(first: bool) -> [u16; 256] {
    let mut t = [0u16; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = if first {
            match b {
                b's' | b'r' => NK,
                b'g' => NHI,
                b'x' => NO,
                b'A' => NKSI,
                b'e' => NY,
                b'B' | b'b' => NE,
                b'2'..=b'6' => NDIGIT,
                b'-' => NDASH,
                b'@' => NALNUM,
                _ => 0,
            }
        } else {
            let mut v = match b {
                b'k' => NK,
                b'h' | b'i' => NHI,
                b'o' => NO,
                b'K' | b'S' | b'I' => NKSI,
                b'y' => NY,
                b'e' | b'E' => NE,
                b'-' => NDASH,
                _ => 0,
            };
            if b.is_ascii_digit() {
                v |= NDIGIT;
            }
            if b.is_ascii_alphanumeric() {
                v |= NALNUM;
            }
            v
        };
        c += 1;
    }
    t
}

static NEED: [u16; 256] = pairs(true);
static NEXT: [u16; 256] = pairs(false);

#[inline(always)]
fn pair(s: &[u8], i: usize) -> u16 {
    NEED[s[i] as usize] & NEXT[s[i + 1] as usize]
}

#[inline]
fn is(c: u8, set: u16) -> bool {
    CLASS[c as usize] & set != 0
}

/// Memoised runs per character set, so that matchers tried at many
/// positions of one long run scan it once (linear time).
struct Runs {
    from: [usize; 8],
    end: [usize; 8],
}

impl Runs {
    fn run(&mut self, s: &[u8], i: usize, set: u16) -> usize {
        let id = set.trailing_zeros() as usize;
        if i >= self.from[id] && i <= self.end[id] && self.end[id] != 0 {
            return self.end[id];
        }
        let mut e = i;
        while e < s.len() && is(s[e], set) {
            e += 1;
        }
        self.from[id] = i;
        self.end[id] = e;
        e
    }
    fn tail(&mut self, s: &[u8], i: usize, min: usize, set: u16) -> usize {
        let e = self.run(s, i, set);
        if e >= i + min {
            e
        } else {
            0
        }
    }
}

/// Appends s to dst with every secret masked; false (and nothing
/// appended) when there was none.
fn redact(c: &Config, dst: &mut Vec<u8>, s: &[u8]) -> bool {
    let mark = dst.len();
    let mut runs = Runs { from: [0; 8], end: [0; 8] };
    let (mut last, mut p, mut changed) = (0, 0, false);
    let n = s.len();
    while p + 1 < n {
        // Positions [p, stop) are looked at one by one.
        let mut stop = n - 1;
        if p + 9 <= n {
            let t = &s[p..p + 9];
            if pair(t, 0) | pair(t, 1) | pair(t, 2) | pair(t, 3) | pair(t, 4) | pair(t, 5) | pair(t, 6) | pair(t, 7) == 0 {
                p += 8;
                continue;
            }
            stop = p + 8;
        }
        while p < stop {
            if pair(s, p) == 0 {
                p += 1;
                continue;
            }
            let (start, end, k) = match_at(c, s, p, last, &mut runs);
            if end > 0 {
                dst.extend_from_slice(&s[last..start]);
                dst.extend_from_slice(&c.repl[k]);
                last = end;
                p = end;
                changed = true;
                break;
            }
            p += 1;
        }
    }
    if !changed {
        dst.truncate(mark);
        return false;
    }
    dst.extend_from_slice(&s[last..]);
    true
}

fn at(s: &[u8], i: usize, c: u8) -> bool {
    i < s.len() && s[i] == c
}

fn escaped(s: &[u8], p: usize) -> bool {
    let mut n = 0;
    while p > n && s[p - n - 1] == b'\\' && n < 64 {
        n += 1;
    }
    n % 2 == 1
}

fn word_start(s: &[u8], p: usize) -> bool {
    if p == 0 {
        return true;
    }
    let c = s[p - 1];
    if c == b'\\' {
        return false;
    }
    if !is(c, ALNUM) && c != b'_' {
        return true;
    }
    if p >= 2 && s[p - 2] == b'\\' && matches!(c, b'n' | b't' | b'r' | b'b' | b'f') {
        return true;
    }
    p >= 6 && s[p - 6] == b'\\' && s[p - 5] == b'u' && is(s[p - 4], HEX) && is(s[p - 3], HEX) && is(s[p - 2], HEX) && is(c, HEX)
}

fn boundary_at(s: &[u8], i: usize) -> bool {
    i >= s.len() || !is(s[i], ALNUM) && s[i] != b'_'
}

fn match_at(cfg: &Config, s: &[u8], p: usize, last: usize, m: &mut Runs) -> (usize, usize, usize) {
    let c = s[p];
    if p > 0 && escaped(s, p) {
        return (0, 0, 0);
    }
    if c == b'@' {
        if !cfg.disabled[EMAIL] {
            if let Some((b, e)) = email(s, p, last, m) {
                return (b, e, EMAIL);
            }
        }
        return (0, 0, 0);
    }
    if !word_start(s, p) {
        return (0, 0, 0);
    }
    let found = match c {
        b'2'..=b'6' if !cfg.disabled[CARD] => card(s, p).map(|e| (p, e, CARD)),
        b'-' if !cfg.disabled[PRIVATE_KEY] => pem_block(s, p).map(|e| (p, e, PRIVATE_KEY)),
        b'e' if !cfg.disabled[JWT] => jwt(s, p, m).map(|e| (p, e, JWT)),
        b'B' | b'b' if !cfg.disabled[BEARER] => bearer(s, p, m).map(|(b, e)| (b, e, BEARER)),
        b's' | b'r' | b'g' | b'x' | b'A' if !cfg.disabled[API_KEY] => api_key(s, p, c, m).map(|e| (p, e, API_KEY)),
        _ => None,
    };
    found.unwrap_or((0, 0, 0))
}

fn nz(e: usize) -> Option<usize> {
    if e > 0 {
        Some(e)
    } else {
        None
    }
}

fn api_key(s: &[u8], i: usize, c: u8, m: &mut Runs) -> Option<usize> {
    match c {
        b's' | b'r' if at(s, i + 1, b'k') => {
            if c == b's' && at(s, i + 2, b'-') {
                return nz(m.tail(s, i + 3, 20, ALNUM_DASH));
            }
            if at(s, i + 2, b'_') && i + 8 <= s.len() && (&s[i + 3..i + 8] == b"live_" || &s[i + 3..i + 8] == b"test_") {
                return nz(m.tail(s, i + 8, 16, ALNUM));
            }
        }
        b'g' => {
            if at(s, i + 1, b'h') && at(s, i + 3, b'_') && matches!(s[i + 2], b'p' | b'o' | b'u' | b's' | b'r') {
                let e = m.run(s, i + 4, ALNUM);
                if e >= i + 4 + 30 && boundary_at(s, e) {
                    return Some(e);
                }
            }
            if s[i..].starts_with(b"github_pat_") {
                return nz(m.tail(s, i + 11, 22, ALNUM_DASH));
            }
        }
        b'x' => {
            if at(s, i + 1, b'o') && at(s, i + 2, b'x') && at(s, i + 4, b'-') && matches!(s[i + 3], b'b' | b'p' | b'a' | b'r' | b's') {
                return nz(m.tail(s, i + 5, 10, ALNUM_DASH));
            }
        }
        b'A' if i + 4 <= s.len() => {
            if (s[i + 1] == b'K' || s[i + 1] == b'S') && s[i + 2] == b'I' && s[i + 3] == b'A' {
                let e = m.run(s, i + 4, UPPER_NUM);
                if e == i + 20 && boundary_at(s, e) {
                    return Some(e);
                }
            }
            if &s[i + 1..i + 4] == b"Iza" {
                return nz(m.tail(s, i + 4, 35, ALNUM_DASH));
            }
        }
        _ => {}
    }
    None
}

fn jwt(s: &[u8], i: usize, m: &mut Runs) -> Option<usize> {
    if !at(s, i + 1, b'y') || !at(s, i + 2, b'J') {
        return None;
    }
    let e = m.run(s, i + 3, ALNUM_DASH);
    if e - i < 10 || !at(s, e, b'.') {
        return None;
    }
    let mut p = m.run(s, e + 1, ALNUM_DASH);
    if p - (e + 1) < 10 {
        return None;
    }
    if at(s, p, b'.') {
        p = m.run(s, p + 1, ALNUM_DASH);
    }
    Some(p)
}

fn bearer(s: &[u8], i: usize, m: &mut Runs) -> Option<(usize, usize)> {
    if i + 7 > s.len() || !s[i..i + 6].eq_ignore_ascii_case(b"bearer") || (s[i + 6] != b' ' && s[i + 6] != b'\t') {
        return None;
    }
    let mut j = i + 6;
    while j < s.len() && j - i < 14 && (s[j] == b' ' || s[j] == b'\t') {
        j += 1;
    }
    let e = m.run(s, j, TOKEN);
    if e - j < 16 {
        return None;
    }
    Some((j, e))
}

fn pem_block(s: &[u8], i: usize) -> Option<usize> {
    const BEGIN: &[u8] = b"-----BEGIN ";
    if !s[i..].starts_with(BEGIN) {
        return None;
    }
    let j = i + BEGIN.len();
    let mut k = j;
    while k < s.len() && k - j < 40 && (s[k].is_ascii_uppercase() || s[k] == b' ') {
        k += 1;
    }
    if !s[j..k].ends_with(b"PRIVATE KEY") || !s[k..].starts_with(b"-----") {
        return None;
    }
    let mut e = k + 5;
    while e < s.len() {
        match s[e] {
            b'\\' => e += 1,
            b'"' => return Some(e),
            b'-' if s[e..].starts_with(b"-----END ") => {
                e += 9;
                while e < s.len() && (s[e].is_ascii_uppercase() || s[e] == b' ') {
                    e += 1;
                }
                if s[e..].starts_with(b"-----") {
                    e += 5;
                }
                return Some(e);
            }
            _ => {}
        }
        e += 1;
    }
    Some(s.len())
}

fn email(s: &[u8], at: usize, floor: usize, m: &mut Runs) -> Option<(usize, usize)> {
    let mut start = at;
    while start > floor && is(s[start - 1], EMAIL_LOCAL) && at - start < 64 {
        start -= 1;
    }
    while start < at && escaped(s, start) {
        start += if s[start] == b'u' { 5 } else { 1 };
    }
    while start < at && (s[start] == b'.' || s[start] == b'-') {
        start += 1;
    }
    if start >= at {
        return None;
    }
    let mut end = m.run(s, at + 1, DOMAIN);
    while end > at + 1 && (s[end - 1] == b'.' || s[end - 1] == b'-') {
        end -= 1;
    }
    if end == at + 1 || s[at + 1] == b'.' || s[at + 1] == b'-' {
        return None;
    }
    let mut dot = 0;
    for k in at + 1..end {
        if s[k] == b'.' {
            if s[k - 1] == b'.' {
                return None;
            }
            dot = k;
        }
    }
    if dot == 0 || end - dot - 1 < 2 || !s[dot + 1..end].iter().all(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    Some((start, end))
}

fn card(s: &[u8], i: usize) -> Option<usize> {
    let mut digits = [0u8; 19];
    let (mut n, mut group, mut j, mut sep) = (0, 0, i, 0u8);
    while j < s.len() {
        let c = s[j];
        if c.is_ascii_digit() {
            if n == digits.len() {
                return None;
            }
            digits[n] = c - b'0';
            n += 1;
            group += 1;
            j += 1;
            continue;
        }
        if (c == b' ' || c == b'-') && group >= 3 && j + 1 < s.len() && s[j + 1].is_ascii_digit() && (sep == 0 || sep == c) {
            sep = c;
            group = 0;
            j += 1;
            continue;
        }
        break;
    }
    if n < 13 || group < 3 || !boundary_at(s, j) || digits[0] < 2 || digits[0] > 6 {
        return None;
    }
    let mut sum = 0;
    for k in 0..n {
        let mut d = digits[n - 1 - k] as u32;
        if k % 2 == 1 {
            d *= 2;
            if d > 9 {
                d -= 9;
            }
        }
        sum += d;
    }
    if sum % 10 == 0 {
        Some(j)
    } else {
        None
    }
}
