#include "fenced_store.h"

#include <functional>
#include <utility>

#include <rocksdb/write_batch.h>

namespace fenced {

namespace {

constexpr char kFences[] = "fences";

void PutU64(std::string* out, uint64_t v) {
    for (int i = 0; i < 8; i++) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetU64(std::string_view in) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
    return v;
}

Result Error(std::string reason, std::string message) {
    Result r;
    r.kind = Result::Kind::kError;
    r.verdict.code = FENCING_NOT_DECIDED;
    r.reason = std::move(reason);
    r.message = std::move(message);
    return r;
}

// The refusal as every fencing host words it: the reason, the presented
// token and the high-water mark.
std::string Words(const fencing_verdict& v) {
    std::string reason = fencing_reason(v.code) ? fencing_reason(v.code) : "unknown";
    switch (v.code) {
        case FENCING_STALE_TOKEN:
        case FENCING_TOKEN_REUSED:
            return reason + ": presented token " + std::to_string(v.token) + ", high-water mark " +
                   std::to_string(v.high_water);
        case FENCING_SEQUENCE_REGRESSED:
            return reason + ": token " + std::to_string(v.token) + ", presented sequence " +
                   (v.has_presented_sequence ? std::to_string(v.presented_sequence) : "none") + ", last " +
                   std::to_string(v.last_sequence);
        default:
            return reason;
    }
}

}  // namespace

std::string EncodeFence(const Fence& fence) {
    std::string out;
    PutU64(&out, fence.high_water);
    out.push_back(fence.sequence ? 1 : 0);
    PutU64(&out, fence.sequence.value_or(0));
    out.append(fence.lock);
    return out;
}

bool DecodeFence(std::string_view bytes, Fence* fence) {
    if (bytes.size() < 17 || (bytes[8] != 0 && bytes[8] != 1)) return false;
    fence->high_water = GetU64(bytes.substr(0, 8));
    fence->sequence = bytes[8] ? std::optional<uint64_t>(GetU64(bytes.substr(9, 8))) : std::nullopt;
    fence->lock.assign(bytes.substr(17));
    return true;
}

std::unique_ptr<FencedStore> FencedStore::Open(const std::string& path, const Options& options,
                                               std::string* error) {
    std::unique_ptr<FencedStore> store(new FencedStore());
    store->options_ = options;
    fencing_guard* guard = nullptr;
    fencing_error err{};
    if (fencing_guard_open(nullptr, nullptr, &guard, &err) != FENCING_OK) {
        *error = std::string("cannot open the guard: ") + err.message;
        return nullptr;
    }
    store->guard_.reset(guard);
    rocksdb::Options db_options;
    db_options.create_if_missing = true;
    db_options.create_missing_column_families = true;
    std::vector<rocksdb::ColumnFamilyDescriptor> families = {
        {rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions()},
        {kFences, rocksdb::ColumnFamilyOptions()},
    };
    rocksdb::DB* db = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(db_options, path, families, &store->handles_, &db);
    if (!s.ok()) {
        *error = "cannot open " + path + ": " + s.ToString();
        return nullptr;
    }
    store->db_.reset(db);
    return store;
}

FencedStore::~FencedStore() {
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
    handles_.clear();
    if (db_) db_->Close();
}

std::mutex& FencedStore::StripeOf(std::string_view key) {
    return stripes_[std::hash<std::string_view>{}(key) % stripes_.size()];
}

rocksdb::Status FencedStore::ReadFenceAt(const rocksdb::ReadOptions& read, std::string_view key,
                                         std::optional<Fence>* fence) {
    std::string bytes;
    rocksdb::Status s = db_->Get(read, handles_[1], rocksdb::Slice(key.data(), key.size()), &bytes);
    if (s.IsNotFound()) {
        fence->reset();
        return rocksdb::Status::OK();
    }
    if (!s.ok()) return s;
    Fence f;
    if (!DecodeFence(bytes, &f)) return rocksdb::Status::Corruption("the key's fence cannot be decoded");
    *fence = std::move(f);
    return s;
}

rocksdb::Status FencedStore::ReadFence(std::string_view key, std::optional<Fence>* fence) {
    return ReadFenceAt(rocksdb::ReadOptions(), key, fence);
}

rocksdb::Status FencedStore::Get(std::string_view key, std::string* value) {
    return db_->Get(rocksdb::ReadOptions(), handles_[0], rocksdb::Slice(key.data(), key.size()), value);
}

rocksdb::Status FencedStore::ReadBoth(std::string_view key, std::optional<std::string>* value,
                                      std::optional<Fence>* fence) {
    const rocksdb::Snapshot* snapshot = db_->GetSnapshot();
    rocksdb::ReadOptions read;
    read.snapshot = snapshot;
    std::string bytes;
    rocksdb::Status s = db_->Get(read, handles_[0], rocksdb::Slice(key.data(), key.size()), &bytes);
    if (s.ok()) *value = std::move(bytes);
    else if (s.IsNotFound()) value->reset(), s = rocksdb::Status::OK();
    if (s.ok()) s = ReadFenceAt(read, key, fence);
    db_->ReleaseSnapshot(snapshot);
    return s;
}

Result FencedStore::Put(std::string_view key, const Token& token, std::string_view value) {
    return Write(key, token, &value);
}

Result FencedStore::Delete(std::string_view key, const Token& token) { return Write(key, token, nullptr); }

// Read the fence, decide, write data and fence in one batch: under the
// key's stripe, so no other writer of the key decides in between.
Result FencedStore::Write(std::string_view key, const Token& token, const std::string_view* value) {
    if (key.empty()) return Error("key_empty", "the key is empty");
    std::lock_guard<std::mutex> hold(StripeOf(key));
    std::optional<Fence> stored;
    rocksdb::Status s = ReadFence(key, &stored);
    if (!s.ok()) return Error("storage", "cannot read the fence, refusing the write: " + s.ToString());

    fencing_fence current{};
    if (stored) {
        current.lock = stored->lock.data();
        current.lock_len = stored->lock.size();
        current.high_water = stored->high_water;
        current.sequence = stored->sequence.value_or(0);
        current.has_sequence = stored->sequence.has_value();
    }
    fencing_sequencer presented{};
    presented.lock = token.lock.data();
    presented.lock_len = token.lock.size();
    presented.token = token.token;
    presented.sequence = token.sequence.value_or(0);
    presented.has_sequence = token.sequence.has_value();
    Result r;
    fencing_error err{};
    if (fencing_admit(guard_.get(), stored ? &current : nullptr, &presented, options_.policy, &r.verdict, &err) !=
        FENCING_OK)
        return Error(err.reason, err.message);
    if (!r.verdict.admitted) {
        r.kind = Result::Kind::kRefused;
        r.reason = fencing_reason(r.verdict.code);
        r.message = Words(r.verdict);
        return r;
    }

    Fence next{token.lock, r.verdict.high_water,
               r.verdict.has_sequence ? std::optional<uint64_t>(r.verdict.sequence) : std::nullopt};
    if (options_.before_write) options_.before_write();
    rocksdb::WriteBatch batch;
    rocksdb::Slice k(key.data(), key.size());
    s = value ? batch.Put(handles_[0], k, rocksdb::Slice(value->data(), value->size())) : batch.Delete(handles_[0], k);
    if (s.ok()) s = batch.Put(handles_[1], k, EncodeFence(next));
    rocksdb::WriteOptions write;
    write.sync = options_.sync;
    if (s.ok()) s = db_->Write(write, &batch);
    if (!s.ok()) return Error("storage", "the write failed, nothing was applied: " + s.ToString());
    r.kind = Result::Kind::kApplied;
    r.reason = "admitted";
    return r;
}

}  // namespace fenced
