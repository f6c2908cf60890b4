//! Plan-level tests: container specs, their command-line and API forms, and
//! refresh decisions, from snapshot hosts, with no engine.

mod common;

use common::fixture_path;
use halobox::backend::Backend;
use halobox::container::memlock::MemlockRequest;
use halobox::container::spec::{self, ContainerSpec, EngineTraits, KEEP_GROUPS, SpecOptions};
use halobox::container::{api, binds, cli, distrobox};
use halobox::engine::{EngineInfo, EngineKind};
use halobox::host::{self, GatherOptions, HostFacts, HostRoot};
use halobox::refresh::plan::{self, PlanError, RefreshOptions, Source};

fn facts(host: &str) -> HostFacts {
    host::gather(
        HostRoot::sysroot(&fixture_path(host)).unwrap(),
        GatherOptions::default(),
    )
}

fn traits(kind: EngineKind, runtime: &str, rootless: bool, f: &HostFacts) -> EngineTraits {
    EngineTraits {
        kind,
        oci_runtime: Some(runtime.into()),
        rootless,
        creator_limits: f.limits.podman_services.first().map(|p| p.limits),
    }
}

fn opts(backend: Backend, memlock: &str) -> SpecOptions {
    SpecOptions {
        name: "vllm".into(),
        image: "registry.example/halobox/vllm:20260101-000000".into(),
        image_digest: Some("sha256:abc".into()),
        channel: Some("latest".into()),
        backend,
        memlock: memlock.parse().unwrap(),
        runtime_dir: Some("/run/user/1000".into()),
        halobox_exe: Some("/usr/local/bin/halobox".into()),
        halobox_dir: Some("/home/user/.local/share/halobox/bin".into()),
        hf_home: Some("/home/user/.cache/huggingface".into()),
        volumes: vec![],
    }
}

fn build(
    host: &str,
    kind: EngineKind,
    runtime: &str,
    rootless: bool,
    backend: Backend,
) -> ContainerSpec {
    let f = facts(host);
    spec::build(
        &f,
        &traits(kind, runtime, rootless, &f),
        &opts(backend, "unlimited"),
    )
}

#[test]
fn devices_come_from_the_host() {
    let s = build(
        "strix-e810",
        EngineKind::Podman,
        "crun",
        false,
        Backend::Podman,
    );
    assert_eq!(
        s.devices,
        [
            "/dev/kfd",
            "/dev/dri/card1",
            "/dev/dri/renderD128",
            "/dev/infiniband/rdma_cm",
            "/dev/infiniband/uverbs0"
        ]
    );
    let s = build(
        "no-gpu-no-rdma",
        EngineKind::Podman,
        "crun",
        false,
        Backend::Podman,
    );
    assert!(s.devices.is_empty());
    for what in ["no /dev/kfd", "no /dev/dri", "no /dev/infiniband"] {
        assert!(
            s.notes.iter().any(|n| n.contains(what)),
            "{what}: {:?}",
            s.notes
        );
    }
}

#[test]
fn groups_follow_engine_and_runtime() {
    let crun = build(
        "strix-e810",
        EngineKind::Podman,
        "crun",
        false,
        Backend::Podman,
    );
    assert_eq!(
        crun.annotations.get(KEEP_GROUPS).map(String::as_str),
        Some("1")
    );
    assert!(crun.group_add.is_empty());
    let runc = build(
        "strix-e810",
        EngineKind::Podman,
        "runc",
        false,
        Backend::Podman,
    );
    assert!(runc.annotations.is_empty());
    assert_eq!(
        runc.group_add,
        ["105", "39", "993"],
        "render, video, rdma GIDs"
    );
    assert!(runc.notes.iter().any(|n| n.contains("cannot keep groups")));
    let rootless = build(
        "strix-e810",
        EngineKind::Podman,
        "runc",
        true,
        Backend::Podman,
    );
    assert!(rootless.group_add.is_empty());
    assert!(rootless.notes.iter().any(|n| n.contains("not kept")));
    let docker = build(
        "strix-e810",
        EngineKind::Docker,
        "runc",
        false,
        Backend::Docker,
    );
    assert_eq!(docker.group_add, ["105", "39", "993"]);
}

#[test]
fn limits_memlock_first_then_the_engines_own() {
    let s = build(
        "strix-e810",
        EngineKind::Podman,
        "crun",
        false,
        Backend::Podman,
    );
    assert_eq!(s.rlimits[0].name, "memlock");
    assert_eq!((s.rlimits[0].soft, s.rlimits[0].hard), (-1, -1));
    assert_eq!(s.memlock(), -1);
    let names: Vec<&str> = s.rlimits.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["memlock", "nofile", "nproc"]);
    let f = facts("strix-e810");
    let sized = spec::build(
        &f,
        &traits(EngineKind::Podman, "crun", false, &f),
        &opts(Backend::Podman, "64M"),
    );
    assert_eq!(sized.memlock(), 64 << 20);
    assert_eq!(
        sized.labels["dev.halobox.memlock"],
        (64u64 << 20).to_string()
    );
}

#[test]
fn host_hazards_are_not_passed_in() {
    let s = build(
        "broken-e810",
        EngineKind::Podman,
        "crun",
        false,
        Backend::Toolbox,
    );
    assert!(s.env.iter().all(|(k, _)| k != "HSA_OVERRIDE_GFX_VERSION"));
    assert!(
        s.notes
            .iter()
            .any(|n| n.contains("HSA_OVERRIDE_GFX_VERSION"))
    );
}

#[test]
fn toolbox_shape_matches_toolbx() {
    let s = build(
        "strix-e810",
        EngineKind::Podman,
        "crun",
        false,
        Backend::Toolbox,
    );
    assert_eq!(s.labels["com.github.containers.toolbox"], "true");
    assert!(
        s.privileged && s.pid_host && s.ipc_host && s.network_host && s.devpts && s.use_image_hosts
    );
    assert_eq!(s.userns.as_deref(), Some("host"));
    assert_eq!(s.user.as_deref(), Some("root:root"));
    assert_eq!(s.entrypoint.as_deref(), Some(&["toolbox".to_string()][..]));
    let vols: Vec<String> = s.mounts.iter().map(|m| m.volume()).collect();
    for want in [
        "/:/run/host:rslave",
        "/dev:/dev:rslave",
        "/home/halo:/home/halo:rslave",
        "/usr/bin/toolbox:/usr/bin/toolbox:ro",
        "/run/user/1000:/run/user/1000",
    ] {
        assert!(vols.contains(&want.to_string()), "{want} not in {vols:?}");
    }
    assert_eq!(s.ensure_dirs, ["/run/user/1000"]);
    let cmd = s.cmd.join(" ");
    assert_eq!(
        cmd,
        "--log-level debug init-container --gid 1000 --home /home/halo --shell /bin/bash --uid 1000 --user halo --monitor-host"
    );
    let rootless = build(
        "strix-e810",
        EngineKind::Podman,
        "crun",
        true,
        Backend::Toolbox,
    );
    assert_eq!(rootless.userns.as_deref(), Some("keep-id"));
}

#[test]
fn request_and_command_forms() {
    let s = build(
        "strix-e810",
        EngineKind::Podman,
        "crun",
        false,
        Backend::Toolbox,
    );
    let line = halobox::shell::line(&cli::create_command(&s, EngineKind::Podman));
    insta::assert_snapshot!("toolbox_create_command", line);
    let body = api::libpod_body(&s);
    assert_eq!(body["use_image_hosts"], true);
    assert_eq!(body["annotations"][KEEP_GROUPS], "1");
    assert_eq!(
        body["r_limits"][0],
        serde_json::json!({"type": "memlock", "soft": -1, "hard": -1})
    );
    assert_eq!(body["command"][0], "toolbox");
    assert!(
        body["mounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["type"] == "devpts")
    );
    insta::assert_json_snapshot!("toolbox_libpod_body", body);

    let d = build(
        "strix-e810",
        EngineKind::Docker,
        "runc",
        false,
        Backend::Docker,
    );
    let compat = api::compat_body(&d);
    let host = compat.host_config.unwrap();
    assert_eq!(host.network_mode.as_deref(), Some("host"));
    assert_eq!(host.ulimits.unwrap()[0].soft, Some(-1));
    assert_eq!(host.devices.unwrap().len(), 5);

    let p = build(
        "strix-e810",
        EngineKind::Podman,
        "runc",
        true,
        Backend::Distrobox,
    );
    let argv = distrobox::create_command(&p, false);
    assert_eq!(&argv[..4], ["distrobox", "create", "--yes", "--no-entry"]);
    assert!(!argv.contains(&"--root".to_string()));
    let flags = argv.last().unwrap();
    assert!(
        flags.contains("--device /dev/kfd:/dev/kfd:rwm")
            && flags.contains("dev.halobox.managed=true"),
        "{flags}"
    );
    assert!(distrobox::create_command(&p, true).contains(&"--root".to_string()));
}

fn engine(kind: EngineKind) -> EngineInfo {
    EngineInfo {
        address: "unix:///run/podman/podman.sock".into(),
        kind,
        version: "4.3.1".into(),
        api_version: "1.41".into(),
        oci_runtime: Some("crun".into()),
        rootless: false,
    }
}

fn refresh_opts(backend: Backend, memlock: &str, clamp: bool) -> RefreshOptions {
    RefreshOptions {
        image: halobox::image_ref::ImageRef::parse("registry.example/halobox/vllm:latest").unwrap(),
        channel: "latest".into(),
        name: "vllm".into(),
        backend,
        memlock: memlock.parse::<MemlockRequest>().unwrap(),
        memlock_clamp: clamp,
        keep: 3,
        adopt: false,
        runtime_dir: None,
        settle: std::time::Duration::from_secs(3),
        halobox_exe: None,
        halobox_dir: None,
        hf_home: None,
        volumes: vec![],
        pull: None,
    }
}

/// A refresh plan on `f` for a podman (or docker) engine, pulling.
fn plan_on(
    f: &HostFacts,
    kind: EngineKind,
    creator: Option<&halobox::host::procs::Process>,
    existing: Option<&halobox::container::ops::ContainerInfo>,
    opts: &RefreshOptions,
) -> Result<plan::RefreshPlan, PlanError> {
    let found = plan::Found {
        existing,
        ..Default::default()
    };
    plan::plan(f, &engine(kind), creator, found, pull(), opts)
}

fn pull() -> Source {
    Source::Pull {
        reference: "registry.example/halobox/vllm:latest".into(),
    }
}

#[test]
fn refresh_pulls_registry_images_and_uses_local_ones_as_they_are() {
    use halobox::refresh::pull::{PullError, PullPolicy};
    let f = facts("strix-e810");
    let on = |image: &str, pull: Option<PullPolicy>, present: bool| {
        let opts = RefreshOptions {
            image: halobox::image_ref::ImageRef::parse(image).unwrap(),
            pull,
            ..refresh_opts(Backend::Podman, "64M", false)
        };
        let found = plan::Found {
            image_present: present,
            ..Default::default()
        };
        let source = Source::Pull {
            reference: image.into(),
        };
        plan::plan(&f, &engine(EngineKind::Podman), None, found, source, &opts)
    };
    let registry = "registry.example/halobox/vllm:latest";
    let p = on(registry, None, true).unwrap().pulling.unwrap();
    assert_eq!((p.policy, p.pull), (PullPolicy::Always, true));
    let p = on(registry, Some(PullPolicy::Missing), true).unwrap();
    assert_eq!(p.pulling.as_ref().map(|p| p.pull), Some(false));
    let err = on(registry, Some(PullPolicy::Never), false).unwrap_err();
    assert!(
        matches!(err, PlanError::Image(PullError::Never { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("\n  hint: "), "{err}");

    // `halobox build`'s image: the engine has it, nothing to pull.
    let local = "localhost/vllm-therock-gfx1151:latest";
    let p = on(local, None, true).unwrap();
    let pulling = p.pulling.as_ref().unwrap();
    assert_eq!((pulling.policy, pulling.pull), (PullPolicy::Missing, false));
    assert_eq!(p.spec.image, local);
    let err = on(local, None, false).unwrap_err();
    assert!(
        matches!(err, PlanError::Image(PullError::LocalAbsent { .. })),
        "{err}"
    );
    assert!(
        on(local, Some(PullPolicy::Always), true)
            .unwrap()
            .pulling
            .unwrap()
            .pull
    );
}

#[test]
fn refresh_preflights_memlock_against_the_engine_process() {
    let broken = facts("broken-e810");
    let creator = broken.limits.podman_services.first();
    assert!(
        creator.is_some(),
        "the broken host runs a podman service with 8 MiB"
    );
    let err = plan_on(
        &broken,
        EngineKind::Podman,
        creator,
        None,
        &refresh_opts(Backend::Podman, "unlimited", false),
    )
    .unwrap_err();
    assert!(matches!(err, PlanError::Memlock { .. }), "{err}");
    assert!(err.to_string().contains("LimitMEMLOCK=infinity"));
    let p = plan_on(
        &broken,
        EngineKind::Podman,
        creator,
        None,
        &refresh_opts(Backend::Podman, "unlimited", true),
    )
    .unwrap();
    assert_eq!(p.spec.memlock(), 8 << 20);
    assert!(p.notes.iter().any(|n| n.contains("clamped")));

    let healthy = facts("strix-e810");
    let creator = healthy.limits.podman_services.first();
    let p = plan_on(
        &healthy,
        EngineKind::Podman,
        creator,
        None,
        &refresh_opts(Backend::Toolbox, "unlimited", false),
    )
    .unwrap();
    assert_eq!(p.spec.memlock(), -1);
    assert_eq!(p.temp_name, "vllm-halobox-new");
    assert_eq!(p.spec.name, "vllm-halobox-new");
    assert_eq!(p.replaces, None);
}

#[test]
fn refresh_refuses_wrong_engine_foreign_names_and_root_distrobox() {
    let f = facts("strix-e810");
    let err = plan_on(
        &f,
        EngineKind::Docker,
        None,
        None,
        &refresh_opts(Backend::Toolbox, "64M", false),
    )
    .unwrap_err();
    assert!(matches!(err, PlanError::BackendEngine { .. }), "{err}");

    let foreign = halobox::container::ops::ContainerInfo {
        id: "x".into(),
        name: "vllm".into(),
        image_id: "sha256:1".into(),
        image: "docker.io/kyuz0/vllm-therock-gfx1151:latest".into(),
        state: "exited".into(),
        ..Default::default()
    };
    let err = plan_on(
        &f,
        EngineKind::Podman,
        None,
        Some(&foreign),
        &refresh_opts(Backend::Podman, "64M", false),
    )
    .unwrap_err();
    assert!(matches!(err, PlanError::NameTaken { .. }), "{err}");
    // halobox's labels from its image (a commit of a halobox container) are not halobox's making.
    let inherited = halobox::container::ops::ContainerInfo {
        labels: [("dev.halobox.managed".to_string(), "true".to_string())].into(),
        owner: halobox::container::owner::Owner::Inherited,
        ..foreign.clone()
    };
    let err = plan_on(
        &f,
        EngineKind::Podman,
        None,
        Some(&inherited),
        &refresh_opts(Backend::Podman, "64M", false),
    )
    .unwrap_err();
    assert!(matches!(err, PlanError::InheritedLabels { .. }), "{err}");
    assert!(err.to_string().contains("only because its image"), "{err}");
    let mut adopt = refresh_opts(Backend::Podman, "64M", false);
    adopt.adopt = true;
    let p = plan_on(&f, EngineKind::Podman, None, Some(&foreign), &adopt).unwrap();
    assert_eq!(p.replaces.as_deref(), Some("vllm"));

    let root = facts("no-gpu-no-rdma");
    let err = plan_on(
        &root,
        EngineKind::Podman,
        None,
        None,
        &refresh_opts(Backend::Distrobox, "8M", false),
    )
    .unwrap_err();
    assert_eq!(err, PlanError::DistroboxAsRoot);
    // distrobox as a user: memlock is this user's (unlimited on the healthy host).
    let p = plan_on(
        &f,
        EngineKind::Podman,
        None,
        None,
        &refresh_opts(Backend::Distrobox, "64M", false),
    )
    .unwrap();
    assert_eq!(p.spec.rlimits[0].soft, -1);
    let broken = facts("broken-e810");
    let err = plan_on(
        &broken,
        EngineKind::Podman,
        None,
        None,
        &refresh_opts(Backend::Distrobox, "unlimited", false),
    )
    .unwrap_err();
    assert!(matches!(err, PlanError::DistroboxMemlock { .. }), "{err}");
}

#[test]
fn halobox_and_the_hf_cache_go_into_podman_and_docker_containers() {
    for (kind, backend) in [
        (EngineKind::Podman, Backend::Podman),
        (EngineKind::Docker, Backend::Docker),
    ] {
        let s = build("strix-e810", kind, "runc", false, backend);
        let vols: Vec<String> = s.mounts.iter().map(|m| m.volume()).collect();
        // halobox's own folder, not the one the binary sits in (its
        // neighbours stay out); the folder, not the file, so the new binary
        // halobox renames into it reaches the container.
        let bin = "/home/user/.local/share/halobox/bin:/run/halobox/bin:ro";
        assert!(vols.contains(&bin.to_string()), "{vols:?}");
        assert!(
            !vols.iter().any(|v| v.starts_with("/usr/local/bin")),
            "{vols:?}"
        );
        assert_eq!(s.labels[binds::LABEL_HALOBOX], "/run/halobox/bin/halobox");
        let hf = "/home/user/.cache/huggingface";
        assert!(vols.contains(&format!("{hf}:{hf}")), "{vols:?}");
        assert!(s.env.contains(&("HF_HOME".to_string(), hf.to_string())));
        assert!(s.ensure_dirs.contains(&hf.to_string()));
        let line = halobox::shell::line(&cli::create_command(&s, kind));
        assert!(
            line.contains(&format!("--volume {bin}"))
                && line.contains(&format!("--env HF_HOME={hf}")),
            "{line}"
        );
    }
    // toolbox and distrobox see the host under /run/host and share $HOME.
    for backend in [Backend::Toolbox, Backend::Distrobox] {
        let s = build("strix-e810", EngineKind::Podman, "crun", false, backend);
        assert_eq!(
            s.labels[binds::LABEL_HALOBOX],
            "/run/host/usr/local/bin/halobox"
        );
        assert!(
            !s.mounts
                .iter()
                .any(|m| m.destination == binds::BIN_DIR || m.destination.ends_with("huggingface")),
            "{:?}",
            s.mounts
        );
        assert!(!s.env.iter().any(|(k, _)| k == "HF_HOME"));
    }
}

/// A USB4 RDMA provider's device (OdinLink's `/dev/odl_tb5_0`) goes into
/// the container with the GPU's, for its RCCL net plugin.
#[test]
fn the_usb4_provider_device_comes_from_the_host() {
    let d = tempfile::tempdir().unwrap();
    let copy = std::process::Command::new("cp")
        .arg("-a")
        .arg(fixture_path("strix-usb4"))
        .arg(d.path().join("h"))
        .status()
        .unwrap();
    assert!(copy.success());
    std::fs::write(d.path().join("h/dev/odl_tb5_0"), "").unwrap();
    let f = host::gather(
        HostRoot::sysroot(&d.path().join("h")).unwrap(),
        GatherOptions::default(),
    );
    let s = spec::build(
        &f,
        &traits(EngineKind::Podman, "crun", false, &f),
        &opts(Backend::Podman, "unlimited"),
    );
    assert_eq!(s.devices.last().map(String::as_str), Some("/dev/odl_tb5_0"));
    assert!(facts("strix-usb4").net_plugins.usb4_devices.is_empty());
}
