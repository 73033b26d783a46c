//! Prints the disk probe (fdatasync p50/p99, sequential durable MB/s) of the bench directory,
//! for benchmarks outside cargo (the Python ones) to report beside their figures.

fn main() {
    sessionlog_benches::probe();
}
