/*
 * fencing_guard.h: the fencing check for C and C++ storage engines.
 *
 * A lock service hands each holder a fencing token; the engine keeps a
 * durable fence per resource (the lock it is bound to, the highest admitted
 * token, the last sequence under it) and must refuse any write whose token is
 * older. This library makes that decision: it runs the fencing:guard@0.3.0
 * component (the rules, written once) inside the engine's process, under
 * bounded time and memory, and answers with a verdict code and its evidence.
 *
 * The engine's part, for every fenced write:
 *   1. read the resource's stored fence (none yet: pass NULL);
 *   2. fencing_admit() with the fence and what the writer presents;
 *   3. if verdict.admitted, write the data AND the new fence
 *      {presented lock, verdict.high_water, verdict.sequence} in ONE atomic
 *      write; otherwise refuse the write and change nothing;
 *   4. on any status other than FENCING_OK, refuse the write (fail closed).
 * Steps 1 to 3 must not interleave with another write to the same resource
 * (a lock per resource, or a transaction that conflicts on the fence).
 *
 * Conventions, for every function below:
 * - Every function returns a fencing_status; FENCING_OK (0) is success.
 *   Any other status means nothing was decided: the write must be refused.
 *   `err` may be NULL; when it is not, it is filled on every call (status,
 *   a stable reason such as "name_control", and a message), so its contents
 *   never carry over from an earlier call.
 * - Names (locks) are (pointer, length) byte strings, never NUL-terminated:
 *   a name is 1 to 256 characters of UTF-8 with no control character (NUL
 *   included) and no whitespace at either end; anything else is refused
 *   with FENCING_ERR_ARGUMENT, never truncated.
 * - Outputs (verdicts, fence states, parsed values) are caller-owned memory
 *   the library writes into during the call and never keeps. On an error
 *   every verdict the call was given is written as "not decided":
 *   code FENCING_NOT_DECIDED, admitted 0.
 * - Required pointers that are NULL, lengths of zero where something is
 *   required and counts beyond the stated bounds return an error, never a
 *   crash. No C++ exception and no Rust panic leaves the library: a fault
 *   inside it is returned as FENCING_ERR_INTERNAL with its text.
 * - Threads: a guard is safe to share between threads. Every function may
 *   be called from any thread at the same time as any other, on the same
 *   guard, except fencing_guard_close(), which must be the last call on
 *   that guard (no call may run or start on it during or after it). Each
 *   thread that decides keeps a sandbox instance of its own (its memory
 *   bounded at 64 MiB), reused by its later calls without a lock and kept
 *   until the thread exits or decides on another guard.
 * - Processes: a guard does not survive fork(): its deadline thread is not
 *   copied, so a child opens guards of its own. The library must not be
 *   unloaded (dlclose) while the process runs: its threads and thread-local
 *   instances live in it.
 *
 * Link with `pkg-config --cflags --libs fencing_guard` (shared library) or
 * `pkg-config --static --cflags --libs fencing_guard` (static). Reference:
 * docs/c-api.md.
 */
#ifndef FENCING_GUARD_H
#define FENCING_GUARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define FENCING_NOEXCEPT noexcept
extern "C" {
#else
#define FENCING_NOEXCEPT
#endif

/* ---- Version ---------------------------------------------------------- */

/* The ABI of this header. A program built against major M runs with any
 * library of major M and minor >= its own; the shared library's soname is
 * libfencing_guard.so.<major>. */
#define FENCING_GUARD_ABI_MAJOR 1
#define FENCING_GUARD_ABI_MINOR 0
#define FENCING_GUARD_ABI_VERSION ((uint32_t)((FENCING_GUARD_ABI_MAJOR << 16) | FENCING_GUARD_ABI_MINOR))

/* The contract the embedded rules implement. */
#define FENCING_GUARD_CONTRACT "fencing:guard@0.3.0"

/* The library's ABI version, (major << 16) | minor. Compare its major with
 * FENCING_GUARD_ABI_MAJOR at start-up. Any thread, any time. */
uint32_t fencing_guard_abi_version(void) FENCING_NOEXCEPT;

/* ---- Statuses and errors ---------------------------------------------- */

typedef int32_t fencing_status;

enum {
    FENCING_OK = 0,
    /* A required pointer is NULL (reason "null_argument"). */
    FENCING_ERR_NULL = 1,
    /* An argument is refused by the rule for its kind: a name, a policy, a
     * number or a proof as text, a count (reason: the rule's code, e.g.
     * "name_control", "policy_unknown", "count_too_large"). */
    FENCING_ERR_ARGUMENT = 2,
    /* Verifier keys refused ("keys_empty", "keys_too_many",
     * "key_duplicate_id", "key_bad", "key_algorithm_unknown", "keys_text"). */
    FENCING_ERR_KEYS = 3,
    /* The guard could not decide ("guard_timeout", "guard_out_of_memory",
     * "guard_trap", "guard_unavailable"): refuse the write. The next call
     * runs on a fresh sandbox instance. */
    FENCING_ERR_GUARD = 4,
    /* fencing_guard_open could not load the component ("guard_load"). */
    FENCING_ERR_LOAD = 5,
    /* A fault inside the library, caught at its boundary ("internal"). */
    FENCING_ERR_INTERNAL = 6
};

#define FENCING_REASON_BYTES 32
#define FENCING_MESSAGE_BYTES 256

/* What went wrong, filled by every call given one. Both texts are
 * NUL-terminated UTF-8; the message is cut at a character boundary to fit.
 * A message never repeats a caller's name or proof bytes. */
typedef struct fencing_error {
    fencing_status status;
    char reason[FENCING_REASON_BYTES];   /* stable snake_case code; "" on FENCING_OK */
    char message[FENCING_MESSAGE_BYTES]; /* for people: the field, the rule, the bound */
} fencing_error;

/* ---- Verdicts --------------------------------------------------------- */

/* Verdict codes: the rules' codes (the WIT's verdict-code), stable. */
enum {
    FENCING_ADMITTED = 0,           /* admitted under the high-water mark's token */
    FENCING_ADMITTED_NEW_TERM = 1,  /* admitted; the token is above the old mark (or there was no fence) */
    FENCING_INVALID_TOKEN = 2,      /* token 0 */
    FENCING_WRONG_LOCK = 3,         /* the fence is bound to another lock */
    FENCING_STALE_TOKEN = 4,        /* token below the high-water mark */
    FENCING_TOKEN_REUSED = 5,       /* strictly-increasing policy, token equal to the mark */
    FENCING_SEQUENCE_REGRESSED = 6, /* same token, sequence missing or not above the last */
    FENCING_PROOF_NO_KEYS = 7,      /* signed: the guard has no verifier keys */
    FENCING_PROOF_MISSING = 8,      /* signed: the write carries no proof */
    FENCING_PROOF_MALFORMED = 9,    /* signed: not a proof of this format */
    FENCING_PROOF_UNKNOWN_KEY = 10, /* signed: the proof names a key the guard does not hold */
    FENCING_PROOF_BAD = 11,         /* signed: not made for this lock and token by its key */
    FENCING_NOT_DECIDED = 255       /* written on error: no decision, refuse the write */
};

/* One decision and its evidence (56 bytes). Test `admitted`. */
typedef struct fencing_verdict {
    uint32_t code;               /* FENCING_ADMITTED ... FENCING_PROOF_BAD, or FENCING_NOT_DECIDED */
    uint32_t key_id;             /* PROOF_UNKNOWN_KEY: the key id the proof names */
    /* Admitted: the new fence's high-water mark (persist it with the write).
     * STALE_TOKEN, TOKEN_REUSED: the mark the token was compared with. */
    uint64_t high_water;
    uint64_t sequence;           /* admitted: the new fence's last sequence, if has_sequence */
    /* STALE_TOKEN, TOKEN_REUSED, SEQUENCE_REGRESSED: the presented token. */
    uint64_t token;
    uint64_t presented_sequence; /* SEQUENCE_REGRESSED: the presented sequence, if has_presented_sequence */
    uint64_t last_sequence;      /* SEQUENCE_REGRESSED: the fence's last sequence */
    uint8_t admitted;            /* 1 for FENCING_ADMITTED and FENCING_ADMITTED_NEW_TERM, else 0 */
    uint8_t new_term;            /* 1 for FENCING_ADMITTED_NEW_TERM */
    uint8_t has_sequence;
    uint8_t has_presented_sequence;
    uint8_t reserved[4];
} fencing_verdict;

/* The stable snake_case name of a verdict code ("admitted", "stale_token",
 * "proof_unknown_key", ...; "not_decided" for FENCING_NOT_DECIDED), the
 * word every fencing host uses; NULL for any other value. A static string.
 * Any thread, any time. */
const char *fencing_reason(uint32_t code) FENCING_NOEXCEPT;

/* ---- Inputs ----------------------------------------------------------- */

typedef uint32_t fencing_policy;
enum {
    FENCING_NON_DECREASING = 0,     /* a holder may write many times under its token */
    FENCING_STRICTLY_INCREASING = 1 /* every write needs a new token */
};

/* A resource's stored fence (40 bytes). A flag is true when non-zero. */
typedef struct fencing_fence {
    const char *lock; /* the lock it is bound to: a name, lock_len bytes */
    size_t lock_len;
    uint64_t high_water;
    uint64_t sequence; /* read when has_sequence */
    uint8_t has_sequence;
    uint8_t reserved[7];
} fencing_fence;

/* What a writer presents (40 bytes). */
typedef struct fencing_sequencer {
    const char *lock; /* the lock its token is from: a name, lock_len bytes */
    size_t lock_len;
    uint64_t token;
    uint64_t sequence; /* read when has_sequence */
    uint8_t has_sequence;
    uint8_t reserved[7];
} fencing_sequencer;

/* One write of a batch (24 bytes). */
typedef struct fencing_write {
    uint64_t token;
    uint64_t sequence; /* read when has_sequence */
    uint8_t has_sequence;
    uint8_t reserved[7];
} fencing_write;

/* The numeric fence after a batch (24 bytes). */
typedef struct fencing_fence_state {
    uint64_t high_water;
    uint64_t sequence;
    uint8_t has_fence;    /* 0: the resource still has no fence */
    uint8_t has_sequence;
    uint8_t reserved[6];
} fencing_fence_state;

/* The most writes of one batch and tokens of one stream. */
#define FENCING_MAX_BATCH ((size_t)1 << 20)

/* ---- The guard -------------------------------------------------------- */

typedef struct fencing_guard fencing_guard;

/* Loads the guard: the embedded component when `plugin_path` is NULL, else
 * the fencing:guard component file at that path (NUL-terminated). With
 * `cache_dir` (NULL: none) the compiled component is kept there and the next
 * open loads it instead of compiling (about 0.1 s saved). On FENCING_OK,
 * *out is the guard, to be closed with fencing_guard_close; otherwise *out
 * is NULL. Installs no signal handler and starts no compile thread; one
 * background thread per guard advances the call deadline (every signal
 * blocked on it). Any thread, any time. */
fencing_status fencing_guard_open(const char *plugin_path, const char *cache_dir, fencing_guard **out,
                                  fencing_error *err) FENCING_NOEXCEPT;

/* Frees the guard. NULL is ignored. Must be the last call on `guard`: no
 * other call may run on it, from any thread, during or after this one. */
void fencing_guard_close(fencing_guard *guard) FENCING_NOEXCEPT;

/* Decides one write against the resource's stored fence (`current` NULL: no
 * fence yet). On FENCING_OK, *out holds the verdict; if out->admitted,
 * persist {presented->lock, out->high_water, out->sequence if
 * out->has_sequence} with the write, in one atomic write. Any thread, any
 * time, concurrently on one guard. */
fencing_status fencing_admit(const fencing_guard *guard, const fencing_fence *current,
                             const fencing_sequencer *presented, fencing_policy policy, fencing_verdict *out,
                             fencing_error *err) FENCING_NOEXCEPT;

/* Algorithms of verifier keys. */
enum {
    FENCING_ED25519 = 0,    /* 32-byte public key */
    FENCING_HMAC_SHA256 = 1 /* 32- to 64-byte shared secret */
};

/* One key the lock service's proofs are checked with (24 bytes). */
typedef struct fencing_key {
    uint32_t id;
    uint32_t algorithm;      /* FENCING_ED25519 or FENCING_HMAC_SHA256 */
    const uint8_t *material; /* material_len bytes */
    size_t material_len;
} fencing_key;

/* Installs the keys signed writes are checked with: 1 to 64 keys, ids
 * distinct, each a key of its algorithm; copied, so the caller's memory may
 * be freed afterwards. Replaces the guard's keys at once (rotation: pass the
 * old and the new key together, then the new alone). On error the keys the
 * guard had stay. Any thread, any time; a decision running at the same time
 * uses the old or the new keys, never a mix. */
fencing_status fencing_guard_set_keys(fencing_guard *guard, const fencing_key *keys, size_t count,
                                      fencing_error *err) FENCING_NOEXCEPT;

/* As fencing_guard_set_keys, from text: one key a line (or several on a line
 * separated by commas), each `<id> <algorithm> <hex>` (`ed25519` or
 * `hmac-sha256`), blank lines and lines starting with `#` skipped: the form
 * of the reference server's key files. At most 65536 bytes. */
fencing_status fencing_guard_set_keys_text(fencing_guard *guard, const char *text, size_t text_len,
                                           fencing_error *err) FENCING_NOEXCEPT;

/* Forgets the guard's keys: signed decisions answer FENCING_PROOF_NO_KEYS
 * until keys are set again. Any thread, any time. */
fencing_status fencing_guard_clear_keys(fencing_guard *guard, fencing_error *err) FENCING_NOEXCEPT;

/* Decides one signed write: the proof (the grant's bytes, proof_len of them;
 * NULL with 0 is no proof) must show that the lock service granted
 * presented->token for presented->lock under one of the guard's keys; then
 * the write is decided as fencing_admit does. A refused proof is a verdict
 * (FENCING_PROOF_*), not an error; proof_len above 256 is an error. Any
 * thread, any time, concurrently on one guard. */
fencing_status fencing_admit_signed(const fencing_guard *guard, const fencing_fence *current,
                                    const fencing_sequencer *presented, const uint8_t *proof, size_t proof_len,
                                    fencing_policy policy, fencing_verdict *out, fencing_error *err) FENCING_NOEXCEPT;

/* Decides `count` writes (1 to FENCING_MAX_BATCH) to one resource under
 * `lock`, in order, each against the fence left by the writes admitted
 * before it. verdicts[i] (the caller's array of `count`) is the verdict of
 * writes[i]; *after (may be NULL) is the fence to persist with the admitted
 * writes. Any thread, any time, concurrently on one guard. */
fencing_status fencing_admit_batch(const fencing_guard *guard, const fencing_fence *current, const char *lock,
                                   size_t lock_len, const fencing_write *writes, size_t count,
                                   fencing_policy policy, fencing_verdict *verdicts, fencing_fence_state *after,
                                   fencing_error *err) FENCING_NOEXCEPT;

/* Decides `count` sequence-less tokens (1 to FENCING_MAX_BATCH) on one
 * resource whose fence holds no sequence and whose lock binding the caller
 * has checked (`high_water` 0: no fence). verdicts[i] is the verdict of
 * tokens[i] (FENCING_ADMITTED, FENCING_ADMITTED_NEW_TERM,
 * FENCING_INVALID_TOKEN, FENCING_STALE_TOKEN or FENCING_TOKEN_REUSED, with
 * the mark before it as evidence); *high_water_after (may be NULL) is the
 * mark after the stream. Any thread, any time, concurrently on one guard. */
fencing_status fencing_admit_stream(const fencing_guard *guard, uint64_t high_water, const uint64_t *tokens,
                                    size_t count, fencing_policy policy, fencing_verdict *verdicts,
                                    uint64_t *high_water_after, fencing_error *err) FENCING_NOEXCEPT;

/* ---- What a host accepts (no guard needed; any thread, any time) ------ */

/* FENCING_OK when `name` (len bytes) is a name, else FENCING_ERR_ARGUMENT
 * with the rule's code ("name_empty", "name_too_long", "name_not_utf8",
 * "name_control", "name_whitespace"). */
fencing_status fencing_check_name(const char *name, size_t len, fencing_error *err) FENCING_NOEXCEPT;

/* A policy from its contract name, spelled exactly: "non-decreasing" or
 * "strictly-increasing" ("policy_unknown" otherwise). */
fencing_status fencing_parse_policy(const char *text, size_t len, fencing_policy *out,
                                    fencing_error *err) FENCING_NOEXCEPT;

/* A token or sequence from its canonical decimal text: digits only, no sign,
 * space or leading zero, at most 18446744073709551615 ("number_not_decimal",
 * "number_leading_zero", "number_too_large"). */
fencing_status fencing_parse_number(const char *text, size_t len, uint64_t *out, fencing_error *err) FENCING_NOEXCEPT;

/* A proof from its hex text (the grant's `fencing_proof`; two digits a byte,
 * either case, at most 512 digits; "" is the empty proof): its bytes into
 * out[0..capacity), their number in *out_len ("proof_too_long",
 * "proof_not_hex"; "count_too_large" when capacity is too small; 256 always
 * suffices). `out` may be NULL when capacity is 0. */
fencing_status fencing_parse_proof(const char *text, size_t len, uint8_t *out, size_t capacity, size_t *out_len,
                                   fencing_error *err) FENCING_NOEXCEPT;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FENCING_GUARD_H */
