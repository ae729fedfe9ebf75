//! Links the addon the way Node-API addons link on each platform.

fn main() {
    napi_build::setup();
}
