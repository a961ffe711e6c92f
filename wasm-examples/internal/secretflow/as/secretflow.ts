// secretflow in AssemblyScript: the secret formats and the JSON string walk
// of wasm-examples/internal/secretflow (as its C build, ../c), on the
// AssemblyScript kit (guest/kits/as). What it finds is reported through
// the globals below: AssemblyScript has no closures.
import { Buf, skip } from "../../../../guest/kits/as/edge";

// The formats, as secretflow.Formats.
export const FORMATS = 7;
export const formatIds: StaticArray<string> = [
  "stripe_secret_live", "stripe_pub_live", "github_pat", "github_oauth", "aws_access_key", "slack_bot", "slack_refresh",
];
const prefixes: StaticArray<string> = ["sk_live_", "pk_live_", "ghp_", "gho_", "AKIA", "xoxb-", "xoxr-"];
const mins: StaticArray<i32> = [16, 16, 20, 20, 16, 10, 10];
const maxs: StaticArray<i32> = [0, 0, 0, 0, 16, 0, 0];
// sets: 0 letters and digits, 1 upper-case letters and digits, 2 letters, digits and '-'.
const sets: StaticArray<i32> = [0, 0, 0, 0, 1, 2, 2];

function inSet(set: i32, c: u8): bool {
  const upper = c >= 0x41 && c <= 0x5a, digit = c >= 0x30 && c <= 0x39, lower = c >= 0x61 && c <= 0x7a;
  if (set == 1) return upper || digit;
  return upper || digit || lower || (set == 2 && c == 0x2d);
}

// match returns the length of the token of format f at s[i:], or 0.
function match(f: i32, s: usize, n: usize, i: usize): usize {
  const pre = prefixes[f];
  const pn = <usize>pre.length;
  if (n - i < pn) return 0;
  for (let k: usize = 0; k < pn; k++) if (load<u8>(s + i + k) != <u8>pre.charCodeAt(<i32>k)) return 0;
  const j = i + pn;
  let k = j;
  const max = <usize>maxs[f];
  while (k < n && inSet(sets[f], load<u8>(s + k)) && (max == 0 || k - j < max)) k++;
  return k - j < <usize>mins[f] ? 0 : k - i;
}

// The secret find reports: its format and where it is.
export let hitFormat: i32 = 0;
export let hitOff: usize = 0;
export let hitLen: usize = 0;

// find calls fn for every secret in [s, s+n), in order of position, with
// hitFormat/hitOff/hitLen set, until it returns false.
export function find(s: usize, n: usize, fn: () => bool): void {
  for (let i: usize = 0; i < n; i++) {
    const c = load<u8>(s + i);
    if (c != 0x73 && c != 0x70 && c != 0x67 && c != 0x41 && c != 0x78) continue; // s p g A x
    for (let f = 0; f < FORMATS; f++) {
      const m = match(f, s, n, i);
      if (m != 0) {
        hitFormat = f;
        hitOff = i;
        hitLen = m;
        if (!fn()) return;
        i += m - 1;
        break;
      }
    }
  }
}

function hexVal(c: u8): i32 {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  return -1;
}

function hex4(s: usize, n: usize, i: usize): i32 {
  if (n - i < 4) return -1;
  let v = 0;
  for (let k: usize = 0; k < 4; k++) {
    const h = hexVal(load<u8>(s + i + k));
    if (h < 0) return -1;
    v = (v << 4) | h;
  }
  return v;
}

function putUTF8(b: Buf, r: u32): void {
  if (r < 0x80) b.byte(<u8>r);
  else if (r < 0x800) {
    b.byte(<u8>(0xc0 | (r >> 6)));
    b.byte(<u8>(0x80 | (r & 63)));
  } else if (r < 0x10000) {
    b.byte(<u8>(0xe0 | (r >> 12)));
    b.byte(<u8>(0x80 | ((r >> 6) & 63)));
    b.byte(<u8>(0x80 | (r & 63)));
  } else {
    b.byte(<u8>(0xf0 | (r >> 18)));
    b.byte(<u8>(0x80 | ((r >> 12) & 63)));
    b.byte(<u8>(0x80 | ((r >> 6) & 63)));
    b.byte(<u8>(0x80 | (r & 63)));
  }
}

// unquote decodes the inside of a JSON string [s, s+n) into out (reset
// first).
export function unquote(out: Buf, s: usize, n: usize): void {
  out.len = 0;
  for (let i: usize = 0; i < n; i++) {
    const c = load<u8>(s + i);
    if (c != 0x5c || i + 1 >= n) {
      out.byte(c);
      continue;
    }
    const e = load<u8>(s + ++i);
    if (e == 0x75) { // \\u
      let r = hex4(s, n, i + 1);
      if (r < 0) {
        out.byte(e);
        continue;
      }
      i += 4;
      if (r >= 0xd800 && r < 0xdc00 && n - i > 6 && load<u8>(s + i + 1) == 0x5c && load<u8>(s + i + 2) == 0x75) {
        const lo = hex4(s, n, i + 3);
        if (lo >= 0xdc00 && lo < 0xe000) {
          r = 0x10000 + (((r - 0xd800) << 10) | (lo - 0xdc00));
          i += 6;
        }
      }
      if (r >= 0xd800 && r < 0xe000) r = 0xfffd;
      putUTF8(out, <u32>r);
      continue;
    }
    if (e == 0x62) out.byte(0x08);
    else if (e == 0x66) out.byte(0x0c);
    else if (e == 0x6e) out.byte(0x0a);
    else if (e == 0x72) out.byte(0x0d);
    else if (e == 0x74) out.byte(0x09);
    else out.byte(e);
  }
}

function skipWS(s: usize, n: usize, i: usize): usize {
  while (i < n) {
    const c = load<u8>(s + i);
    if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
    i++;
  }
  return i;
}

const decoded = new Buf();

// The string strings reports: its decoded text, and the span [strStart,
// strEnd) of its token (quotes included) in the document.
export let strPtr: usize = 0;
export let strLen: usize = 0;
export let strStart: usize = 0;
export let strEnd: usize = 0;

// strings calls fn with every string value (not object keys) of the JSON
// document [doc, doc+n), until fn returns false. It returns false when doc
// is not one JSON value.
export function strings(doc: usize, n: usize, fn: () => bool): bool {
  const e = skip(doc, n, 0);
  if (e == 0 || skipWS(doc, n, e) != n) return false;
  for (let i: usize = 0; i < e; i++) {
    if (load<u8>(doc + i) != 0x22) continue;
    const start = i, end = skip(doc, n, i);
    let esc = false;
    for (let k = start + 1; k + 1 < end; k++) if (load<u8>(doc + k) == 0x5c) esc = true;
    i = end - 1;
    const next = skipWS(doc, n, end);
    if (next < n && load<u8>(doc + next) == 0x3a) continue; // a key
    strPtr = doc + start + 1;
    strLen = end - start - 2;
    if (esc) {
      unquote(decoded, strPtr, strLen);
      strPtr = decoded.ptr;
      strLen = decoded.len;
    }
    strStart = start;
    strEnd = end;
    if (!fn()) return true;
  }
  return true;
}
