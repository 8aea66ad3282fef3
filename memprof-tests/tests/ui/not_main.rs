#[memprof::main]
fn serve() {}

fn main() {
    serve();
}
