//! The memory limit this process runs under: the tightest `memory.max` (cgroup v2) or
//! `memory.limit_in_bytes` (the v1 memory controller) of its own cgroup and every cgroup above it.
//!
//! A container started by Docker or Kubernetes sees its own cgroup at the root of `/sys/fs/cgroup`, but a
//! systemd service (`MemoryMax=` on `app.service` or its slice) or a nested cgroup has its limit at the
//! path `/proc/self/cgroup` names, and a parent's limit binds as much as the process's own.

use std::path::{Path, PathBuf};

/// Where cgroup file systems are mounted, below the root.
const MOUNT: &str = "sys/fs/cgroup";

/// v1 limits at or above this mean "no limit" (the kernel writes the largest page-aligned `i64`).
const UNLIMITED: u64 = 1 << 60;

/// The memory limit of this process's cgroups, if any is set.
///
/// ```ignore
/// if let Some(limit) = cgroup::memory_limit() { println!("{} MiB", limit >> 20) }
/// ```
pub(crate) fn memory_limit() -> Option<u64> {
    let membership = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    memory_limit_under(Path::new("/"), &membership)
}

/// The tightest memory limit along the cgroup paths that `membership` (the text of `/proc/self/cgroup`)
/// names, with the cgroup file systems mounted under `root`: cgroup v2 first, then the v1 memory controller.
pub(crate) fn memory_limit_under(root: &Path, membership: &str) -> Option<u64> {
    let mount = root.join(MOUNT);
    let mut unified = None;
    let mut controller = None;
    for line in membership.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(hierarchy), Some(controllers), Some(path)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        if hierarchy == "0" && controllers.is_empty() {
            unified = Some(path);
        } else if controllers.split(',').any(|name| name == "memory") {
            controller = Some(path);
        }
    }
    let v2 = unified.and_then(|path| tightest(&mount, path, "memory.max"));
    v2.or_else(|| controller.and_then(|path| tightest(&mount.join("memory"), path, "memory.limit_in_bytes")))
}

/// The smallest limit in `file` of the cgroup at `path` under `mount` and of each of its ancestors.
///
/// Directories that do not exist are skipped: inside a container's cgroup namespace (v1 without one, in
/// particular) `/proc/self/cgroup` may name the host's path while the mount shows the container's cgroup
/// at its root.
fn tightest(mount: &Path, path: &str, file: &str) -> Option<u64> {
    let relative: PathBuf = path.split('/').filter(|part| !part.is_empty() && *part != "..").collect();
    relative
        .ancestors()
        .filter_map(|ancestor| std::fs::read_to_string(mount.join(ancestor).join(file)).ok())
        .filter_map(|text| text.trim().parse::<u64>().ok())
        .filter(|&limit| limit < UNLIMITED)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake root with cgroup files: `(path under sys/fs/cgroup, contents)`.
    fn fake_root(files: &[(&str, &str)]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for (path, contents) in files {
            let path = root.path().join(MOUNT).join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, contents).unwrap();
        }
        root
    }

    #[test]
    fn a_systemd_service_takes_the_tightest_limit_of_its_cgroup_and_slices() {
        let root = fake_root(&[
            ("memory.max", "max\n"),
            ("system.slice/memory.max", "4294967296\n"),
            ("system.slice/app.service/memory.max", "max\n"),
            ("system.slice/app.service/worker/memory.max", "max\n"),
            ("system.slice/other.service/memory.max", "1024\n"),
        ]);
        let membership = "0::/system.slice/app.service/worker\n";
        assert_eq!(memory_limit_under(root.path(), membership), Some(4 << 30));
        std::fs::write(root.path().join(MOUNT).join("system.slice/app.service/memory.max"), "536870912\n").unwrap();
        assert_eq!(memory_limit_under(root.path(), membership), Some(512 << 20));
    }

    #[test]
    fn a_container_sees_its_limit_at_the_root_of_its_namespace() {
        let root = fake_root(&[("memory.max", "268435456\n")]);
        assert_eq!(memory_limit_under(root.path(), "0::/\n"), Some(256 << 20));
        assert_eq!(memory_limit_under(root.path(), "0::/kubepods/pod1/container\n"), Some(256 << 20));
    }

    #[test]
    fn no_limit_anywhere_is_none() {
        let root = fake_root(&[("memory.max", "max\n"), ("user.slice/memory.max", "max\n")]);
        assert_eq!(memory_limit_under(root.path(), "0::/user.slice\n"), None);
        assert_eq!(memory_limit_under(root.path(), ""), None);
    }

    #[test]
    fn the_v1_memory_controller_is_read_when_there_is_no_v2_limit() {
        let root = fake_root(&[
            ("memory/memory.limit_in_bytes", "9223372036854771712\n"),
            ("memory/docker/abc/memory.limit_in_bytes", "1073741824\n"),
        ]);
        let membership = "12:cpu,cpuacct:/docker/abc\n5:memory:/docker/abc\n0::/docker/abc\n";
        assert_eq!(memory_limit_under(root.path(), membership), Some(1 << 30));
        let other = "4:blkio:/x\n3:memory,hugetlb:/docker/abc\n";
        assert_eq!(memory_limit_under(root.path(), other), Some(1 << 30));
    }

    #[test]
    fn paths_cannot_leave_the_mount() {
        let root = fake_root(&[("memory.max", "1000\n")]);
        std::fs::write(root.path().join("memory.max"), "10\n").unwrap();
        assert_eq!(memory_limit_under(root.path(), "0::/../../..\n"), Some(1000));
    }
}
