//! The edge-mcp policy kit for Rust: the ABI glue of policy/ABI.md (1.1)
//! and small JSON helpers, in one file with no dependencies.
//!
//! Mount it at the root of a `cdylib` crate as `mod edge;` and export
//! hooks with the macros:
//!
//! ```ignore
//! mod edge;
//! fn on_call(input: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
//!     if edge::member(input, "tool").and_then(edge::string).as_deref() == Some("delete_repo") {
//!         edge::deny(out, "deleting repositories is not allowed");
//!     }
//!     Ok(())
//! }
//! edge::hook!(edge_hook_tool_call, on_call);
//! ```
//!
//! Build for `wasm32-unknown-unknown` (no imports at all):
//! `rustc --target wasm32-unknown-unknown --crate-type cdylib -C opt-level=s -C panic=abort lib.rs`.
//!
//! A handler gets the hook input (a JSON object, see ABI.md) and an empty
//! output buffer: leaving it empty means allow / unchanged; `Err(msg)`
//! reports `{"error":msg}`. Export only the hooks you implement: the host
//! calls exactly those.

#![allow(dead_code)]

/// ABI version 1.1: major << 16 | minor.
pub const ABI_VERSION: i32 = 0x0001_0001;

static mut INPUT: Vec<u8> = Vec::new();
static mut OUTPUT: Vec<u8> = Vec::new();

#[no_mangle]
pub extern "C" fn edge_abi_version() -> i32 {
    ABI_VERSION
}

/// Returns a region of at least `size` bytes for the host's input. The
/// region stays the host's until the next call.
#[no_mangle]
pub extern "C" fn edge_alloc(size: i32) -> i32 {
    unsafe {
        let want = size.max(0) as usize;
        if INPUT.len() < want {
            INPUT = vec![0; want];
        }
        INPUT.as_mut_ptr() as i32
    }
}

/// The signature of hook and configure handlers.
pub type Handler = fn(input: &[u8], out: &mut Vec<u8>) -> Result<(), String>;

/// Runs a handler on the input at [ptr, ptr+len) and packs its output as
/// the ABI wants: (ptr << 32) | len, 0 for none.
pub fn run(ptr: i32, len: i32, f: Handler) -> i64 {
    unsafe {
        let input = core::slice::from_raw_parts(ptr as usize as *const u8, len.max(0) as usize);
        let out = &mut OUTPUT;
        out.clear();
        if let Err(msg) = f(input, out) {
            out.clear();
            out.extend_from_slice(b"{\"error\":");
            push_string(out, &msg);
            out.push(b'}');
        }
        if out.is_empty() {
            return 0;
        }
        ((out.as_ptr() as usize as i64) << 32) | out.len() as i64
    }
}

/// Exports a handler under an ABI name: `hook!(edge_hook_tool_call, f)`,
/// `hook!(edge_configure, f)`. Names: edge_hook_tools_list,
/// edge_hook_tool_call, edge_hook_tool_result, edge_hook_resource_result,
/// edge_hook_prompt_result, edge_hook_event, edge_configure.
#[macro_export]
macro_rules! hook {
    ($export:ident, $f:path) => {
        #[no_mangle]
        pub extern "C" fn $export(ptr: i32, len: i32) -> i64 {
            crate::edge::run(ptr, len, $f)
        }
    };
}
pub use hook;

// Decisions (tool_call) and results (*_result).

/// `{"action":"deny","reason":...}`
pub fn deny(out: &mut Vec<u8>, reason: &str) {
    out.extend_from_slice(b"{\"action\":\"deny\",\"reason\":");
    push_string(out, reason);
    out.push(b'}');
}

/// `{"action":"rewrite","arguments":...}`; `args` is a JSON object.
pub fn rewrite(out: &mut Vec<u8>, args: &[u8]) {
    out.extend_from_slice(b"{\"action\":\"rewrite\",\"arguments\":");
    out.extend_from_slice(args);
    out.push(b'}');
}

/// `{"action":"route","server":...}`
pub fn route(out: &mut Vec<u8>, server: &str) {
    out.extend_from_slice(b"{\"action\":\"route\",\"server\":");
    push_string(out, server);
    out.push(b'}');
}

/// `{"result":...}`: a replacement result for the *_result hooks.
pub fn result(out: &mut Vec<u8>, result: &[u8]) {
    out.extend_from_slice(b"{\"result\":");
    out.extend_from_slice(result);
    out.push(b'}');
}

// SEP-2624 interceptors (ABI 1.1).

/// An interceptor descriptor (the wire shape of `interceptors/list`) and
/// its handler.
pub struct Interceptor {
    pub name: &'static str,
    /// "" for none.
    pub description: &'static str,
    /// false: validation, true: mutation.
    pub mutation: bool,
    /// Lifecycle events or patterns: "tools/call", "tools/*", "*", ...
    pub events: &'static [&'static str],
    /// "request", "response" or "both" ("" means both).
    pub phase: &'static str,
    /// "" (active) or "audit".
    pub mode: &'static str,
    pub fail_open: bool,
    /// priorityHint (0 by default).
    pub priority: i32,
    /// A JSON Schema object as text, or "".
    pub config_schema: &'static str,
    pub handler: InterceptHandler,
}

/// One call of an interceptor. Strings are the raw text between the
/// quotes (escapes kept; decode with `string` when needed), empty when
/// absent; `context`, `config` and `payload` are raw JSON (`config` empty
/// when absent).
#[derive(Default)]
pub struct Invocation<'a> {
    pub name: &'a [u8],
    pub event: &'a [u8],
    pub phase: &'a [u8],
    pub session_id: &'a [u8],
    pub server: &'a [u8],
    /// context.principal.id
    pub principal: &'a [u8],
    pub context: &'a [u8],
    pub config: &'a [u8],
    pub payload: &'a [u8],
}

/// An interceptor handler writes its answer to out: for a validator,
/// nothing (valid) or `refuse`; for a mutator, nothing (unmodified) or
/// `replace`. `Err(msg)` reports `{"error":msg}`.
pub type InterceptHandler = fn(inv: &Invocation, out: &mut Vec<u8>) -> Result<(), String>;

/// `{"valid":false,"severity":"error","messages":[{"message":...,"severity":"error"}]}`
pub fn refuse(out: &mut Vec<u8>, message: &str) {
    out.extend_from_slice(b"{\"valid\":false,\"severity\":\"error\",\"messages\":[{\"message\":");
    push_string(out, message);
    out.extend_from_slice(b",\"severity\":\"error\"}]}");
}

/// `{"modified":true,"payload":...}`; payload is JSON of the same kind.
pub fn replace(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(b"{\"modified\":true,\"payload\":");
    out.extend_from_slice(payload);
    out.push(b'}');
}

fn push_descriptor(out: &mut Vec<u8>, ic: &Interceptor) {
    out.extend_from_slice(b"{\"name\":");
    push_string(out, ic.name);
    if !ic.description.is_empty() {
        out.extend_from_slice(b",\"description\":");
        push_string(out, ic.description);
    }
    out.extend_from_slice(if ic.mutation { &b",\"type\":\"mutation\""[..] } else { &b",\"type\":\"validation\""[..] });
    out.extend_from_slice(b",\"hooks\":[{\"events\":[");
    for (i, e) in ic.events.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_string(out, e);
    }
    out.extend_from_slice(b"],\"phase\":");
    push_string(out, if ic.phase.is_empty() { "both" } else { ic.phase });
    out.extend_from_slice(b"}]");
    if !ic.mode.is_empty() {
        out.extend_from_slice(b",\"mode\":");
        push_string(out, ic.mode);
    }
    if ic.fail_open {
        out.extend_from_slice(b",\"failOpen\":true");
    }
    if ic.priority != 0 {
        out.extend_from_slice(b",\"priorityHint\":");
        out.extend_from_slice(ic.priority.to_string().as_bytes());
    }
    if !ic.config_schema.is_empty() {
        out.extend_from_slice(b",\"configSchema\":");
        out.extend_from_slice(ic.config_schema.as_bytes());
    }
    out.push(b'}');
}

/// The `interceptors` hook: the descriptors of ics.
pub fn list_interceptors(ics: &[Interceptor], out: &mut Vec<u8>) -> Result<(), String> {
    out.extend_from_slice(b"{\"interceptors\":[");
    for (i, ic) in ics.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_descriptor(out, ic);
    }
    out.extend_from_slice(b"]}");
    Ok(())
}

fn inner(v: &[u8]) -> Option<&[u8]> {
    if v.len() >= 2 && v[0] == b'"' {
        Some(&v[1..v.len() - 1])
    } else {
        None
    }
}

/// Parses the `intercept` hook's input.
pub fn parse_invocation(input: &[u8]) -> Result<Invocation<'_>, String> {
    let mut inv = Invocation::default();
    let mut ok = true;
    let mut has_payload = false;
    let parsed = members(input, |k, v| {
        let s = match k {
            b"name" => &mut inv.name,
            b"event" => &mut inv.event,
            b"phase" => &mut inv.phase,
            b"config" => {
                inv.config = v;
                return true;
            }
            b"payload" => {
                inv.payload = v;
                has_payload = true;
                return true;
            }
            b"context" => {
                inv.context = v;
                ok &= members(v, |ck, cv| {
                    match ck {
                        b"sessionId" => inner(cv).map(|s| inv.session_id = s),
                        b"server" => inner(cv).map(|s| inv.server = s),
                        b"principal" => member(cv, "id").map_or(Some(()), |id| inner(id).map(|s| inv.principal = s)),
                        _ => Some(()),
                    }
                    .is_some()
                });
                return ok;
            }
            _ => return true,
        };
        match inner(v) {
            Some(x) => *s = x,
            None => ok = false,
        }
        ok
    });
    if !parsed || !ok {
        return Err("intercept: input is not a valid invocation".into());
    }
    if inv.name.is_empty() || !has_payload {
        return Err("intercept: name and payload are required".into());
    }
    Ok(inv)
}

/// The `intercept` hook: runs the interceptor of ics the input names.
pub fn run_intercept(ics: &[Interceptor], input: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let inv = parse_invocation(input)?;
    match ics.iter().find(|ic| ic.name.as_bytes() == inv.name) {
        Some(ic) => (ic.handler)(&inv, out),
        None => Err("intercept: no interceptor of that name".into()),
    }
}

/// Exports `edge_hook_interceptors` and `edge_hook_intercept` for a
/// `static` array of `Interceptor`: `interceptors!(ICS);`
#[macro_export]
macro_rules! interceptors {
    ($ics:path) => {
        #[no_mangle]
        pub extern "C" fn edge_hook_interceptors(ptr: i32, len: i32) -> i64 {
            fn list(_: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
                crate::edge::list_interceptors(&$ics, out)
            }
            crate::edge::run(ptr, len, list)
        }
        #[no_mangle]
        pub extern "C" fn edge_hook_intercept(ptr: i32, len: i32) -> i64 {
            fn intercept(input: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
                crate::edge::run_intercept(&$ics, input, out)
            }
            crate::edge::run(ptr, len, intercept)
        }
    };
}
pub use interceptors;

// JSON helpers: they work on the text as it is, never building a tree.

fn ws(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\r' | b'\n') {
        i += 1;
    }
    i
}

/// Returns the end of the JSON value starting at s[i] (after white space),
/// or None when it is malformed.
pub fn skip_value(s: &[u8], i: usize) -> Option<usize> {
    let mut i = ws(s, i);
    let first = *s.get(i)?;
    match first {
        b'"' => {
            i += 1;
            while i < s.len() {
                match s[i] {
                    b'\\' => i += 2,
                    b'"' => return Some(i + 1),
                    _ => i += 1,
                }
            }
            None
        }
        b'{' | b'[' => {
            let mut depth = 0usize;
            while i < s.len() {
                match s[i] {
                    b'"' => {
                        i = skip_value(s, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let start = i;
            while i < s.len() && !matches!(s[i], b',' | b'}' | b']' | b' ' | b'\t' | b'\r' | b'\n') {
                i += 1;
            }
            if i > start {
                Some(i)
            } else {
                None
            }
        }
    }
}

/// Calls f(key, value) for each member of a JSON object; key is the raw
/// text between the quotes. Returns false when obj is not an object.
pub fn members<'a>(obj: &'a [u8], mut f: impl FnMut(&'a [u8], &'a [u8]) -> bool) -> bool {
    let mut i = ws(obj, 0);
    if obj.get(i) != Some(&b'{') {
        return false;
    }
    i = ws(obj, i + 1);
    if obj.get(i) == Some(&b'}') {
        return true;
    }
    loop {
        if obj.get(i) != Some(&b'"') {
            return false;
        }
        let kend = match skip_value(obj, i) {
            Some(e) => e,
            None => return false,
        };
        let key = &obj[i + 1..kend - 1];
        i = ws(obj, kend);
        if obj.get(i) != Some(&b':') {
            return false;
        }
        let vstart = ws(obj, i + 1);
        let vend = match skip_value(obj, vstart) {
            Some(e) => e,
            None => return false,
        };
        if !f(key, &obj[vstart..vend]) {
            return true;
        }
        i = ws(obj, vend);
        match obj.get(i) {
            Some(b',') => i = ws(obj, i + 1),
            Some(b'}') => return true,
            _ => return false,
        }
    }
}

/// The value of a top-level member of a JSON object, as raw JSON text.
pub fn member<'a>(obj: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let mut found = None;
    members(obj, |k, v| {
        if k == key.as_bytes() {
            found = Some(v);
            return false;
        }
        true
    });
    found
}

/// Decodes a JSON string value; None when v is not a string.
pub fn string(v: &[u8]) -> Option<String> {
    if v.len() < 2 || v[0] != b'"' || v[v.len() - 1] != b'"' {
        return None;
    }
    let raw = &v[1..v.len() - 1];
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let c = raw[i];
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let e = *raw.get(i + 1)?;
        i += 2;
        let b = match e {
            b'n' => b'\n',
            b't' => b'\t',
            b'r' => b'\r',
            b'b' => 8,
            b'f' => 12,
            b'u' => {
                let mut cp = hex4(raw, i)?;
                i += 4;
                if (0xD800..0xDC00).contains(&cp) && raw.get(i) == Some(&b'\\') && raw.get(i + 1) == Some(&b'u') {
                    if let Some(lo) = hex4(raw, i + 2) {
                        if (0xDC00..0xE000).contains(&lo) {
                            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                            i += 6;
                        }
                    }
                }
                let ch = char::from_u32(cp).unwrap_or('\u{FFFD}');
                let mut buf = [0u8; 4];
                out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                continue;
            }
            other => other,
        };
        out.push(b);
    }
    String::from_utf8(out).ok()
}

fn hex4(s: &[u8], i: usize) -> Option<u32> {
    let mut v = 0u32;
    for k in 0..4 {
        let c = *s.get(i + k)?;
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return None,
        };
        v = v << 4 | d as u32;
    }
    Some(v)
}

/// Calls f for each element of a JSON array; false when v is not one.
pub fn elems<'a>(v: &'a [u8], mut f: impl FnMut(&'a [u8])) -> bool {
    let mut i = ws(v, 0);
    if v.get(i) != Some(&b'[') {
        return false;
    }
    i = ws(v, i + 1);
    if v.get(i) == Some(&b']') {
        return true;
    }
    loop {
        let e = match skip_value(v, i) {
            Some(e) => e,
            None => return false,
        };
        f(&v[ws(v, i)..e]);
        i = ws(v, e);
        match v.get(i) {
            Some(b',') => i += 1,
            Some(b']') => return true,
            _ => return false,
        }
    }
}

/// Appends s as a JSON string (quotes included).
pub fn push_string(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    push_escaped(out, s.as_bytes());
    out.push(b'"');
}

/// Appends the bytes of a UTF-8 text escaped for the inside of a JSON
/// string.
pub fn push_escaped(out: &mut Vec<u8>, s: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            c if c < 0x20 => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(c >> 4) as usize]);
                out.push(HEX[(c & 15) as usize]);
            }
            c => out.push(c),
        }
    }
}

/// Whether v is the JSON literal true.
pub fn is_true(v: &[u8]) -> bool {
    v == b"true"
}

/// Whether name matches pattern: '*' matches any run of bytes, '?' one
/// byte (the host's attachment globs, guest/glob).
pub fn glob(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n, mut star_p, mut star_n) = (0, 0, usize::MAX, 0);
    while n < name.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star_p = p;
            star_n = n;
            p += 1;
        } else if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == name[n]) {
            p += 1;
            n += 1;
        } else if star_p != usize::MAX {
            star_n += 1;
            p = star_p + 1;
            n = star_n;
        } else {
            return false;
        }
    }
    while p < pattern.len() && pattern[p] == b'*' {
        p += 1;
    }
    p == pattern.len()
}
