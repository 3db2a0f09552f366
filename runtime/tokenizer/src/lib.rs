//! A C ABI over Hugging Face's `tokenizers` crate, for runtime/tokenizer/hf_tokenizer.cc.
//!
//! Ownership: a `TltTokenizer*` from `tlt_tok_from_json` is owned by the caller and freed with
//! `tlt_tok_free`. Every buffer this library returns (ids, text, error messages) is owned by the
//! caller and freed with `tlt_tok_free_ids` or `tlt_tok_free_bytes`. Nothing panics across the
//! boundary: a panic inside the crate becomes an error message.
//! Thread safety: a tokenizer is immutable after construction; encode and decode may run from
//! several threads at once.

use std::os::raw::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

use tokenizers::Tokenizer;

pub struct TltTokenizer {
    inner: Tokenizer,
}

/// Hands `bytes` to the caller as (pointer, length); freed by `tlt_tok_free_bytes`.
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
        format!("tokenizers panicked: {s}")
    } else if let Some(s) = p.downcast_ref::<String>() {
        format!("tokenizers panicked: {s}")
    } else {
        "tokenizers panicked".to_string()
    }
}

unsafe fn slice<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(ptr, len)
    }
}

/// Parses a tokenizer.json document (`json`, `len` bytes, UTF-8). Returns null on failure and
/// sets `*error` to a message (caller frees).
#[no_mangle]
pub unsafe extern "C" fn tlt_tok_from_json(
    json: *const u8,
    len: usize,
    error: *mut *mut c_char,
    error_len: *mut usize,
) -> *mut TltTokenizer {
    let bytes = slice(json, len);
    let result = catch_unwind(AssertUnwindSafe(|| Tokenizer::from_bytes(bytes)));
    match result {
        Ok(Ok(t)) => Box::into_raw(Box::new(TltTokenizer { inner: t })),
        Ok(Err(e)) => {
            set_error(error, error_len, e.to_string());
            std::ptr::null_mut()
        }
        Err(p) => {
            set_error(error, error_len, panic_message(p));
            std::ptr::null_mut()
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn tlt_tok_free(t: *mut TltTokenizer) {
    if !t.is_null() {
        drop(Box::from_raw(t));
    }
}

#[no_mangle]
pub unsafe extern "C" fn tlt_tok_free_bytes(p: *mut c_char, len: usize) {
    if !p.is_null() {
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(p as *mut u8, len)));
    }
}

#[no_mangle]
pub unsafe extern "C" fn tlt_tok_free_ids(p: *mut u32, len: usize) {
    if !p.is_null() {
        drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)));
    }
}

/// Encodes `text` (`len` bytes; invalid UTF-8 sequences become U+FFFD first). With
/// `add_special`, the tokenizer's post-processor adds its special tokens (BOS...). Returns 0 and
/// sets `*ids`/`*n_ids` (caller frees), or -1 and sets `*error`.
#[no_mangle]
pub unsafe extern "C" fn tlt_tok_encode(
    t: *const TltTokenizer,
    text: *const u8,
    len: usize,
    add_special: bool,
    ids: *mut *mut u32,
    n_ids: *mut usize,
    error: *mut *mut c_char,
    error_len: *mut usize,
) -> i32 {
    let tok = &(*t).inner;
    let input = String::from_utf8_lossy(slice(text, len)).into_owned();
    let result = catch_unwind(AssertUnwindSafe(|| tok.encode(input, add_special)));
    match result {
        Ok(Ok(enc)) => {
            let boxed = enc.get_ids().to_vec().into_boxed_slice();
            *n_ids = boxed.len();
            *ids = Box::into_raw(boxed) as *mut u32;
            0
        }
        Ok(Err(e)) => {
            set_error(error, error_len, e.to_string());
            -1
        }
        Err(p) => {
            set_error(error, error_len, panic_message(p));
            -1
        }
    }
}

/// Decodes `ids` to UTF-8 text (`*text`, `*text_len`; caller frees). With `skip_special`,
/// special tokens are left out. Returns 0, or -1 and sets `*error` (e.g. an id out of range).
#[no_mangle]
pub unsafe extern "C" fn tlt_tok_decode(
    t: *const TltTokenizer,
    ids: *const u32,
    n_ids: usize,
    skip_special: bool,
    text: *mut *mut c_char,
    text_len: *mut usize,
    error: *mut *mut c_char,
    error_len: *mut usize,
) -> i32 {
    let tok = &(*t).inner;
    let ids = slice(ids, n_ids);
    let result = catch_unwind(AssertUnwindSafe(|| tok.decode(ids, skip_special)));
    match result {
        Ok(Ok(s)) => {
            give_bytes(s.into_bytes(), text, text_len);
            0
        }
        Ok(Err(e)) => {
            set_error(error, error_len, e.to_string());
            -1
        }
        Err(p) => {
            set_error(error, error_len, panic_message(p));
            -1
        }
    }
}

/// The id of token `token` (`len` bytes), or -1 when the vocabulary has no such token.
#[no_mangle]
pub unsafe extern "C" fn tlt_tok_token_to_id(
    t: *const TltTokenizer,
    token: *const u8,
    len: usize,
) -> i64 {
    let tok = &(*t).inner;
    match std::str::from_utf8(slice(token, len)) {
        Ok(s) => tok.token_to_id(s).map(|id| id as i64).unwrap_or(-1),
        Err(_) => -1,
    }
}

/// The text of token `id` as stored in the vocabulary (`*out`, `*out_len`; caller frees).
/// Returns 0, or -1 when `id` is not in the vocabulary.
#[no_mangle]
pub unsafe extern "C" fn tlt_tok_id_to_token(
    t: *const TltTokenizer,
    id: u32,
    out: *mut *mut c_char,
    out_len: *mut usize,
) -> i32 {
    let tok = &(*t).inner;
    match tok.id_to_token(id) {
        Some(s) => {
            give_bytes(s.into_bytes(), out, out_len);
            0
        }
        None => -1,
    }
}

/// Whether `id` is an added token marked special (control tokens such as <|im_end|>).
#[no_mangle]
pub unsafe extern "C" fn tlt_tok_is_special(t: *const TltTokenizer, id: u32) -> bool {
    let tok = &(*t).inner;
    tok.get_added_tokens_decoder()
        .get(&id)
        .map(|a| a.special)
        .unwrap_or(false)
}

/// Number of ids, added tokens included (one past the largest id).
#[no_mangle]
pub unsafe extern "C" fn tlt_tok_vocab_size(t: *const TltTokenizer) -> usize {
    (*t).inner.get_vocab_size(true)
}
