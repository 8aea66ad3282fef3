// The third shape: memprof's allocator with a configuration of the program's own, and `start` called by
// the program (after its logger, say) instead of the attribute. Built and run.
memprof::allocator!("prof:true,prof_active:false,lg_prof_sample:17");

fn main() {
    let _memprof = memprof::start(memprof::Options::new().keep_runs(2));
    let run = memprof::Run::start("pass").expect("profiling is armed");
    let buffers: Vec<Vec<u8>> = (0..64).map(|_| vec![1; 64 * 1024]).collect();
    let profile = run.stop().expect("the run ends with a profile");
    let dump = std::fs::read_to_string(profile.path()).expect("the profile is on disk");
    assert!(dump.starts_with("heap_v2/131072\n"), "{}", &dump[..40]);
    assert_eq!(buffers.len(), 64);
}
