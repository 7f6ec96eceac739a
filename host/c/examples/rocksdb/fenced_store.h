// A fenced key-value store on RocksDB: every put and delete presents a
// fencing token, and a write whose token is older than the key's fence is
// refused, so a holder paused past its lease cannot overwrite the data of
// the holder after it.
//
// Layout: the data in the default column family, each key's fence in the
// `fences` column family under the same key. A write reads the fence,
// decides with libfencing_guard, and writes the data and the new fence in
// ONE WriteBatch (atomic, through the same WAL record), so a fence and the
// data it admitted are never apart, across a crash or a reopen.
//
// Serialization: read-decide-write of one key runs under one of 64 mutexes
// chosen by the key's hash, so two writers of a key never decide against
// the same fence. That is enough because RocksDB lets one process at a time
// open a database (its LOCK file) and nothing but this class writes the
// fences column family.
#ifndef FENCED_STORE_H
#define FENCED_STORE_H

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <rocksdb/db.h>

#include "fencing_guard.h"

namespace fenced {

// What a writer presents: its lock, its token, optionally a sequence.
struct Token {
    Token(std::string lock, uint64_t token, std::optional<uint64_t> sequence = std::nullopt)
        : lock(std::move(lock)), token(token), sequence(sequence) {}
    std::string lock;
    uint64_t token;
    std::optional<uint64_t> sequence;
};

// A key's stored fence.
struct Fence {
    std::string lock;
    uint64_t high_water = 0;
    std::optional<uint64_t> sequence;
};

// The outcome of a fenced write.
struct Result {
    enum class Kind {
        kApplied,  // admitted and written
        kRefused,  // refused by the rules: verdict holds the reason and evidence
        kError,    // not decided or not written (bad input, guard failure, storage error): nothing written
    };
    Kind kind = Kind::kError;
    fencing_verdict verdict{};
    // "admitted"; "stale_token", "wrong_lock", ... (kRefused); the error's reason (kError).
    std::string reason;
    std::string message;  // kRefused: the verdict with its evidence; kError: why

    bool applied() const { return kind == Kind::kApplied; }
};

struct Options {
    fencing_policy policy = FENCING_NON_DECREASING;
    bool sync = false;  // WriteOptions::sync of every fenced write
    // Runs between an admission and its write, with the key's stripe held
    // (the tests widen the read-decide-write window with it).
    std::function<void()> before_write;
};

class FencedStore {
   public:
    // Opens (creating if missing) the database at `path` with its two column
    // families, and the guard. nullptr and *error set on failure.
    static std::unique_ptr<FencedStore> Open(const std::string& path, const Options& options, std::string* error);
    ~FencedStore();
    FencedStore(const FencedStore&) = delete;
    FencedStore& operator=(const FencedStore&) = delete;

    Result Put(std::string_view key, const Token& token, std::string_view value);
    Result Delete(std::string_view key, const Token& token);

    // Plain reads.
    rocksdb::Status Get(std::string_view key, std::string* value);
    // The key's fence; std::nullopt when it has none. A fence that cannot be
    // decoded is a Corruption status.
    rocksdb::Status ReadFence(std::string_view key, std::optional<Fence>* fence);
    // The value and fence of `key` as of one snapshot.
    rocksdb::Status ReadBoth(std::string_view key, std::optional<std::string>* value, std::optional<Fence>* fence);

    rocksdb::DB* db() { return db_.get(); }

   private:
    FencedStore() = default;
    Result Write(std::string_view key, const Token& token, const std::string_view* value);
    rocksdb::Status ReadFenceAt(const rocksdb::ReadOptions& read, std::string_view key, std::optional<Fence>* fence);
    std::mutex& StripeOf(std::string_view key);

    struct GuardClose {
        void operator()(fencing_guard* g) const noexcept { fencing_guard_close(g); }
    };

    Options options_;
    std::unique_ptr<fencing_guard, GuardClose> guard_;
    std::vector<rocksdb::ColumnFamilyHandle*> handles_;
    std::unique_ptr<rocksdb::DB> db_;
    std::array<std::mutex, 64> stripes_;
};

// The fence's bytes in the fences column family and back:
// high_water (8 bytes, little-endian), has_sequence (1), sequence (8), lock.
std::string EncodeFence(const Fence& fence);
bool DecodeFence(std::string_view bytes, Fence* fence);

}  // namespace fenced

#endif  // FENCED_STORE_H
