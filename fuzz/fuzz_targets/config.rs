//! The config file parser (`config::parse_str`, what the server runs on
//! the text of its config file, read lossily as UTF-8), then CONFIG GET *
//! on the result and CONFIG SET of every value it reports. Every line is
//! also given to CONFIG SET as `name value...` (that one is a client's
//! input).
//!
//! `dir`, `include` and `logfile` lines are blanked out first: they chdir,
//! read and create files named by the input, which a fuzzer must not do
//! to the machine (their parsing is the same `split_args` path as every
//! other line's).
#![no_main]

use disque::config::{parse_str, split_args, Config};
use libfuzzer_sys::fuzz_target;

fn touches_files(line: &str) -> bool {
    let Some(args) = split_args(line.trim()) else {
        return false;
    };
    args.first().is_some_and(|d| {
        let d = d.to_ascii_lowercase();
        d == "dir" || d == "include" || d == "logfile"
    })
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let text: Vec<&str> = text
        .split('\n')
        .map(|l| if touches_files(l) { "" } else { l })
        .collect();
    let text = text.join("\n");
    // CONFIG SET (a client's input): every line as `name value...`.
    let mut live = Config::default();
    for line in text.split('\n') {
        if let Some(args) = split_args(line) {
            if let [name, value @ ..] = &args[..] {
                let name = name.to_ascii_lowercase();
                if name != "dir" && name != "logfile" && name != "include" {
                    let _ = live.set(&name, value.join(" ").as_bytes());
                }
            }
        }
    }
    let _ = live.get(b"*");
    let Ok(cfg) = parse_str(&text, Config::default()) else {
        return;
    };
    let mut other = Config::default();
    for (name, value) in cfg.get(b"*") {
        if name == "dir" || name == "logfile" {
            continue;
        }
        let _ = other.set(&name, value.as_bytes());
    }
});
