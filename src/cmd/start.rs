//! `halobox` with no command: where a new user starts. Exit status 0: it
//! is the answer to "what now?", not a usage error, so it goes to stdout
//! and can be paged (`halobox | less`).

/// The text printed.
pub const TEXT: &str = "\
halobox: one tool for AMD Strix Halo (gfx1151) vLLM clusters over RoCE v2.

Start here, on each node:
  halobox doctor              check this node; every FAIL comes with the exact fix
  sudo halobox setup          apply the fixes doctor can automate (--dry-run shows them first)
  halobox refresh             pull the image and make this node's container

Then on the first node (the Ray head):
  halobox cluster init --node root@node1,192.168.100.1 --node root@node2,192.168.100.2
  halobox cluster up
  halobox serve MODEL

Every command: `halobox help`; one command: `halobox help COMMAND` or `halobox COMMAND --help`.
";
