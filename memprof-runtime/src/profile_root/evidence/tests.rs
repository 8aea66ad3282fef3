//! The start-up sweep and the earlier processes' listing, on real directories.

use super::*;

/// An ended process's directory (an owner of this machine whose lock nobody holds) with these files.
fn ended(parent: &Path, name: &str, files: &[(&str, &str)]) -> PathBuf {
    let directory = parent.join(name);
    fs::create_dir(&directory).unwrap();
    let lock = stale::claim(&directory).unwrap();
    drop(lock);
    for (file, text) in files {
        fs::write(directory.join(file), text).unwrap();
    }
    directory
}

fn provenance(id: u64, stopped: f64, build: &str) -> String {
    serde_json::to_string(&Provenance {
        id,
        started_by: format!("automatic: dump {id}"),
        started: stopped,
        stopped,
        pid: 7,
        binary: crate::process::executable::path(),
        build_id: Some(build.to_owned()),
        allocated: None,
    })
    .unwrap()
}

#[test]
fn an_ended_process_keeps_its_automatic_dumps_and_newest_run_and_nothing_else() {
    let parent = tempfile::tempdir().unwrap();
    let ours = crate::process::executable::build_id().unwrap();
    let killed = ended(
        parent.path(),
        "memprof.killed",
        &[
            ("automatic.5.heap", "heap_v2/1\n"),
            ("automatic.5.json", &provenance(5, 1000.0, &ours)),
            ("automatic.5.heap.labels", "memprof-labels/1\n"),
            ("profile.3.heap", "heap_v2/1\n"),
            ("profile.3.heap.labels", "memprof-labels/1\n"),
            ("profile.3.json", &provenance(3, 900.0, &ours)),
            ("profile.4.heap", "heap_v2/1\n"),
            ("profile.4.json", &provenance(4, 950.0, "another-build")),
            (".automatic.6.heap.partial", "heap_v2/1"),
            ("snapshot.7.heap", "heap_v2/1\n"),
        ],
    );
    let empty = ended(parent.path(), "memprof.nothing", &[(".profile.2.heap.partial", "heap")]);
    let sweep = sweep(parent.path(), 8, 1 << 30);
    assert_eq!((sweep.removed_directories, sweep.removed_profiles), (1, 0));
    assert!(!empty.exists());
    let mut left: Vec<String> =
        fs::read_dir(&killed).unwrap().flatten().map(|entry| entry.file_name().into_string().unwrap()).collect();
    left.sort();
    assert_eq!(
        left,
        [
            "automatic.5.heap",
            "automatic.5.heap.labels",
            "automatic.5.json",
            "ended",
            "owner",
            "profile.4.heap",
            "profile.4.json"
        ]
    );
    let [process] = sweep.kept.as_slice() else { panic!("{:?}", sweep.kept) };
    let described: Vec<(u64, bool, String)> = process
        .profiles
        .iter()
        .map(|profile| (profile.profile.id, profile.same_build, profile.profile.owner.name()))
        .collect();
    assert_eq!(described, [(5, true, "automatic: dump 5".to_owned()), (4, false, "automatic: dump 4".to_owned())]);
    // A second sweep finds the same evidence, marked ended, and removes nothing.
    let again = super::sweep(parent.path(), 8, 1 << 30);
    assert_eq!(again.kept.len(), 1);
    assert_eq!(again.kept[0].profiles.len(), 2);
}

#[test]
fn earlier_processes_together_keep_within_the_bounds_oldest_going_first() {
    let parent = tempfile::tempdir().unwrap();
    let ours = crate::process::executable::build_id().unwrap();
    for process in 0..3u64 {
        let files: Vec<(String, String)> = (0..2u64)
            .flat_map(|dump| {
                let id = process * 10 + dump;
                let stopped = (process * 100 + dump) as f64;
                [
                    (format!("automatic.{id}.heap"), "heap_v2/1\n".repeat(10)),
                    (format!("automatic.{id}.json"), provenance(id, stopped, &ours)),
                ]
            })
            .collect();
        let files: Vec<(&str, &str)> = files.iter().map(|(name, text)| (name.as_str(), text.as_str())).collect();
        ended(parent.path(), &format!("memprof.p{process}"), &files);
    }
    let sweep = sweep(parent.path(), 3, 1 << 30);
    assert_eq!(sweep.removed_profiles, 3);
    let ids: Vec<Vec<u64>> =
        sweep.kept.iter().map(|process| process.profiles.iter().map(|profile| profile.profile.id).collect()).collect();
    assert_eq!(ids, [vec![21, 20], vec![11]]);
    assert!(!parent.path().join("memprof.p0").exists(), "a process left with no profile goes");
    // By bytes: 100 bytes a profile, 250 allowed: the two newest.
    let sweep = super::sweep(parent.path(), 8, 250);
    let ids: Vec<Vec<u64>> =
        sweep.kept.iter().map(|process| process.profiles.iter().map(|profile| profile.profile.id).collect()).collect();
    assert_eq!(ids, [vec![21, 20]]);
    assert_eq!(clear(&sweep.kept), 2);
    assert_eq!(fs::read_dir(parent.path()).unwrap().count(), 0);
}

#[test]
fn another_programs_earlier_processes_are_salvaged_but_left_to_it() {
    let parent = tempfile::tempdir().unwrap();
    let ours = crate::process::executable::build_id().unwrap();
    let provenance =
        provenance(5, 1000.0, &ours).replace(&crate::process::executable::path().unwrap(), "/srv/another-program");
    let theirs = ended(
        parent.path(),
        "memprof.theirs",
        &[("automatic.5.heap", "heap_v2/1\n"), ("automatic.5.json", &provenance), ("snapshot.6.heap", "x")],
    );
    let sweep = sweep(parent.path(), 1, 1);
    assert!(sweep.kept.is_empty());
    assert_eq!((sweep.removed_directories, sweep.removed_profiles), (0, 0));
    assert!(theirs.join("automatic.5.heap").is_file() && theirs.join(ENDED_FILE).is_file());
    assert!(!theirs.join("snapshot.6.heap").exists());
}

#[test]
fn the_same_service_is_the_same_program_name_wherever_it_is_installed() {
    assert!(same_service(Some("/opt/app-1.2/bin/app"), Some("/opt/app-1.3/bin/app")));
    assert!(same_service(Some("/srv/app"), Some("/srv/app")));
    assert!(!same_service(Some("/opt/app-1.2/bin/app"), Some("/opt/app-1.2/bin/worker")));
    assert!(!same_service(None, Some("/srv/app")));
    assert!(!same_service(Some("/"), Some("/")));
}

#[test]
fn numbers_out_of_range_in_planted_files_are_unreadable_files_not_a_crash() {
    let parent = tempfile::tempdir().unwrap();
    let ours = crate::process::executable::build_id().unwrap();
    // The planted `ended` mark of issue 41: u64::MAX seconds (a panic adding it to the epoch).
    let planted = ended(
        parent.path(),
        "memprof.planted",
        &[
            ("ended", "18446744073709551615\n"),
            ("automatic.5.heap", "heap_v2/1\n"),
            ("automatic.5.json", &provenance(5, 1000.0, &ours)),
        ],
    );
    // A kept profile whose provenance's times are 1e19 and -1 (a panic in the conversion to a time): the profile
    // stays, its provenance read as missing.
    let far = provenance(7, 1000.0, &ours).replace("\"stopped\":1000.0", "\"stopped\":1e19");
    let before = provenance(8, 1000.0, &ours).replace("\"started\":1000.0", "\"started\":-1.0");
    assert!(far.contains("1e19") && before.contains("-1.0"), "{far} {before}");
    ended(
        parent.path(),
        "memprof.far",
        &[
            ("automatic.7.heap", "heap_v2/1\n"),
            ("automatic.7.json", &far),
            ("automatic.8.heap", "heap_v2/1\n"),
            ("automatic.8.json", &before),
            // A readable provenance says whose the process is (without one, it is left for its own program).
            ("automatic.9.heap", "heap_v2/1\n"),
            ("automatic.9.json", &provenance(9, 1000.0, &ours)),
        ],
    );
    let sweep = sweep(parent.path(), 8, u64::MAX);
    assert!(planted.join("automatic.5.heap").is_file(), "an unreadable mark leaves the directory alone");
    let [process] = sweep.kept.as_slice() else { panic!("{:?}", sweep.kept) };
    let mut owners: Vec<(u64, String)> =
        process.profiles.iter().map(|profile| (profile.profile.id, profile.profile.owner.name())).collect();
    owners.sort();
    assert_eq!(owners, [(7, "unknown".to_owned()), (8, "unknown".to_owned()), (9, "automatic: dump 9".to_owned())]);
    assert!(!crate::profile_root::end_caption::caption(process).is_empty());
}
