// redact-secrets in AssemblyScript: the core rules of the Go module
// (wasm-examples/redact-secrets/redact) on the AssemblyScript kit, passing
// the same vectors (../vectors.json). Config: replacement, disable,
// arguments, results; tokens and literals are the Go module's only.
//
// It works on the JSON text as it is: matches never cross a quote, escape
// sequences count as word boundaries, replacements are JSON-escaped.
import { Buf, run, member, members, elems, isKey, isString, keyPtr, keyLen, valuePtr, valueLen } from "../../../guest/kits/as/edge";
export { edge_abi_version, edge_alloc } from "../../../guest/kits/as/edge";

const API_KEY = 0, BEARER = 1, JWT = 2, PRIVATE_KEY = 3, EMAIL = 4, CARD = 5, KINDS = 6;
const kinds: StaticArray<string> = ["api_key", "bearer", "jwt", "private_key", "email", "card"];

const repl: StaticArray<Buf> = [new Buf(), new Buf(), new Buf(), new Buf(), new Buf(), new Buf()];
const disabled = new StaticArray<bool>(6);
let noArguments = false, noResults = false, configured = false;
const buf = new Buf();

// setRepl builds the replacements from raw JSON string text (escapes kept).
function setRepl(r: usize, n: usize): void {
  for (let k = 0; k < KINDS; k++) {
    const b = repl[k];
    b.len = 0;
    for (let i: usize = 0; i < n; ) {
      if (n - i >= 6 && isKey(r + i, 6, "{kind}")) {
        b.ascii(kinds[k]);
        i += 6;
      } else {
        b.byte(load<u8>(r + i));
        i++;
      }
    }
  }
  configured = true;
}

function defaults(): void {
  if (!configured) {
    const d = new Buf();
    d.ascii("[REDACTED]");
    setRepl(d.ptr, d.len);
  }
}

let cfgErr: string | null = null;

function disableKind(): bool {
  for (let k = 0; k < KINDS; k++) {
    if (isString(valuePtr, valueLen, kinds[k])) {
      disabled[k] = true;
      return true;
    }
  }
  cfgErr = "config: unknown kind in disable (api_key, bearer, jwt, private_key, email, card)";
  return false;
}

function configMember(): bool {
  const v = valuePtr, vn = valueLen;
  if (isKey(keyPtr, keyLen, "replacement") && vn >= 2 && load<u8>(v) == 0x22) setRepl(v + 1, vn - 2);
  else if (isKey(keyPtr, keyLen, "disable")) {
    if (!elems(v, vn, disableKind) && cfgErr === null) cfgErr = "config: disable: want an array";
  } else if (isKey(keyPtr, keyLen, "arguments")) noArguments = isKey(v, vn, "false");
  else if (isKey(keyPtr, keyLen, "results")) noResults = isKey(v, vn, "false");
  else cfgErr = "config: unknown key (replacement, disable, arguments, results)";
  return cfgErr === null;
}

function configure(input: usize, n: usize, out: Buf): string | null {
  cfgErr = null;
  if (!members(input, n, configMember) && cfgErr === null) return "config: not a JSON object";
  return cfgErr;
}

function onToolCall(input: usize, n: usize, out: Buf): string | null {
  defaults();
  const args = member(input, n, "arguments");
  if (noArguments || args == 0) return null;
  const an = valueLen;
  buf.len = 0;
  if (redact(buf, args, an)) out.rewrite(buf.ptr, buf.len);
  return null;
}

function onResult(input: usize, n: usize, out: Buf): string | null {
  defaults();
  const r = member(input, n, "result");
  if (noResults || r == 0) return null;
  const rn = valueLen;
  out.ascii('{"result":');
  if (redact(out, r, rn)) out.byte(0x7d);
  else out.len = 0;
  return null;
}

export function edge_configure(ptr: i32, len: i32): i64 { return run(ptr, len, configure); }
export function edge_hook_tool_call(ptr: i32, len: i32): i64 { return run(ptr, len, onToolCall); }
export function edge_hook_tool_result(ptr: i32, len: i32): i64 { return run(ptr, len, onResult); }
export function edge_hook_resource_result(ptr: i32, len: i32): i64 { return run(ptr, len, onResult); }
export function edge_hook_prompt_result(ptr: i32, len: i32): i64 { return run(ptr, len, onResult); }

// Character classes, one bit each.
const ALNUM: u16 = 1, ALNUM_DASH: u16 = 2, B64: u16 = 4, HEX: u16 = 8, DOMAIN: u16 = 16, TOKEN: u16 = 32,
  UPPER_NUM: u16 = 64, EMAIL_LOCAL: u16 = 128;
const cls = new StaticArray<u16>(256);
let clsReady = false;

function within(c: i32, list: string): bool {
  for (let i = 0; i < list.length; i++) if (list.charCodeAt(i) == c) return true;
  return false;
}

function initClasses(): void {
  for (let c = 0; c < 256; c++) {
    const lower = c >= 0x61 && c <= 0x7a, upper = c >= 0x41 && c <= 0x5a, digit = c >= 0x30 && c <= 0x39;
    let v: u16 = 0;
    if (lower || upper || digit) v |= ALNUM | ALNUM_DASH | B64 | DOMAIN | TOKEN | EMAIL_LOCAL;
    if (c == 0x5f || c == 0x2d) v |= ALNUM_DASH | B64;
    if (within(c, "+/=")) v |= B64;
    if (digit || (c >= 0x61 && c <= 0x66) || (c >= 0x41 && c <= 0x46)) v |= HEX;
    if (c == 0x2d || c == 0x2e) v |= DOMAIN;
    if (within(c, "_-.~+/=")) v |= TOKEN;
    if (upper || digit) v |= UPPER_NUM;
    if (within(c, "._%+-")) v |= EMAIL_LOCAL;
    cls[c] = v;
  }
  initPairs();
  clsReady = true;
}

// The first two bytes of every pattern: a match can start at p only if
// need[s[p]] & next[s[p+1]] != 0 (sk rk gh gi xo AK AS AI ey be/BE, two
// digits, two dashes, '@' and a letter or digit). redact skips eight
// positions at a time where no pair fits.
const NK: u16 = 1, NHI: u16 = 2, NO: u16 = 4, NKSI: u16 = 8, NY: u16 = 16, NE: u16 = 32, NDIGIT: u16 = 64,
  NDASH: u16 = 128, NALNUM: u16 = 256;
const need = new StaticArray<u16>(256);
const next = new StaticArray<u16>(256);

function initPairs(): void {
  need[0x73] = need[0x72] = NK; // s r
  need[0x67] = NHI; // g
  need[0x78] = NO; // x
  need[0x41] = NKSI; // A
  need[0x65] = NY; // e
  need[0x42] = need[0x62] = NE; // B b
  for (let c = 0x32; c <= 0x36; c++) need[c] = NDIGIT;
  need[0x2d] = NDASH;
  need[0x40] = NALNUM; // @
  next[0x6b] = NK; // k
  next[0x68] = next[0x69] = NHI; // h i
  next[0x6f] = NO; // o
  next[0x4b] = next[0x53] = next[0x49] = NKSI; // K S I
  next[0x79] = NY; // y
  next[0x65] = next[0x45] = NE; // e E
  next[0x2d] = NDASH;
  for (let c = 0; c < 256; c++) {
    if (c >= 0x30 && c <= 0x39) next[c] |= NDIGIT;
    if (cls[c] & ALNUM) next[c] |= NALNUM;
  }
}

// @ts-ignore: decorator
@inline function pair(s: usize, i: usize): u16 {
  return unchecked(need[load<u8>(s + i)]) & unchecked(next[load<u8>(s + i + 1)]);
}

// @ts-ignore: decorator
@inline function is(c: u8, set: u16): bool {
  return (unchecked(cls[c]) & set) != 0;
}

// @ts-ignore: decorator
@inline function ch(s: usize, i: usize): u8 {
  return load<u8>(s + i);
}

// Memoised runs per character set: linear time on long runs.
const runFrom = new StaticArray<usize>(8);
const runEnd = new StaticArray<usize>(8);

function run_(s: usize, n: usize, i: usize, set: u16): usize {
  const id = <i32>ctz<u32>(set);
  if (runEnd[id] != 0 && i >= runFrom[id] && i <= runEnd[id]) return runEnd[id];
  let e = i;
  while (e < n && is(ch(s, e), set)) e++;
  runFrom[id] = i;
  runEnd[id] = e;
  return e;
}

function tail(s: usize, n: usize, i: usize, min: usize, set: u16): usize {
  const e = run_(s, n, i, set);
  return e >= i + min ? e : 0;
}

function at(s: usize, n: usize, i: usize, c: u8): bool {
  return i < n && ch(s, i) == c;
}

function has(s: usize, n: usize, i: usize, lit: string): bool {
  return n >= i && n - i >= <usize>lit.length && isKey(s + i, <usize>lit.length, lit);
}

function escaped(s: usize, p: usize): bool {
  let k: usize = 0;
  while (p > k && ch(s, p - k - 1) == 0x5c && k < 64) k++;
  return k % 2 == 1;
}

function wordStart(s: usize, p: usize): bool {
  if (p == 0) return true;
  const c = ch(s, p - 1);
  if (c == 0x5c) return false;
  if (!is(c, ALNUM) && c != 0x5f) return true;
  if (p >= 2 && ch(s, p - 2) == 0x5c && (c == 0x6e || c == 0x74 || c == 0x72 || c == 0x62 || c == 0x66)) return true;
  return p >= 6 && ch(s, p - 6) == 0x5c && ch(s, p - 5) == 0x75 && is(ch(s, p - 4), HEX) && is(ch(s, p - 3), HEX) &&
    is(ch(s, p - 2), HEX) && is(c, HEX);
}

function boundaryAt(s: usize, n: usize, i: usize): bool {
  return i >= n || (!is(ch(s, i), ALNUM) && ch(s, i) != 0x5f);
}

function apiKey(s: usize, n: usize, i: usize): usize {
  const c = ch(s, i);
  if ((c == 0x73 || c == 0x72) && at(s, n, i + 1, 0x6b)) { // sk rk
    if (c == 0x73 && at(s, n, i + 2, 0x2d)) return tail(s, n, i + 3, 20, ALNUM_DASH);
    if (at(s, n, i + 2, 0x5f) && (has(s, n, i + 3, "live_") || has(s, n, i + 3, "test_"))) return tail(s, n, i + 8, 16, ALNUM);
  } else if (c == 0x67) { // g
    if (at(s, n, i + 1, 0x68) && at(s, n, i + 3, 0x5f) && within(ch(s, i + 2), "pousr")) {
      const e = run_(s, n, i + 4, ALNUM);
      if (e >= i + 34 && boundaryAt(s, n, e)) return e;
    }
    if (has(s, n, i, "github_pat_")) return tail(s, n, i + 11, 22, ALNUM_DASH);
  } else if (c == 0x78) { // x
    if (at(s, n, i + 1, 0x6f) && at(s, n, i + 2, 0x78) && at(s, n, i + 4, 0x2d) && i + 3 < n && within(ch(s, i + 3), "bpars"))
      return tail(s, n, i + 5, 10, ALNUM_DASH);
  } else if (c == 0x41 && i + 4 <= n) { // A
    const c1 = ch(s, i + 1);
    if ((c1 == 0x4b || c1 == 0x53) && ch(s, i + 2) == 0x49 && ch(s, i + 3) == 0x41) {
      const e = run_(s, n, i + 4, UPPER_NUM);
      if (e == i + 20 && boundaryAt(s, n, e)) return e;
    }
    if (has(s, n, i + 1, "Iza")) return tail(s, n, i + 4, 35, ALNUM_DASH);
  }
  return 0;
}

function jwt(s: usize, n: usize, i: usize): usize {
  if (!at(s, n, i + 1, 0x79) || !at(s, n, i + 2, 0x4a)) return 0;
  const e = run_(s, n, i + 3, ALNUM_DASH);
  if (e - i < 10 || !at(s, n, e, 0x2e)) return 0;
  let p = run_(s, n, e + 1, ALNUM_DASH);
  if (p - (e + 1) < 10) return 0;
  if (at(s, n, p, 0x2e)) p = run_(s, n, p + 1, ALNUM_DASH);
  return p;
}

let matchStart: usize = 0;

function bearer(s: usize, n: usize, i: usize): usize {
  if (i + 7 > n || (ch(s, i + 6) != 0x20 && ch(s, i + 6) != 0x09)) return 0;
  const word = "bearer";
  for (let k = 0; k < 6; k++) if ((ch(s, i + k) | 0x20) != <u8>word.charCodeAt(k)) return 0;
  let j = i + 6;
  while (j < n && j - i < 14 && (ch(s, j) == 0x20 || ch(s, j) == 0x09)) j++;
  const e = run_(s, n, j, TOKEN);
  if (e - j < 16) return 0;
  matchStart = j;
  return e;
}

function upperOrSpace(c: u8): bool {
  return (c >= 0x41 && c <= 0x5a) || c == 0x20;
}

function pemBlock(s: usize, n: usize, i: usize): usize {
  if (!has(s, n, i, "-----BEGIN ")) return 0;
  const j = i + 11;
  let k = j;
  while (k < n && k - j < 40 && upperOrSpace(ch(s, k))) k++;
  if (k - j < 11 || !isKey(s + k - 11, 11, "PRIVATE KEY") || !has(s, n, k, "-----")) return 0;
  for (let e = k + 5; e < n; e++) {
    const c = ch(s, e);
    if (c == 0x5c) e++;
    else if (c == 0x22) return e;
    else if (c == 0x2d && has(s, n, e, "-----END ")) {
      e += 9;
      while (e < n && upperOrSpace(ch(s, e))) e++;
      if (has(s, n, e, "-----")) e += 5;
      return e;
    }
  }
  return n;
}

function email(s: usize, n: usize, at_: usize, floor: usize): usize {
  let start = at_;
  while (start > floor && is(ch(s, start - 1), EMAIL_LOCAL) && at_ - start < 64) start--;
  while (start < at_ && escaped(s, start)) start += ch(s, start) == 0x75 ? 5 : 1;
  while (start < at_ && (ch(s, start) == 0x2e || ch(s, start) == 0x2d)) start++;
  if (start >= at_) return 0;
  let end = run_(s, n, at_ + 1, DOMAIN);
  while (end > at_ + 1 && (ch(s, end - 1) == 0x2e || ch(s, end - 1) == 0x2d)) end--;
  if (end == at_ + 1 || ch(s, at_ + 1) == 0x2e || ch(s, at_ + 1) == 0x2d) return 0;
  let dot: usize = 0;
  for (let k = at_ + 1; k < end; k++) {
    if (ch(s, k) == 0x2e) {
      if (ch(s, k - 1) == 0x2e) return 0;
      dot = k;
    }
  }
  if (dot == 0 || end - dot - 1 < 2) return 0;
  for (let k = dot + 1; k < end; k++) {
    const c = ch(s, k) | 0x20;
    if (c < 0x61 || c > 0x7a) return 0;
  }
  matchStart = start;
  return end;
}

const digits = new StaticArray<u8>(19);

function card(s: usize, n: usize, i: usize): usize {
  let nd = 0, group = 0, j = i;
  let sep: u8 = 0;
  while (j < n) {
    const c = ch(s, j);
    if (c >= 0x30 && c <= 0x39) {
      if (nd == 19) return 0;
      digits[nd++] = c - 0x30;
      group++;
      j++;
      continue;
    }
    if ((c == 0x20 || c == 0x2d) && group >= 3 && j + 1 < n && ch(s, j + 1) >= 0x30 && ch(s, j + 1) <= 0x39 && (sep == 0 || sep == c)) {
      sep = c;
      group = 0;
      j++;
      continue;
    }
    break;
  }
  if (nd < 13 || group < 3 || !boundaryAt(s, n, j) || digits[0] < 2 || digits[0] > 6) return 0;
  let sum = 0;
  for (let k = 0; k < nd; k++) {
    let d = <i32>digits[nd - 1 - k];
    if (k % 2 == 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 == 0 ? j : 0;
}

let matchKind = 0;

// matchAt tries every pattern at s[p]; returns the match's end (0: none),
// its start in matchStart and its kind in matchKind.
function matchAt(s: usize, n: usize, p: usize, last: usize): usize {
  const c = ch(s, p);
  matchStart = p;
  if (p > 0 && escaped(s, p)) return 0;
  if (c == 0x40) {
    matchKind = EMAIL;
    return disabled[EMAIL] ? 0 : email(s, n, p, last);
  }
  if (!wordStart(s, p)) return 0;
  if (c >= 0x32 && c <= 0x36) {
    matchKind = CARD;
    return disabled[CARD] ? 0 : card(s, n, p);
  }
  if (c == 0x2d) {
    matchKind = PRIVATE_KEY;
    return disabled[PRIVATE_KEY] ? 0 : pemBlock(s, n, p);
  }
  if (c == 0x65) {
    matchKind = JWT;
    return disabled[JWT] ? 0 : jwt(s, n, p);
  }
  if (c == 0x42 || c == 0x62) {
    matchKind = BEARER;
    return disabled[BEARER] ? 0 : bearer(s, n, p);
  }
  matchKind = API_KEY;
  return disabled[API_KEY] ? 0 : apiKey(s, n, p);
}

// redact appends [s, s+n) with every secret masked to dst; false (and
// nothing appended) when there was none.
function redact(dst: Buf, s: usize, n: usize): bool {
  if (!clsReady) initClasses();
  for (let k = 0; k < 8; k++) {
    runFrom[k] = 0;
    runEnd[k] = 0;
  }
  const mark = dst.len;
  let last: usize = 0, p: usize = 0;
  let changed = false;
  while (p + 1 < n) {
    // Positions [p, stop) are looked at one by one.
    let stop = n - 1;
    if (p + 9 <= n) {
      if ((pair(s, p) | pair(s, p + 1) | pair(s, p + 2) | pair(s, p + 3) | pair(s, p + 4) | pair(s, p + 5) |
        pair(s, p + 6) | pair(s, p + 7)) == 0) {
        p += 8;
        continue;
      }
      stop = p + 8;
    }
    while (p < stop) {
      if (pair(s, p) == 0) {
        p++;
        continue;
      }
      const end = matchAt(s, n, p, last);
      if (end != 0) {
        const r = repl[matchKind];
        dst.append(s + last, matchStart - last);
        dst.append(r.ptr, r.len);
        last = p = end;
        changed = true;
        break;
      }
      p++;
    }
  }
  if (!changed) {
    dst.len = mark;
    return false;
  }
  dst.append(s + last, n - last);
  return true;
}
