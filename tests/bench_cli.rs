//! `halobox bench` without a peer: the dry-run plan, refused ssh options,
//! and clear errors for folders that are not saved runs.

mod common;

#[test]
fn dry_run_prints_every_command_and_runs_nothing() {
    let out = common::run(&[
        "bench",
        "run",
        "--peer",
        "node2.invalid",
        "--peer-ip",
        "10.77.250.2",
        "--iface-ip",
        "127.0.0.1",
        "--rdma",
        "--streams",
        "3",
        "--dry-run",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        // Host keys checked first, so nothing later can lower it.
        "ssh -o StrictHostKeyChecking=yes -o BatchMode=yes",
        // Every remote command runs under the guard.
        "-- node2.invalid 'setsid -w sh -c ",
        "halobox-guard halobox bench probe --ip 10.77.250.2'",
        "halobox bench serve --bind 10.77.250.2 --port 5301",
        "iperf3 -c 10.77.250.2 -B 127.0.0.1 -p 5201 -t 10 -P 3 --json",
        "iperf3 -s -1 --forceflush -B 10.77.250.2 -p 5201",
        // The peer's RDMA endpoint is only known after the probe.
        "halobox-guard ib_write_lat -d '\\''<peer device>'\\'' -i '\\''<peer port>'\\'' -x '\\''<peer gid index>'\\'' -F -p 18515",
        // lo has MTU 65536: the RoCE path MTU is capped at 4096.
        "local: ib_write_lat -F -p 18515 -m 4096 -n 20000 10.77.250.2",
        "--report_gbits -s 65536 -q 3",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    assert_eq!(
        text.matches("StrictHostKeyChecking").count(),
        text.matches("StrictHostKeyChecking=yes").count()
    );
}

#[test]
fn host_key_checking_cannot_be_turned_off() {
    let out = common::run(&[
        "bench",
        "run",
        "--peer",
        "n",
        "--peer-ip",
        "10.77.250.2",
        "--iface-ip",
        "127.0.0.1",
        "--ssh-option",
        "StrictHostKeyChecking=no",
        "--dry-run",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("host key checking"));
}

#[test]
fn report_of_a_folder_that_is_not_a_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = common::run(&["bench", "report", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("run.json") && err.contains("--save"), "{err}");
}

#[test]
fn mismatched_iface_ips_are_refused() {
    let out = common::run(&[
        "bench",
        "run",
        "--peer",
        "n",
        "--peer-ip",
        "10.0.0.2",
        "--peer-ip",
        "10.0.1.2",
        "--iface-ip",
        "10.0.0.1",
        "--dry-run",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("one local address per peer address"));
}

/// A cluster file with two nodes at addresses no interface here holds.
fn cluster_file(dir: &std::path::Path) -> String {
    let path = dir.join("cluster.toml");
    std::fs::write(
        &path,
        "halobox = \"/opt/hb/halobox\"\nssh_options = [\"IdentityFile=/k\"]\n\
         [[node]]\nname = \"n1\"\nssh = \"root@n1.invalid\"\nip = \"10.77.251.1\"\n\
         [[node]]\nname = \"n2\"\nssh = \"root@n2.invalid\"\nip = \"10.77.251.2\"\n",
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn peer_node_from_the_cluster_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = cluster_file(dir.path());
    let out = common::run(&[
        "bench",
        "run",
        "--cluster",
        &file,
        "--peer-node",
        "2",
        "--iface-ip",
        "127.0.0.1",
        "--dry-run",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        &format!("peer root@n2.invalid: node n2 of {file}, as asked (2)") as &str,
        "path p0: 127.0.0.1 → 10.77.251.2 (peer root@n2.invalid)",
        // The file's ssh options and halobox path are used.
        "-o IdentityFile=/k -o ConnectTimeout=10",
        "-- root@n2.invalid 'setsid -w sh -c ",
        "halobox-guard /opt/hb/halobox bench probe --ip 10.77.251.2'",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    // --peer without --peer-ip names a node by its ssh target.
    let out = common::run(&[
        "bench",
        "run",
        "--cluster",
        &file,
        "--peer",
        "root@n1.invalid",
        "--iface-ip",
        "127.0.0.1",
        "--dry-run",
    ]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("127.0.0.1 → 10.77.251.1"));
}

#[test]
fn cluster_file_errors_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let file = cluster_file(dir.path());
    let run = |extra: &[&str]| {
        let mut args = vec!["bench", "run", "--dry-run"];
        args.extend_from_slice(extra);
        let out = common::run(&args);
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let missing = dir.path().join("none.toml");
    let err = run(&["--cluster", missing.to_str().unwrap()]);
    assert!(
        err.contains("no such file") && err.contains("--peer SSH_TARGET --peer-ip IP"),
        "{err}"
    );
    let err = run(&["--cluster", &file, "--peer-node", "n3"]);
    assert!(
        err.contains("no node \"n3\"") && err.contains("1 n1 (10.77.251.1), 2 n2 (10.77.251.2)"),
        "{err}"
    );
    let err = run(&["--cluster", &file]);
    assert!(
        err.contains("this machine is not in") && err.contains("--peer-node NAME"),
        "{err}"
    );
}

#[test]
fn this_machine_is_the_node_whose_address_an_interface_holds() {
    use halobox::bench::peer;
    use halobox::cluster::config;
    use halobox::host::{self, GatherOptions, HostRoot};
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hosts/strix-cx5");
    let facts = host::gather(HostRoot::sysroot(&root).unwrap(), GatherOptions::default());
    // strix-cx5 holds 10.0.0.1 on enp1s0f0np0 (and 192.168.1.60 on its LAN).
    let cfg = config::parse(
        "[[node]]\nssh = \"n0\"\nip = \"10.0.0.9\"\n\
         [[node]]\nssh = \"me\"\nip = \"10.0.0.1\"\n\
         [[node]]\nssh = \"n2\"\nip = \"10.0.0.2\"\n",
    )
    .unwrap();
    let file = std::path::Path::new("c.toml");
    let c = peer::choose(&cfg, file, &facts.network, None).unwrap();
    // The first node that is not this machine: n0, though it comes first.
    assert_eq!(c.node.ssh, "n0");
    let this = c.this.unwrap();
    assert_eq!(
        (this.label.as_str(), this.interface.as_str()),
        ("me", "enp1s0f0np0")
    );
    assert_eq!(
        c.why,
        "node n0 of c.toml: the first node that is not this machine (this machine is me: enp1s0f0np0 holds 10.0.0.1)"
    );
    assert_eq!(
        peer::choose(&cfg, file, &facts.network, Some("10.0.0.2"))
            .unwrap()
            .node
            .ssh,
        "n2"
    );
    let e = peer::choose(&cfg, file, &facts.network, Some("me")).unwrap_err();
    assert!(e.contains("is this machine"), "{e}");
    // A subnet neighbour is not this machine: the address must be held exactly.
    let only = config::parse("[[node]]\nssh = \"x\"\nip = \"10.0.0.3\"\n").unwrap();
    let e = peer::choose(&only, file, &facts.network, None).unwrap_err();
    assert!(e.contains("this machine is not in c.toml"), "{e}");
    let solo = config::parse("[[node]]\nssh = \"me\"\nip = \"10.0.0.1\"\n").unwrap();
    let e = peer::choose(&solo, file, &facts.network, None).unwrap_err();
    assert!(e.contains("lists only this machine"), "{e}");
}
