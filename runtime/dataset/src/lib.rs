//! A C ABI over the `parquet` crate's record API, for runtime/dataset/parquet_file.cc: a Parquet
//! file's row count and its rows as JSON objects (one UTF-8 JSON text per row), so that a dataset
//! reader handles Parquet and JSONL rows alike.
//!
//! Ownership: a `TltParquet*` from `tlt_pq_open_fd` is owned by the caller and freed with
//! `tlt_pq_free`, which closes the file descriptor the handle took. Every buffer this library returns (row text, error messages) is owned by the
//! caller and freed with `tlt_pq_free_bytes`. Nothing panics across the boundary: a panic inside
//! the crate (the record API panics on a column type it does not convert) becomes an error.
//! Thread safety: one handle is used by one thread at a time (the caller serialises).

use std::fs::File;
use std::os::raw::{c_char, c_int};
use std::os::unix::io::FromRawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};

use parquet::file::reader::{FileReader, SerializedFileReader};

pub struct TltParquet {
    reader: SerializedFileReader<File>,
    // Rows before each row group: starts[g] is the index of group g's first row.
    starts: Vec<u64>,
    rows: u64,
}

fn give_bytes(bytes: Vec<u8>, out: *mut *mut c_char, out_len: *mut usize) {
    let boxed = bytes.into_boxed_slice();
    let len = boxed.len();
    let ptr = Box::into_raw(boxed) as *mut u8 as *mut c_char;
    unsafe {
        *out = ptr;
        *out_len = len;
    }
}

fn set_error(error: *mut *mut c_char, error_len: *mut usize, message: String) {
    if !error.is_null() && !error_len.is_null() {
        give_bytes(message.into_bytes(), error, error_len);
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        format!("the parquet crate panicked: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("the parquet crate panicked: {s}")
    } else {
        "the parquet crate panicked".to_string()
    }
}

fn open(file: File) -> Result<TltParquet, String> {
    let reader = SerializedFileReader::new(file).map_err(|e| e.to_string())?;
    let mut starts = Vec::new();
    let mut rows: u64 = 0;
    for g in reader.metadata().row_groups() {
        starts.push(rows);
        rows += g.num_rows().max(0) as u64;
    }
    Ok(TltParquet { reader, starts, rows })
}

/// Reads the footer of the Parquet file open as `fd` (a regular file, opened for reading: the
/// caller checked it). The handle owns `fd` from this call on: `tlt_pq_free` closes it, and so
/// does a failure here. Returns null on failure and sets `*error` to a message (caller frees).
#[no_mangle]
pub unsafe extern "C" fn tlt_pq_open_fd(
    fd: c_int,
    error: *mut *mut c_char,
    error_len: *mut usize,
) -> *mut TltParquet {
    let file = File::from_raw_fd(fd);
    match catch_unwind(AssertUnwindSafe(move || open(file))) {
        Ok(Ok(p)) => Box::into_raw(Box::new(p)),
        Ok(Err(m)) => {
            set_error(error, error_len, m);
            std::ptr::null_mut()
        }
        Err(p) => {
            set_error(error, error_len, panic_message(p));
            std::ptr::null_mut()
        }
    }
}

/// The number of rows of the file (all row groups).
#[no_mangle]
pub unsafe extern "C" fn tlt_pq_rows(p: *const TltParquet) -> u64 {
    let p = &*p;
    p.rows
}

/// The number of row groups, and the index of group `g`'s first row.
#[no_mangle]
pub unsafe extern "C" fn tlt_pq_groups(p: *const TltParquet) -> u64 {
    let p = &*p;
    p.starts.len() as u64
}
#[no_mangle]
pub unsafe extern "C" fn tlt_pq_group_start(p: *const TltParquet, g: u64) -> u64 {
    let p = &*p;
    p.starts.get(g as usize).copied().unwrap_or(p.rows)
}

fn group_json(p: &TltParquet, g: usize) -> Result<Vec<u8>, String> {
    let group = p.reader.get_row_group(g).map_err(|e| e.to_string())?;
    let iter = group.get_row_iter(None).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for row in iter {
        let row = row.map_err(|e| e.to_string())?;
        serde_json::to_writer(&mut out, &row.to_json_value()).map_err(|e| e.to_string())?;
        out.push(b'\n');
    }
    Ok(out)
}

/// The rows of row group `g` as JSON objects, one a line ('\n' ends each; JSON text holds no raw
/// newline), into `*out` (caller frees). Returns false and sets `*error` on failure.
#[no_mangle]
pub unsafe extern "C" fn tlt_pq_group_json(
    p: *const TltParquet,
    g: u64,
    out: *mut *mut c_char,
    out_len: *mut usize,
    error: *mut *mut c_char,
    error_len: *mut usize,
) -> bool {
    let p = &*p;
    let result = catch_unwind(AssertUnwindSafe(|| {
        if g as usize >= p.starts.len() {
            return Err(format!("row group {g} of {}", p.starts.len()));
        }
        group_json(p, g as usize)
    }));
    match result {
        Ok(Ok(bytes)) => {
            give_bytes(bytes, out, out_len);
            true
        }
        Ok(Err(m)) => {
            set_error(error, error_len, m);
            false
        }
        Err(e) => {
            set_error(error, error_len, panic_message(e));
            false
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn tlt_pq_free(p: *mut TltParquet) {
    if !p.is_null() {
        drop(Box::from_raw(p));
    }
}

#[no_mangle]
pub unsafe extern "C" fn tlt_pq_free_bytes(ptr: *mut c_char, len: usize) {
    if !ptr.is_null() {
        drop(Box::from_raw(std::slice::from_raw_parts_mut(ptr as *mut u8, len)));
    }
}
