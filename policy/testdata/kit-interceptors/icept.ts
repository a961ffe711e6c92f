// A module on the AssemblyScript kit's ABI 1.1 glue, for
// TestKitInterceptors (icept.c on the C kit): a validator refusing
// delete_repo (and failing on boom), and a mutator answering what it was
// told (server, principal, session, config). The test copies the kit
// beside it as edge.ts.
import { Buf, Interceptor, Invocation, listInterceptors, intercept, member, isString, valueLen } from "./edge";
export { edge_abi_version, edge_alloc } from "./edge";

function noDelete(inv: Invocation, out: Buf): string | null {
  const name = member(inv.payload.ptr, inv.payload.len, "name");
  if (name != 0 && isString(name, valueLen, "boom")) return "boom";
  if (name != 0 && isString(name, valueLen, "delete_repo")) out.refuse("deleting repositories is not allowed");
  return null;
}

const p = new Buf();

function echo(inv: Invocation, out: Buf): string | null {
  p.len = 0;
  p.ascii('{"name":"');
  p.append(inv.server.ptr, inv.server.len);
  p.ascii('","arguments":{"principal":"');
  p.append(inv.principal.ptr, inv.principal.len);
  p.ascii('","session":"');
  p.append(inv.sessionId.ptr, inv.sessionId.len);
  p.ascii('","config":');
  if (inv.config.ptr != 0) p.append(inv.config.ptr, inv.config.len);
  else p.ascii("null");
  p.ascii("}}");
  out.replace(p.ptr, p.len);
  return null;
}

function interceptors(): Interceptor[] {
  const v = new Interceptor("kit/no-delete", false, ["tools/call"], "request", noDelete);
  v.description = 'no "delete"';
  const m = new Interceptor("kit/echo", true, ["tools/*", "resources/read"], "both", echo);
  m.mode = "audit";
  m.failOpen = true;
  m.priority = -7;
  m.configSchema = '{"type":"object"}';
  return [v, m];
}

const ics = interceptors();

export function edge_hook_interceptors(ptr: i32, len: i32): i64 {
  return listInterceptors(ics);
}

export function edge_hook_intercept(ptr: i32, len: i32): i64 {
  return intercept(ptr, len, ics);
}
