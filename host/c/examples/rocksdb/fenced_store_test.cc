// The fenced RocksDB store: the GC-pause story across a close and reopen
// and across a crash, concurrent writers of one key, deletes that keep the
// fence, a checkpoint that carries it, bad input and a corrupt fence.
#include "fenced_store.h"

#include <gtest/gtest.h>
#include <rocksdb/utilities/checkpoint.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using fenced::FencedStore;
using fenced::Result;
using fenced::Token;

namespace {

const std::string kLock = "locks/orders";

class FencedStoreTest : public ::testing::Test {
   protected:
    void SetUp() override {
        char tmpl[] = "/tmp/fenced-rocksdb-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override { fs::remove_all(dir_); }

    std::unique_ptr<FencedStore> Open(const std::string& path, fenced::Options options = {}) {
        std::string error;
        auto store = FencedStore::Open(path, options, &error);
        EXPECT_NE(store, nullptr) << error;
        return store;
    }
    std::string Db() const { return dir_ + "/db"; }

    std::string dir_;
};

std::string ValueOf(FencedStore& store, const std::string& key) {
    std::string value;
    rocksdb::Status s = store.Get(key, &value);
    return s.ok() ? value : "<" + s.ToString() + ">";
}

TEST_F(FencedStoreTest, PausedHolderIsRefusedAfterReopen) {
    {
        auto store = Open(Db());
        ASSERT_TRUE(store->Put("orders/1", {kLock, 33}, "written by 33").applied());
        // 33 pauses past its lease; the lock service grants 34, which writes.
        Result r = store->Put("orders/1", {kLock, 34}, "written by 34");
        ASSERT_TRUE(r.applied()) << r.message;
        EXPECT_EQ(r.verdict.high_water, 34u);
    }  // closed
    auto store = Open(Db());
    // 33 wakes up and writes: refused with its evidence, 34's data kept.
    Result late = store->Put("orders/1", {kLock, 33}, "late write by 33");
    EXPECT_EQ(late.kind, Result::Kind::kRefused);
    EXPECT_EQ(late.reason, "stale_token");
    EXPECT_EQ(late.verdict.token, 33u);
    EXPECT_EQ(late.verdict.high_water, 34u);
    EXPECT_EQ(late.message, "stale_token: presented token 33, high-water mark 34");
    EXPECT_EQ(ValueOf(*store, "orders/1"), "written by 34");
    // Its delete too.
    EXPECT_EQ(store->Delete("orders/1", {kLock, 33}).reason, "stale_token");
    EXPECT_EQ(ValueOf(*store, "orders/1"), "written by 34");
}

TEST_F(FencedStoreTest, DeleteKeepsTheFence) {
    auto store = Open(Db());
    ASSERT_TRUE(store->Put("k", {kLock, 34}, "v").applied());
    ASSERT_TRUE(store->Delete("k", {kLock, 34}).applied());
    std::string value;
    EXPECT_TRUE(store->Get("k", &value).IsNotFound());
    std::optional<fenced::Fence> fence;
    ASSERT_TRUE(store->ReadFence("k", &fence).ok());
    ASSERT_TRUE(fence.has_value());
    EXPECT_EQ(fence->high_water, 34u);
    // The deleted key cannot be recreated by an older holder.
    EXPECT_EQ(store->Put("k", {kLock, 33}, "resurrected").reason, "stale_token");
    EXPECT_TRUE(store->Get("k", &value).IsNotFound());
    // Nor written under another lock.
    EXPECT_EQ(store->Put("k", {"locks/other", 99}, "x").reason, "wrong_lock");
}

// A writer killed without closing the database: the WAL holds data and
// fence in one record, so after recovery 33 is still refused.
TEST_F(FencedStoreTest, PausedHolderIsRefusedAfterACrash) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        std::string error;
        auto store = FencedStore::Open(Db(), {}, &error);
        bool ok = store && store->Put("orders/1", {kLock, 33}, "33").applied() &&
                  store->Put("orders/1", {kLock, 34}, "34").applied();
        _exit(ok ? 0 : 1);  // no close, no flush: as a crash
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    auto store = Open(Db());
    EXPECT_EQ(store->Put("orders/1", {kLock, 33}, "late").reason, "stale_token");
    EXPECT_EQ(ValueOf(*store, "orders/1"), "34");
}

// A checkpoint copies the fences with the data: a store opened on it
// refuses the paused holder too.
TEST_F(FencedStoreTest, CheckpointCarriesTheFence) {
    auto store = Open(Db());
    ASSERT_TRUE(store->Put("orders/1", {kLock, 34}, "34").applied());
    rocksdb::Checkpoint* checkpoint = nullptr;
    ASSERT_TRUE(rocksdb::Checkpoint::Create(store->db(), &checkpoint).ok());
    ASSERT_TRUE(checkpoint->CreateCheckpoint(dir_ + "/copy").ok());
    delete checkpoint;
    store.reset();
    auto copy = Open(dir_ + "/copy");
    EXPECT_EQ(copy->Put("orders/1", {kLock, 33}, "late").reason, "stale_token");
    EXPECT_EQ(ValueOf(*copy, "orders/1"), "34");
}

TEST_F(FencedStoreTest, BadInputIsRefusedAndWritesNothing) {
    auto store = Open(Db());
    ASSERT_TRUE(store->Put("k", {kLock, 5}, "good").applied());
    Result nul = store->Put("k", {std::string("locks/orders\0x", 14), 9}, "evil");
    EXPECT_EQ(nul.kind, Result::Kind::kError);
    EXPECT_EQ(nul.reason, "name_control");
    EXPECT_NE(nul.message.find("U+0000"), std::string::npos) << nul.message;
    EXPECT_EQ(store->Put("k", {"", 9}, "x").reason, "name_empty");
    EXPECT_EQ(store->Put("k", {"caf\xe9", 9}, "x").reason, "name_not_utf8");
    EXPECT_EQ(store->Put("k", {kLock, 0}, "x").reason, "invalid_token");
    EXPECT_EQ(store->Put("", {kLock, 9}, "x").reason, "key_empty");
    EXPECT_EQ(ValueOf(*store, "k"), "good");
    std::optional<fenced::Fence> fence;
    ASSERT_TRUE(store->ReadFence("k", &fence).ok());
    EXPECT_EQ(fence->high_water, 5u);
}

// A fence that cannot be read refuses every write of its key (fail closed).
TEST_F(FencedStoreTest, CorruptFenceRefusesWrites) {
    auto store = Open(Db());
    ASSERT_TRUE(store->Put("k", {kLock, 5}, "good").applied());
    store.reset();
    {
        // The fences column family, written as a careless operator's tool would.
        std::vector<rocksdb::ColumnFamilyDescriptor> families = {
            {rocksdb::kDefaultColumnFamilyName, {}}, {"fences", {}}};
        std::vector<rocksdb::ColumnFamilyHandle*> handles;
        rocksdb::DB* raw = nullptr;
        ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), Db(), families, &handles, &raw).ok());
        ASSERT_TRUE(raw->Put(rocksdb::WriteOptions(), handles[1], "k", "garbage").ok());
        for (auto* h : handles) raw->DestroyColumnFamilyHandle(h);
        delete raw;
    }
    store = Open(Db());
    Result r = store->Put("k", {kLock, 6}, "after corruption");
    EXPECT_EQ(r.kind, Result::Kind::kError);
    EXPECT_EQ(r.reason, "storage");
    EXPECT_EQ(ValueOf(*store, "k"), "good");
}

// Writers of one key race with tokens from a shared counter (a lock
// service's), each pausing between its admission and its write, while a
// reader checks, at one snapshot each time, that the
// stored value is the fence's token and that the fence never goes back.
TEST_F(FencedStoreTest, ConcurrentWritersNeverMoveTheFenceBack) {
    fenced::Options options;
    // Widen the window between a decision and its write: without the
    // stripe lock, another writer decides against the same fence in it.
    options.before_write = [] { std::this_thread::sleep_for(std::chrono::microseconds(200)); };
    auto store = Open(Db(), options);
    constexpr int kWriters = 8, kWrites = 300;
    std::atomic<uint64_t> next{1};
    std::atomic<int> applied{0}, refused{0}, errors{0};
    std::atomic<bool> done{false};
    std::atomic<int> went_back{0}, torn{0};
    std::thread reader([&] {
        uint64_t last = 0;
        while (!done.load()) {
            std::optional<std::string> value;
            std::optional<fenced::Fence> fence;
            if (!store->ReadBoth("hot", &value, &fence).ok() || !fence) continue;
            if (fence->high_water < last) went_back++;
            if (!value || *value != std::to_string(fence->high_water)) torn++;
            last = fence->high_water;
        }
    });
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; w++) {
        writers.emplace_back([&] {
            for (int i = 0; i < kWrites; i++) {
                uint64_t token = next.fetch_add(1);
                std::this_thread::yield();  // a pause between the grant and the write
                Result r = store->Put("hot", {kLock, token}, std::to_string(token));
                if (r.applied()) applied++;
                else if (r.kind == Result::Kind::kRefused && r.reason == "stale_token") refused++;
                else errors++;
            }
        });
    }
    for (auto& t : writers) t.join();
    done = true;
    reader.join();
    uint64_t last_token = next.load() - 1;
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(applied.load() + refused.load(), kWriters * kWrites);
    EXPECT_EQ(went_back.load(), 0);
    EXPECT_EQ(torn.load(), 0);
    std::optional<fenced::Fence> fence;
    ASSERT_TRUE(store->ReadFence("hot", &fence).ok());
    // The last token granted is above every other: it cannot have been refused.
    EXPECT_EQ(fence->high_water, last_token);
    EXPECT_EQ(ValueOf(*store, "hot"), std::to_string(last_token));
}

TEST(FenceEncoding, RoundTripsAndRefusesGarbage) {
    fenced::Fence f{"locks/\xc3\xa9", 18446744073709551615ull, 7};
    fenced::Fence back;
    ASSERT_TRUE(fenced::DecodeFence(fenced::EncodeFence(f), &back));
    EXPECT_EQ(back.lock, f.lock);
    EXPECT_EQ(back.high_water, f.high_water);
    EXPECT_EQ(back.sequence, f.sequence);
    EXPECT_FALSE(fenced::DecodeFence("short", &back));
    std::string bad = fenced::EncodeFence(f);
    bad[8] = 2;
    EXPECT_FALSE(fenced::DecodeFence(bad, &back));
}

}  // namespace
