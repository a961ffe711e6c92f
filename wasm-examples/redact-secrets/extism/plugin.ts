// redact-secrets as an Extism plugin: the AssemblyScript port's core rules
// (../as/redact.ts) behind the Extism PDK (@extism/as-pdk). The gateway
// runs a module importing extism:host/env under its Extism adapter and
// calls the exports named by hook; each reads its input from the Extism
// kernel, runs the same handler as the edge ABI build, and sets the output.
//
// Config arrives through Extism's config_get: a string member unquoted
// (replacement), any other member as its JSON text (disable, arguments,
// results); the plugin rebuilds the JSON object the handlers take.
import { Config } from "@extism/as-pdk";
import { input_length, input_load_u8, input_load_u64, alloc, store_u8, store_u64, output_set, error_set } from "@extism/as-pdk/lib/env";
import {
  edge_alloc, edge_configure, edge_hook_tool_call, edge_hook_tool_result,
  edge_hook_resource_result, edge_hook_prompt_result,
} from "../as/redact";

let configured = false;

function fail(msg: string): i32 {
  const b = String.UTF8.encode(msg);
  const n = b.byteLength;
  const off = alloc(n);
  for (let i = 0; i < n; i++) store_u8(off + i, load<u8>(changetype<usize>(b) + i));
  error_set(off);
  return 1;
}

function quote(s: string): string {
  return '"' + s.replaceAll("\\", "\\\\").replaceAll('"', '\\"') + '"';
}

// copyIn moves the input into the handlers' region and configures the
// instance on its first call; it returns the input's length, or -1 after
// reporting an error.
function copyIn(): i64 {
  if (!configured) {
    configured = true;
    let cfg = "{";
    const r = Config.get("replacement");
    if (r !== null) cfg += '"replacement":' + quote(r);
    const raw: StaticArray<string> = ["disable", "arguments", "results"];
    for (let i = 0; i < raw.length; i++) {
      const v = Config.get(raw[i]);
      if (v === null) continue;
      if (cfg.length > 1) cfg += ",";
      cfg += quote(raw[i]) + ":" + v;
    }
    cfg += "}";
    const b = String.UTF8.encode(cfg);
    const p = edge_alloc(b.byteLength);
    memory.copy(<usize>p, changetype<usize>(b), b.byteLength);
    const res = edge_configure(p, b.byteLength);
    if (res != 0) {
      fail(String.UTF8.decodeUnsafe(<usize>(res >>> 32), <usize>(res & 0xffffffff)));
      return -1;
    }
  }
  const n = input_length();
  const p = <usize>edge_alloc(<i32>n);
  let i: u64 = 0;
  for (; i + 8 <= n; i += 8) store<u64>(p + <usize>i, input_load_u64(i));
  for (; i < n; i++) store<u8>(p + <usize>i, input_load_u8(i));
  return <i64>n;
}

// copyOut hands the handler's packed output to the kernel.
function copyOut(res: i64): i32 {
  if (res == 0) return 0;
  const p = <usize>(res >>> 32);
  const n = <u64>(res & 0xffffffff);
  const off = alloc(n);
  let i: u64 = 0;
  for (; i + 8 <= n; i += 8) store_u64(off + i, load<u64>(p + <usize>i));
  for (; i < n; i++) store_u8(off + i, load<u8>(p + <usize>i));
  output_set(off, n);
  return 0;
}

export function tool_call(): i32 {
  const n = copyIn();
  if (n < 0) return 1;
  return copyOut(edge_hook_tool_call(edge_alloc(0), <i32>n));
}

export function tool_result(): i32 {
  const n = copyIn();
  if (n < 0) return 1;
  return copyOut(edge_hook_tool_result(edge_alloc(0), <i32>n));
}

export function resource_result(): i32 {
  const n = copyIn();
  if (n < 0) return 1;
  return copyOut(edge_hook_resource_result(edge_alloc(0), <i32>n));
}

export function prompt_result(): i32 {
  const n = copyIn();
  if (n < 0) return 1;
  return copyOut(edge_hook_prompt_result(edge_alloc(0), <i32>n));
}
