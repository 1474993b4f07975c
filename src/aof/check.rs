//! `disque-server --check-aof FILE [--fix]`: validate an AOF with the same
//! reader the loader uses, report the first bad offset and why, and with
//! `--fix` truncate the file there (no questions asked: the flag is the
//! confirmation). Exit code 0 when the file is valid or was fixed.

use std::fs::{File, OpenOptions};

use super::reader::{AofReader, ReadError};

/// Returns the process exit code.
pub fn check_aof_main(file: &str, fix: bool) -> i32 {
    let f = match File::open(file) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("Cannot open file {file}: {}", crate::errors::strerror(&e));
            return 1;
        }
    };
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = AofReader::new(f);
    let mut records = 0u64;
    let (offset, why) = loop {
        match reader.next_record() {
            Ok(Some(_)) => records += 1,
            Ok(None) => {
                println!("AOF analyzed: size={size}, ok_up_to={size}, diff=0, records={records}");
                println!("AOF is valid");
                return 0;
            }
            Err(ReadError::Io(e)) => {
                eprintln!("Cannot read {file}: {}", crate::errors::strerror(&e));
                return 1;
            }
            // Not damage: a newer server wrote it. Truncating would throw
            // away a valid file, so --fix refuses.
            Err(e @ ReadError::Version { .. }) => {
                println!("AOF analyzed: size={size}, records={records}");
                println!("{e}: check it with a newer disque-server");
                return 1;
            }
            Err(e @ ReadError::Truncated { offset }) => break (offset, e.to_string()),
            Err(e @ ReadError::Corrupt { offset, .. }) => break (offset, e.to_string()),
        }
    };
    let diff = size.saturating_sub(offset);
    println!("AOF analyzed: size={size}, ok_up_to={offset}, diff={diff}, records={records}");
    println!("First problem: {why}");
    if !fix {
        println!("AOF is not valid. Use the --fix option to try fixing it.");
        return 1;
    }
    let truncated = OpenOptions::new()
        .write(true)
        .open(file)
        .and_then(|f| f.set_len(offset).and_then(|()| f.sync_all()));
    match truncated {
        Ok(()) => {
            println!(
                "Successfully truncated AOF {file} at offset {offset}: {diff} bytes removed, \
                 {records} valid records kept."
            );
            0
        }
        Err(e) => {
            println!(
                "Failed to truncate AOF {file}: {}",
                crate::errors::strerror(&e)
            );
            1
        }
    }
}
