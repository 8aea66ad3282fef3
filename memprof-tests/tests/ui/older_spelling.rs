// One word for the sampling mode: the older `continuous = true` is refused with the new spelling.
#[memprof::main(continuous = true)]
fn main() {}
