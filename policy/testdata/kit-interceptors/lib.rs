//! A module on the Rust kit's ABI 1.1 glue, for TestKitInterceptors: a
//! validator refusing delete_repo (and failing on boom), and a mutator
//! answering what it was told (server, principal, session, config).
mod edge;

fn no_delete(inv: &edge::Invocation, out: &mut Vec<u8>) -> Result<(), String> {
    match edge::member(inv.payload, "name").and_then(edge::string).as_deref() {
        Some("boom") => return Err("boom".into()),
        Some("delete_repo") => edge::refuse(out, "deleting repositories is not allowed"),
        _ => {}
    }
    Ok(())
}

fn echo(inv: &edge::Invocation, out: &mut Vec<u8>) -> Result<(), String> {
    let mut p = Vec::new();
    p.extend_from_slice(b"{\"name\":\"");
    p.extend_from_slice(inv.server);
    p.extend_from_slice(b"\",\"arguments\":{\"principal\":\"");
    p.extend_from_slice(inv.principal);
    p.extend_from_slice(b"\",\"session\":\"");
    p.extend_from_slice(inv.session_id);
    p.extend_from_slice(b"\",\"config\":");
    p.extend_from_slice(if inv.config.is_empty() { b"null" } else { inv.config });
    p.extend_from_slice(b"}}");
    edge::replace(out, &p);
    Ok(())
}

static ICS: [edge::Interceptor; 2] = [
    edge::Interceptor {
        name: "kit/no-delete",
        description: "no \"delete\"",
        mutation: false,
        events: &["tools/call"],
        phase: "request",
        mode: "",
        fail_open: false,
        priority: 0,
        config_schema: "",
        handler: no_delete,
    },
    edge::Interceptor {
        name: "kit/echo",
        description: "",
        mutation: true,
        events: &["tools/*", "resources/read"],
        phase: "",
        mode: "audit",
        fail_open: true,
        priority: -7,
        config_schema: "{\"type\":\"object\"}",
        handler: echo,
    },
];
edge::interceptors!(ICS);
