//! Built-in presets. The TOML files live beside this crate (`crates/ssdtwin-core/presets/`)
//! and are embedded here; the Python package reads them through the binding (`ssdtwin models`).

macro_rules! presets {
    ($($name:literal),* $(,)?) => {
        /// (name, TOML text) of every built-in preset, in display order.
        pub const PRESETS: &[(&str, &str)] = &[
            $(($name, include_str!(concat!("../../presets/", $name, ".toml")))),*
        ];
    };
}

presets!(
    "kioxia-cm6-r-3.84t",
    "kioxia-cm6-v-3.2t",
    "kioxia-cm6-v-1.6t",
    "kioxia-cd6-v-3.2t",
    "kioxia-cm5-r-3.84t",
    "intel-p5316-15.36t",
    "memblaze-pblaze5-910-3.84t",
    "samsung-pm983-3.84t",
);

pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

pub fn preset_toml(name: &str) -> Option<&'static str> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}
