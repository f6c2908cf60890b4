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

/// Checks one variable of cluster.toml's `[env]` or a node's `env` (also
/// `cluster join --env`/`--node-env`): a plain name, a one-line value, not a
/// secret, and never one of the per-node data-plane variables.
pub fn check_user_var(name: &str, value: &str) -> Result<(), String> {
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
    if name == "HF_TOKEN" {
        return Err(
            "HF_TOKEN is a secret and cluster.toml is shown by --dry-run: remove it and export HF_TOKEN where you run `halobox serve` (it reaches vLLM on stdin)".into(),
        );
    }
    if value.chars().any(|c| c.is_control() && c != '\t') {
        return Err(format!(
            "the value of {name} has a line break or control character: use one line"
        ));
    }
    Ok(())
}
