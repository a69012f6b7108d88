//! hoist: an L7 proxy configured like Envoy. (Being built.)
#![forbid(unsafe_code)]

mod access_log;

fn main() {
    println!("hoist");
}
