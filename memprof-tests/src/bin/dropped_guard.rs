//! A program that drops memprof's guard at once (`let _ = memprof::start(...)`), then tries a run: memprof
//! has shut down, so the run is refused with a message that says why, and nothing is left on disk.

memprof::allocator!();

fn main() {
    let _ = memprof::start(memprof::Options::new());
    match memprof::Run::start("after the guard") {
        Ok(run) => println!("profiled: {:?}", run.stop().map(|profile| profile.path().to_owned())),
        Err(error) => println!("refused: {error}"),
    }
}
