//! The memory limit this process runs under: the tightest `memory.max` (cgroup v2) or
//! `memory.limit_in_bytes` (the v1 memory controller) of its own cgroup and every cgroup above it; and the
//! container view `explain` gives: the cgroup's usage and its split from `memory.stat`.
//!
//! A container started by Docker or Kubernetes sees its own cgroup at the root of `/sys/fs/cgroup`, but a
//! systemd service (`MemoryMax=` on `app.service` or its slice) or a nested cgroup has its limit at the
//! path `/proc/self/cgroup` names, and a parent's limit binds as much as the process's own.

use std::io::Read;
use std::path::{Path, PathBuf};

use memprof_wire::Container;

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
    let (unified, controller) = cgroup_paths(membership);
    let v2 = unified.and_then(|path| tightest(&mount, path, "memory.max"));
    v2.or_else(|| controller.and_then(|path| tightest(&mount.join("memory"), path, "memory.limit_in_bytes")))
}

/// The cgroup v2 path and the v1 memory controller's path that `membership` names.
fn cgroup_paths(membership: &str) -> (Option<&str>, Option<&str>) {
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
    (unified, controller)
}

/// The container view of this process's cgroup, when it has a memory controller.
pub(crate) fn container() -> Option<Container> {
    let membership = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    container_under(Path::new("/"), &membership)
}

/// A cgroup file's text, read up to 64 KiB.
fn small_file(path: &Path) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(path).ok()?.take(64 * 1024).read_to_string(&mut text).ok()?;
    Some(text)
}

/// The container view under `root` (see [`memory_limit_under`]): usage and `memory.stat` of the cgroup
/// `membership` names (its mount's root when the path is not there: a cgroup namespace), v2 first.
pub(crate) fn container_under(root: &Path, membership: &str) -> Option<Container> {
    let mount = root.join(MOUNT);
    let (unified, controller) = cgroup_paths(membership);
    let limit = memory_limit_under(root, membership);
    let found = |mount: &Path, path: &str, usage: &str| -> Option<(String, String, u64)> {
        let relative: PathBuf = path.split('/').filter(|part| !part.is_empty() && *part != "..").collect();
        [mount.join(&relative), mount.to_path_buf()].into_iter().find_map(|directory| {
            let usage = small_file(&directory.join(usage))?.trim().parse().ok()?;
            Some((path.to_owned(), small_file(&directory.join("memory.stat"))?, usage))
        })
    };
    if let Some((path, stat, usage)) = unified.and_then(|path| found(&mount, path, "memory.current")) {
        return Some(split(2, path, &stat, usage, limit));
    }
    let (path, stat, usage) =
        controller.and_then(|path| found(&mount.join("memory"), path, "memory.usage_in_bytes"))?;
    Some(split(1, path, &stat, usage, limit))
}

/// The container view from the text of `memory.stat`: v2 names `anon`, `file`, `kernel` (or its parts),
/// `sock`, `shmem`; v1 `total_rss`/`rss`, `total_cache`/`cache`, `total_shmem`/`shmem`.
fn split(version: u8, path: String, stat: &str, usage: u64, limit: Option<u64>) -> Container {
    let field = |name: &str| {
        stat.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.trim().parse::<u64>().ok())
    };
    let either = |hierarchical: &str, own: &str| field(hierarchical).or_else(|| field(own));
    let (anon, file, kernel, sock, shmem) = if version == 2 {
        let parts = ["kernel_stack", "pagetables", "percpu", "slab"].map(field);
        let kernel =
            field("kernel").or_else(|| parts.iter().any(Option::is_some).then(|| parts.iter().flatten().sum()));
        (field("anon"), field("file"), kernel, field("sock"), field("shmem"))
    } else {
        (either("total_rss", "rss"), either("total_cache", "cache"), None, None, either("total_shmem", "shmem"))
    };
    let mib = |bytes: u64| format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20));
    let mut parts = Vec::new();
    for (name, value) in [("anonymous", anon), ("file cache", file), ("kernel", kernel), ("sockets", sock)] {
        if let Some(value) = value {
            parts.push(format!("{name} {}", mib(value)));
        }
    }
    let of_limit = limit.map_or(String::from(" (no limit)"), |limit| {
        format!(" of its {} limit ({:.0} %)", mib(limit), 100.0 * usage as f64 / limit.max(1) as f64)
    });
    let mut summary = format!("the cgroup uses {}{of_limit}: {}", mib(usage), parts.join(", "));
    if let (Some(limit), Some(anon), Some(file)) = (limit, anon, file)
        && usage * 10 >= limit * 9
        && file > anon
    {
        summary.push_str("; it is near its limit because of page cache, which the kernel reclaims before it kills");
    }
    Container {
        version,
        path,
        limit_bytes: limit,
        usage_bytes: usage,
        anon_bytes: anon,
        file_bytes: file,
        kernel_bytes: kernel,
        sock_bytes: sock,
        shmem_bytes: shmem,
        summary,
    }
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
    fn the_container_view_splits_usage_from_memory_stat_in_v2_and_v1() {
        let root = fake_root(&[
            ("app/memory.max", "1073741824\n"),
            ("app/memory.current", "1000000000\n"),
            ("app/memory.stat", "anon 209715200\nfile 734003200\nkernel 52428800\nsock 4096\nshmem 0\n"),
        ]);
        let container = container_under(root.path(), "0::/app\n").unwrap();
        assert_eq!(
            (container.version, container.limit_bytes, container.usage_bytes),
            (2, Some(1 << 30), 1_000_000_000)
        );
        assert_eq!(
            (container.anon_bytes, container.file_bytes, container.kernel_bytes),
            (Some(200 << 20), Some(700 << 20), Some(50 << 20))
        );
        assert_eq!(
            container.summary,
            "the cgroup uses 953.7 MiB of its 1024.0 MiB limit (93 %): anonymous 200.0 MiB, file cache 700.0 MiB, \
             kernel 50.0 MiB, sockets 0.0 MiB; it is near its limit because of page cache, which the kernel \
             reclaims before it kills"
        );
        let v1 = fake_root(&[
            ("memory/docker/abc/memory.usage_in_bytes", "300000000\n"),
            ("memory/docker/abc/memory.stat", "cache 1000\nrss 2000\ntotal_cache 100000000\ntotal_rss 200000000\n"),
        ]);
        let container = container_under(v1.path(), "5:memory:/docker/abc\n").unwrap();
        assert_eq!((container.version, container.limit_bytes), (1, None));
        assert_eq!(
            (container.anon_bytes, container.file_bytes, container.kernel_bytes),
            (Some(200_000_000), Some(100_000_000), None)
        );
        assert!(container.summary.contains("(no limit)"), "{}", container.summary);
        assert_eq!(container_under(v1.path(), "0::/\n"), None);
    }

    #[test]
    fn paths_cannot_leave_the_mount() {
        let root = fake_root(&[("memory.max", "1000\n")]);
        std::fs::write(root.path().join("memory.max"), "10\n").unwrap();
        assert_eq!(memory_limit_under(root.path(), "0::/../../..\n"), Some(1000));
    }
}
