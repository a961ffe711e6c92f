// The edge-mcp policy kit for AssemblyScript: the ABI glue of
// policy/ABI.md (1.1: hooks, and SEP-2624 interceptors below) and small JSON helpers working on raw memory (no
// managed strings on the hot path).
//
// The policy's entry file re-exports the glue and exports its hooks:
//
//   import { Buf, run, member, valueLen, isString } from "./edge";
//   export { edge_abi_version, edge_alloc } from "./edge";
//   function onCall(input: usize, n: usize, out: Buf): string | null {
//     const tool = member(input, n, "tool");
//     if (tool != 0 && isString(tool, valueLen, "delete_repo")) out.deny("deleting repositories is not allowed");
//     return null;
//   }
//   export function edge_hook_tool_call(ptr: i32, len: i32): i64 { return run(ptr, len, onCall); }
//
// Build: asc policy.ts --runtime incremental --use abort= -O3 --noAssert --uncheckedBehavior always -o policy.wasm
// (--use abort= drops the env.abort import the sandbox does not allow).
//
// A handler gets the hook input (a JSON object, see ABI.md) at [input,
// input+n) and an empty output buffer: leaving it empty means allow /
// unchanged; returning a message reports {"error":message}. Export only the
// hooks you implement: the host calls exactly those.

export const ABI_VERSION: i32 = 0x00010001;

export function edge_abi_version(): i32 {
  return ABI_VERSION;
}

let inputPtr: usize = 0;
let inputCap: usize = 0;

// A region of at least size bytes for the host's input, the host's until
// the next call.
export function edge_alloc(size: i32): i32 {
  const want = <usize>max(size, 1);
  if (want > inputCap) {
    if (inputPtr != 0) heap.free(inputPtr);
    inputPtr = heap.alloc(want);
    inputCap = want;
  }
  return <i32>inputPtr;
}

// A growable byte buffer in unmanaged memory.
export class Buf {
  ptr: usize = 0;
  len: usize = 0;
  cap: usize = 0;

  grow(n: usize): void {
    if (this.len + n <= this.cap) return;
    let cap = this.cap ? this.cap * 2 : 256;
    while (cap < this.len + n) cap *= 2;
    this.ptr = this.ptr ? heap.realloc(this.ptr, cap) : heap.alloc(cap);
    this.cap = cap;
  }

  // append copies n bytes at p.
  append(p: usize, n: usize): void {
    this.grow(n);
    memory.copy(this.ptr + this.len, p, n);
    this.len += n;
  }

  byte(c: u8): void {
    this.grow(1);
    store<u8>(this.ptr + this.len, c);
    this.len++;
  }

  // ascii appends a string of ASCII characters as is (JSON syntax).
  ascii(s: string): void {
    const n = <usize>s.length;
    this.grow(n);
    for (let i: usize = 0; i < n; i++) store<u8>(this.ptr + this.len + i, <u8>s.charCodeAt(<i32>i));
    this.len += n;
  }

  // escaped appends n bytes of UTF-8 text escaped for a JSON string.
  escaped(p: usize, n: usize): void {
    for (let i: usize = 0; i < n; i++) {
      const c = load<u8>(p + i);
      if (c == 0x22 || c == 0x5c) {
        this.byte(0x5c);
        this.byte(c);
      } else if (c == 0x0a) this.ascii("\\n");
      else if (c == 0x0d) this.ascii("\\r");
      else if (c == 0x09) this.ascii("\\t");
      else if (c < 0x20) {
        this.ascii("\\u00");
        this.byte(hexDigit(c >> 4));
        this.byte(hexDigit(c & 15));
      } else this.byte(c);
    }
  }

  // str appends s as a JSON string.
  str(s: string): void {
    const b = String.UTF8.encode(s);
    this.byte(0x22);
    this.escaped(changetype<usize>(b), <usize>b.byteLength);
    this.byte(0x22);
  }

  deny(reason: string): void {
    this.ascii('{"action":"deny","reason":');
    this.str(reason);
    this.byte(0x7d);
  }

  // rewrite: args is a JSON object at [p, p+n).
  rewrite(p: usize, n: usize): void {
    this.ascii('{"action":"rewrite","arguments":');
    this.append(p, n);
    this.byte(0x7d);
  }

  route(server: string): void {
    this.ascii('{"action":"route","server":');
    this.str(server);
    this.byte(0x7d);
  }

  // result: a replacement result for the *_result hooks.
  result(p: usize, n: usize): void {
    this.ascii('{"result":');
    this.append(p, n);
    this.byte(0x7d);
  }

  // refuse answers a validator's call (interceptors): not valid, with
  // message.
  refuse(message: string): void {
    this.ascii('{"valid":false,"severity":"error","messages":[{"message":');
    this.str(message);
    this.ascii(',"severity":"error"}]}');
  }

  // replace answers a mutator's call (interceptors): the new payload, a
  // JSON value at [p, p+n).
  replace(p: usize, n: usize): void {
    this.ascii('{"modified":true,"payload":');
    this.append(p, n);
    this.byte(0x7d);
  }
}

function hexDigit(d: u8): u8 {
  return d < 10 ? 0x30 + d : 0x57 + d;
}

export type Handler = (input: usize, n: usize, out: Buf) => string | null;

const output = new Buf();

// run runs h on the input at [ptr, ptr+len) and packs its output as the
// ABI wants: (ptr << 32) | len, 0 for none.
export function run(ptr: i32, len: i32, h: Handler): i64 {
  output.len = 0;
  const err = h(<usize>ptr, <usize>max(len, 0), output);
  if (err !== null) {
    output.len = 0;
    output.ascii('{"error":');
    output.str(err);
    output.byte(0x7d);
  }
  if (output.len == 0) return 0;
  return (<i64>output.ptr << 32) | <i64>output.len;
}

// JSON helpers, on the text as it is.

function ws(s: usize, n: usize, i: usize): usize {
  while (i < n) {
    const c = load<u8>(s + i);
    if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
    i++;
  }
  return i;
}

// skip returns the end of the JSON value at s[i] (after white space), or 0
// when it is malformed.
export function skip(s: usize, n: usize, i: usize): usize {
  i = ws(s, n, i);
  if (i >= n) return 0;
  const first = load<u8>(s + i);
  if (first == 0x22) {
    for (i++; i < n; i++) {
      const c = load<u8>(s + i);
      if (c == 0x5c) i++;
      else if (c == 0x22) return i + 1;
    }
    return 0;
  }
  if (first == 0x7b || first == 0x5b) {
    let depth = 0;
    while (i < n) {
      const c = load<u8>(s + i);
      if (c == 0x22) {
        i = skip(s, n, i);
        if (i == 0) return 0;
        continue;
      }
      if (c == 0x7b || c == 0x5b) depth++;
      else if (c == 0x7d || c == 0x5d) {
        depth--;
        if (depth == 0) return i + 1;
      }
      i++;
    }
    return 0;
  }
  const start = i;
  while (i < n) {
    const c = load<u8>(s + i);
    if (c == 0x2c || c == 0x7d || c == 0x5d || c == 0x20 || c == 0x09 || c == 0x0a || c == 0x0d) break;
    i++;
  }
  return i > start ? i : 0;
}

// The key and value members() reports (AssemblyScript has no closures:
// callbacks read these).
export let keyPtr: usize = 0;
export let keyLen: usize = 0;
export let valuePtr: usize = 0;
export let valueLen: usize = 0;

// members calls f for each member of the object at [obj, obj+n), with
// keyPtr/keyLen (the raw text between the quotes) and valuePtr/valueLen
// set, until f returns false. It returns false when obj is not an object.
export function members(obj: usize, n: usize, f: () => bool): bool {
  let i = ws(obj, n, 0);
  if (i >= n || load<u8>(obj + i) != 0x7b) return false;
  i = ws(obj, n, i + 1);
  if (i < n && load<u8>(obj + i) == 0x7d) return true;
  while (true) {
    if (i >= n || load<u8>(obj + i) != 0x22) return false;
    const kend = skip(obj, n, i);
    if (kend == 0) return false;
    const k = i + 1;
    const kn = kend - 1 - k;
    i = ws(obj, n, kend);
    if (i >= n || load<u8>(obj + i) != 0x3a) return false;
    const vs = ws(obj, n, i + 1);
    const ve = skip(obj, n, vs);
    if (ve == 0) return false;
    keyPtr = obj + k;
    keyLen = kn;
    valuePtr = obj + vs;
    valueLen = ve - vs;
    if (!f()) return true;
    i = ws(obj, n, ve);
    if (i < n && load<u8>(obj + i) == 0x2c) i = ws(obj, n, i + 1);
    else if (i < n && load<u8>(obj + i) == 0x7d) return true;
    else return false;
  }
}

// isKey reports whether the raw text [p, p+n) is the ASCII string lit.
export function isKey(p: usize, n: usize, lit: string): bool {
  if (n != <usize>lit.length) return false;
  for (let i: usize = 0; i < n; i++) if (load<u8>(p + i) != <u8>lit.charCodeAt(<i32>i)) return false;
  return true;
}

// isString reports whether the JSON value [p, p+n) is the string lit
// (ASCII, compared as written).
export function isString(p: usize, n: usize, lit: string): bool {
  return n >= 2 && load<u8>(p) == 0x22 && load<u8>(p + n - 1) == 0x22 && isKey(p + 1, n - 2, lit);
}

// member returns the address of the value of a top-level member of the
// object at [obj, obj+n) (its length in valueLen), or 0.
export function member(obj: usize, n: usize, key: string): usize {
  let i = ws(obj, n, 0);
  if (i >= n || load<u8>(obj + i) != 0x7b) return 0;
  i = ws(obj, n, i + 1);
  while (i < n && load<u8>(obj + i) == 0x22) {
    const kend = skip(obj, n, i);
    if (kend == 0) return 0;
    const found = isKey(obj + i + 1, kend - i - 2, key);
    i = ws(obj, n, kend);
    if (i >= n || load<u8>(obj + i) != 0x3a) return 0;
    const vs = ws(obj, n, i + 1);
    const ve = skip(obj, n, vs);
    if (ve == 0) return 0;
    if (found) {
      valueLen = ve - vs;
      return obj + vs;
    }
    i = ws(obj, n, ve);
    if (i >= n || load<u8>(obj + i) != 0x2c) return 0;
    i = ws(obj, n, i + 1);
  }
  return 0;
}

// elems calls f for each element of the array at [v, v+n), with
// valuePtr/valueLen set, until f returns false; false when v is not one.
export function elems(v: usize, n: usize, f: () => bool): bool {
  let i = ws(v, n, 0);
  if (i >= n || load<u8>(v + i) != 0x5b) return false;
  i = ws(v, n, i + 1);
  if (i < n && load<u8>(v + i) == 0x5d) return true;
  while (true) {
    const e = skip(v, n, i);
    if (e == 0) return false;
    valuePtr = v + ws(v, n, i);
    valueLen = e - ws(v, n, i);
    if (!f()) return true;
    i = ws(v, n, e);
    if (i < n && load<u8>(v + i) == 0x2c) i = ws(v, n, i + 1);
    else if (i < n && load<u8>(v + i) == 0x5d) return true;
    else return false;
  }
}

// glob reports whether name [n, n+nn) matches pattern [p, p+pn): '*'
// matches any run of bytes, '?' one byte (the host's attachment globs).
export function glob(p: usize, pn: usize, n: usize, nn: usize): bool {
  let i: usize = 0, j: usize = 0, starI: isize = -1, starJ: usize = 0;
  while (j < nn) {
    const c = i < pn ? load<u8>(p + i) : 0;
    if (i < pn && c == 0x2a) {
      starI = <isize>i;
      starJ = j;
      i++;
    } else if (i < pn && (c == 0x3f || c == load<u8>(n + j))) {
      i++;
      j++;
    } else if (starI >= 0) {
      starJ++;
      i = <usize>starI + 1;
      j = starJ;
    } else return false;
  }
  while (i < pn && load<u8>(p + i) == 0x2a) i++;
  return i == pn;
}

// SEP-2624 interceptors (ABI 1.1). A module declares its interceptors in
// an array and exports the two hooks of the interceptor ABI:
//
//   import { Buf, Interceptor, Invocation, listInterceptors, intercept, member, isString, valueLen } from "./edge";
//   function noDelete(inv: Invocation, out: Buf): string | null {
//     const name = member(inv.payload.ptr, inv.payload.len, "name");
//     if (name != 0 && isString(name, valueLen, "delete_repo")) out.refuse("deleting repositories is not allowed");
//     return null;
//   }
//   const ics: Interceptor[] = [new Interceptor("acme/no-delete", false, ["tools/call"], "request", noDelete)];
//   export function edge_hook_interceptors(ptr: i32, len: i32): i64 { return listInterceptors(ics); }
//   export function edge_hook_intercept(ptr: i32, len: i32): i64 { return intercept(ptr, len, ics); }
//
// A validator leaves out empty (valid) or calls out.refuse; a mutator
// leaves it empty (unmodified) or calls out.replace. Returning a message
// reports {"error":message}. Interceptor names are compared as ASCII.

// A raw span of the input: for strings the text between the quotes
// (escapes kept), else the JSON value; ptr is 0 when the member is absent.
export class Str {
  ptr: usize = 0;
  len: usize = 0;

  // is reports whether the span is the ASCII string lit.
  is(lit: string): bool {
    return this.ptr != 0 && isKey(this.ptr, this.len, lit);
  }
}

// One call of an interceptor.
export class Invocation {
  name: Str = new Str();
  event: Str = new Str();
  phase: Str = new Str();
  sessionId: Str = new Str(); // from context
  server: Str = new Str(); // from context
  principal: Str = new Str(); // context.principal.id
  context: Str = new Str(); // raw JSON
  config: Str = new Str(); // raw JSON
  payload: Str = new Str(); // raw JSON
}

export type InterceptFn = (inv: Invocation, out: Buf) => string | null;

// An interceptor descriptor (the wire shape of interceptors/list).
export class Interceptor {
  description: string | null = null;
  mode: string | null = null; // null (active) or "audit"
  failOpen: bool = false;
  priority: i32 = 0; // priorityHint
  configSchema: string | null = null; // a JSON Schema object

  // phase: "request", "response" or "both".
  constructor(public name: string, public mutation: bool, public events: string[], public phase: string, public fn: InterceptFn) {}
}

function appendInterceptor(b: Buf, ic: Interceptor): void {
  b.ascii('{"name":');
  b.str(ic.name);
  const d = ic.description;
  if (d !== null) {
    b.ascii(',"description":');
    b.str(d);
  }
  b.ascii(ic.mutation ? ',"type":"mutation"' : ',"type":"validation"');
  b.ascii(',"hooks":[{"events":[');
  for (let i = 0; i < ic.events.length; i++) {
    if (i > 0) b.byte(0x2c);
    b.str(ic.events[i]);
  }
  b.ascii('],"phase":');
  b.str(ic.phase);
  b.ascii("}]");
  const m = ic.mode;
  if (m !== null) {
    b.ascii(',"mode":');
    b.str(m);
  }
  if (ic.failOpen) b.ascii(',"failOpen":true');
  if (ic.priority != 0) {
    b.ascii(',"priorityHint":');
    b.ascii(ic.priority.toString());
  }
  const cs = ic.configSchema;
  if (cs !== null) {
    b.ascii(',"configSchema":');
    b.ascii(cs);
  }
  b.byte(0x7d);
}

// listInterceptors answers edge_hook_interceptors.
export function listInterceptors(ics: Interceptor[]): i64 {
  output.len = 0;
  output.ascii('{"interceptors":[');
  for (let i = 0; i < ics.length; i++) {
    if (i > 0) output.byte(0x2c);
    appendInterceptor(output, ics[i]);
  }
  output.ascii("]}");
  return (<i64>output.ptr << 32) | <i64>output.len;
}

const inv = new Invocation();
let interceptors: Interceptor[] = [];

// span sets dst to the contents of the JSON string [v, v+n); false when v
// is not a string.
function span(dst: Str, v: usize, n: usize, quoted: bool): bool {
  if (!quoted) {
    dst.ptr = v;
    dst.len = n;
    return true;
  }
  if (n < 2 || load<u8>(v) != 0x22) return false;
  dst.ptr = v + 1;
  dst.len = n - 2;
  return true;
}

let badInvocation = false;

function contextMember(): bool {
  let ok = true;
  if (isKey(keyPtr, keyLen, "sessionId")) ok = span(inv.sessionId, valuePtr, valueLen, true);
  else if (isKey(keyPtr, keyLen, "server")) ok = span(inv.server, valuePtr, valueLen, true);
  else if (isKey(keyPtr, keyLen, "principal")) {
    const id = member(valuePtr, valueLen, "id");
    ok = id == 0 || span(inv.principal, id, valueLen, true);
  }
  if (!ok) badInvocation = true;
  return ok;
}

function invocationMember(): bool {
  let ok = true;
  if (isKey(keyPtr, keyLen, "name")) ok = span(inv.name, valuePtr, valueLen, true);
  else if (isKey(keyPtr, keyLen, "event")) ok = span(inv.event, valuePtr, valueLen, true);
  else if (isKey(keyPtr, keyLen, "phase")) ok = span(inv.phase, valuePtr, valueLen, true);
  else if (isKey(keyPtr, keyLen, "config")) span(inv.config, valuePtr, valueLen, false);
  else if (isKey(keyPtr, keyLen, "payload")) span(inv.payload, valuePtr, valueLen, false);
  else if (isKey(keyPtr, keyLen, "context")) {
    span(inv.context, valuePtr, valueLen, false);
    ok = members(valuePtr, valueLen, contextMember) && !badInvocation;
  }
  if (!ok) badInvocation = true;
  return ok;
}

function clear(s: Str): void {
  s.ptr = 0;
  s.len = 0;
}

function interceptHandler(input: usize, n: usize, out: Buf): string | null {
  clear(inv.name); clear(inv.event); clear(inv.phase); clear(inv.sessionId); clear(inv.server);
  clear(inv.principal); clear(inv.context); clear(inv.config); clear(inv.payload);
  badInvocation = false;
  if (!members(input, n, invocationMember) || badInvocation) return "intercept: input is not a valid invocation";
  if (inv.name.ptr == 0 || inv.payload.ptr == 0) return "intercept: name and payload are required";
  for (let i = 0; i < interceptors.length; i++) {
    const ic = interceptors[i];
    if (inv.name.is(ic.name)) return ic.fn(inv, out);
  }
  return "intercept: no interceptor of that name";
}

// intercept answers edge_hook_intercept: it runs the interceptor the
// invocation names.
export function intercept(ptr: i32, len: i32, ics: Interceptor[]): i64 {
  interceptors = ics;
  return run(ptr, len, interceptHandler);
}
