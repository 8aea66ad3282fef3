// Every budget problem is reported at once, each at the tokens it concerns.
#[memprof::test(allocated <= "1 MiG", heap <= "1 MiB", peak != 5, allocated_objects <= "3", freed <= 1.5, live, freed == -1)]
fn parses() {}

fn main() {}
