//! The variables cluster.toml may set (`[env]`, a node's `env`) and the
//! per-node ones it may not: halobox computes those on each node.

/// Variables halobox computes on each node from that node's own facts. They
/// differ between nodes, so cluster.toml cannot set them, and vLLM must not
/// copy the head's values to the workers.
pub const PER_NODE: [&str; 6] = [
    "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME",
    "NCCL_IB_HCA",
    "NCCL_IB_GID_INDEX",
    "NCCL_IB_DISABLE",
    "VLLM_HOST_IP",
];

/// Checks that `name` is a plain variable name (letters, digits, '_', not
/// starting with a digit).
pub fn check_name(name: &str) -> Result<(), String> {
    let plain = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not a variable name: use letters, digits and '_', not starting with a digit"
        ))
    }
}

/// Names that match the secret patterns of [`is_secret_like`] but hold a
/// path, never a secret: shown and passed as they are.
pub const NOT_SECRET_LOOKALIKES: &[&str] = &[
    // The path of the AWS credentials file (the file holds the keys).
    "AWS_SHARED_CREDENTIALS_FILE",
    // The path of a Google service account's key file.
    "GOOGLE_APPLICATION_CREDENTIALS",
];

/// Whether `name` looks like it holds a secret: the variables no child
/// process gets ([`crate::proc::is_secret`]), Ray's `RAY_AUTH_TOKEN`, and
/// any name matching `*_KEY`, `*KEYS`, `*_PAT`, `*SECRET*`, `*TOKEN*`,
/// `*PASSWORD*`, `*PASSWD*` or `*CREDENTIAL*` (in any case), but those of
/// [`NOT_SECRET_LOOKALIKES`].
pub fn is_secret_like(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if crate::proc::is_secret(name) || upper == super::auth::TOKEN_VAR {
        return true;
    }
    if NOT_SECRET_LOOKALIKES.contains(&upper.as_str()) {
        return false;
    }
    ["_KEY", "KEYS", "_PAT"].iter().any(|s| upper.ends_with(s))
        || ["SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL"]
            .iter()
            .any(|s| upper.contains(s))
}

/// Whether `name` is one of the known secrets that no `not_secret` list
/// can clear (the ones halobox itself hands over on stdin or makes).
fn known_secret(name: &str) -> bool {
    crate::proc::is_secret(name) || name.eq_ignore_ascii_case(super::auth::TOKEN_VAR)
}

/// Checks cluster.toml's `not_secret` list (`cluster join --not-secret`):
/// plain names, none of them a known secret.
pub fn check_not_secret(names: &[String]) -> Result<(), String> {
    for name in names {
        check_name(name).map_err(|e| format!("not_secret: {e}"))?;
        if known_secret(name) {
            return Err(format!(
                "not_secret: {name} holds a secret, so it cannot be listed as not one: remove it from the list"
            ));
        }
    }
    Ok(())
}

/// Checks one variable of cluster.toml's `[env]` or a node's `env` (also
/// `cluster join --env`/`--node-env`): a plain name, a one-line value, not a
/// secret (by its name, unless `not_secret` lists it), and never one of the
/// per-node data-plane variables.
pub fn check_user_var(name: &str, value: &str, not_secret: &[String]) -> Result<(), String> {
    check_name(name)?;
    if PER_NODE.contains(&name) {
        let how = match name {
            "NCCL_IB_DISABLE" => "set transport = \"ethernet\" to use TCP",
            "VLLM_HOST_IP" => "it is the node's `ip`",
            _ => "it follows from the node's `ip` (the interface, RDMA port and GID that carry it)",
        };
        return Err(format!(
            "{name} is computed on each node from its own facts, so cluster.toml cannot set it: remove it ({how})"
        ));
    }
    let cleared = !known_secret(name) && not_secret.iter().any(|n| n == name);
    if is_secret_like(name) && !cleared {
        return Err(format!(
            "{name} is a secret and cluster.toml is shown by --dry-run and passed in process arguments: remove it\n  hint: export {name} where you run `halobox serve` instead{}",
            match name {
                "HF_TOKEN" | "VLLM_API_KEY" | "LLAMA_API_KEY" => " (it reaches the engine on stdin)".to_string(),
                super::auth::TOKEN_VAR =>
                    " (halobox makes Ray's token itself: `halobox cluster up` keeps it 0600 next to cluster.toml)".to_string(),
                _ if known_secret(name) => String::new(),
                _ => format!(
                    "; if it holds no secret (a name such as TOKENIZERS_PARALLELISM only looks like one), list it in cluster.toml: `not_secret = [\"{name}\"]`"
                ),
            }
        ));
    }
    if [super::auth::MODE_VAR, super::auth::TOKEN_PATH_VAR].contains(&name) {
        return Err(format!(
            "{name} is set by halobox (Ray's token authentication), so cluster.toml cannot set it: remove it (`halobox cluster up --insecure-ray` starts Ray without authentication)"
        ));
    }
    if value.chars().any(|c| c.is_control() && c != '\t') {
        return Err(format!(
            "the value of {name} has a line break or control character: use one line"
        ));
    }
    Ok(())
}
