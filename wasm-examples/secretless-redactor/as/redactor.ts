// secretless-redactor in AssemblyScript: the SEP-2624 mutator
// security/secretless-redactor of the Go module (../main.go) on the
// AssemblyScript kit, as its C build (../c): every verbatim secret of a
// known format (wasm-examples/internal/secretflow) in an outbound request
// is replaced by [REDACTED:<format>].
import { Buf, Interceptor, Invocation, listInterceptors, intercept } from "../../../guest/kits/as/edge";
import { find, formatIds, hitFormat, hitOff, hitLen, strings, strPtr, strLen, strStart, strEnd } from "../../internal/secretflow/as/secretflow";
export { edge_abi_version, edge_alloc } from "../../../guest/kits/as/edge";

const payload = new Buf(); // the rewritten payload
const repl = new Buf(); // one rewritten string
let doc: usize = 0;
let last: usize = 0; // doc[last:] is not copied yet
let changed = false;
let curDone: usize = 0;

function redactHit(): bool {
  repl.escaped(strPtr + curDone, hitOff - curDone);
  repl.ascii("[REDACTED:");
  repl.ascii(formatIds[hitFormat]);
  repl.byte(0x5d);
  curDone = hitOff + hitLen;
  return true;
}

function redactString(): bool {
  repl.len = 0;
  curDone = 0;
  find(strPtr, strLen, redactHit);
  if (curDone == 0) return true; // no secret
  repl.escaped(strPtr + curDone, strLen - curDone);
  payload.append(doc + last, strStart - last);
  payload.byte(0x22);
  payload.append(repl.ptr, repl.len);
  payload.byte(0x22);
  last = strEnd;
  changed = true;
  return true;
}

function mutate(inv: Invocation, out: Buf): string | null {
  payload.len = 0;
  doc = inv.payload.ptr;
  last = 0;
  changed = false;
  if (!strings(doc, inv.payload.len, redactString) || !changed) return null;
  payload.append(doc + last, inv.payload.len - last);
  out.replace(payload.ptr, payload.len);
  return null;
}

function interceptors(): Interceptor[] {
  const ic = new Interceptor("security/secretless-redactor", true,
    ["tools/call", "resources/read", "prompts/get", "sampling/createMessage", "elicitation/create"], "request", mutate);
  ic.description = "Replaces verbatim secrets in outbound requests with [REDACTED:<format>]";
  ic.priority = -50000;
  return [ic];
}

const ics = interceptors();

export function edge_hook_interceptors(ptr: i32, len: i32): i64 {
  return listInterceptors(ics);
}

export function edge_hook_intercept(ptr: i32, len: i32): i64 {
  return intercept(ptr, len, ics);
}
