//! hoist: an L7 proxy configured like Envoy. (Being built.)
#![forbid(unsafe_code)]

fn main() {
    println!("hoist");
}
