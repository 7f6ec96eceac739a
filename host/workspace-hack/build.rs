// cargo reads a package's build-dependencies only when it has a build script.
fn main() {}
