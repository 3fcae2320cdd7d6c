// The PostgreSQL store through the C++ wrapper: Store::postgres and its refusals, a
// second open LOCKED, Store::open(id, true) taking a session over and the old owner
// FENCED, posts taken in by Session::receive, Store::verify, and a Follower in a second
// thread seeing every event of a writer once, in order. The server is INBOXLOG_TEST_PG
// (default postgresql://postgres@127.0.0.1:5432/test); without one the program says so
// and passes, except under CI=true. Its tables live in the schema
// INBOXLOG_TEST_PG_SCHEMA (default inboxlog_cpp_host; make test-c gives each run its own
// and drops it afterwards); the program deletes its sessions first.
#include <cstdlib>
#include <string>

#include "check.hpp"

static std::string env(const char *name, const char *fallback) {
    const char *value = std::getenv(name);
    return value != nullptr && *value != '\0' ? value : fallback;
}

static void forget(const inboxlog::Store &store, const std::string &id) {
    try {
        store.remove(id);
    } catch (const inboxlog::Error &e) {
        if (e.code() != INBOXLOG_STATUS_NOT_FOUND) throw;
    }
}

int main() {
    const std::string url = env("INBOXLOG_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test");
    const std::string schema = env("INBOXLOG_TEST_PG_SCHEMA", "inboxlog_cpp_host");
    const std::string options = R"({"schema":")" + schema + R"(","durability":"sync"})";
    std::optional<inboxlog::Store> opened;
    try {
        opened.emplace(inboxlog::Store::postgres(url, options));
    } catch (const inboxlog::Error &e) {
        if (e.code() != INBOXLOG_STATUS_UNAVAILABLE || env("CI", "") == "true") throw;
        std::printf("wrapper_postgres: SKIPPED, no server at INBOXLOG_TEST_PG: %s\n", e.what());
        return 0;
    }
    const inboxlog::Store &store = *opened;

    // Refusals, each with its status; the password never shows.
    auto e = expect_error(INBOXLOG_STATUS_INVALID_INPUT, [&] { inboxlog::Store::postgres(url, R"({"schema":"No"})"); });
    EXPECT(contains(e.what(), "not a plain SQL identifier"));
    expect_error(INBOXLOG_STATUS_INVALID_JSON, [&] { inboxlog::Store::postgres(url, "{"); });
    e = expect_error(INBOXLOG_STATUS_UNAVAILABLE, [] {
        inboxlog::Store::postgres("postgresql://u:hunter2@127.0.0.1:9/db?connect_timeout=2");
    });
    EXPECT(contains(e.what(), "127.0.0.1:9") && !contains(e.what(), "hunter2") && !contains(e.json(), "hunter2"));

    for (const char *id : {"cpp1", "cpp-live"}) forget(store, id);

    // One writer at a time; a takeover fences the old one, which wrote nothing after it.
    auto first = store.create("cpp1");
    first.append("host/note", R"({"by":"first"})");
    e = expect_error(INBOXLOG_STATUS_LOCKED, [&] { store.open("cpp1"); });
    EXPECT(contains(e.what(), "is locked by another writer"));
    expect_error(INBOXLOG_STATUS_LOCKED, [&] { store.open("cpp1", false); });
    auto second = store.open("cpp1", true);
    second.append("host/note", R"({"by":"second"})");
    e = expect_error(INBOXLOG_STATUS_FENCED, [&] { first.append("host/note", R"({"by":"first"})"); });
    EXPECT_EQ(e.kind(), "fenced");
    EXPECT(e.session() == std::optional<std::string>("cpp1"));
    const inboxlog::Events log(second.events());
    EXPECT(log.size() == 2 && contains(log[1], R"("by":"second")"));
    // The JSONL and memory stores refuse a takeover: their locks die with their owner.
    const auto memory = inboxlog::Store::memory();
    memory.create("m").close();
    expect_error(INBOXLOG_STATUS_INVALID_INPUT, [&] { memory.open("m", true); });

    // Posts from anywhere reach the owner: receive takes them in, in post order.
    const std::string post = store.post("cpp1", "next-turn", R"({"id":"q1","content":"hi"})");
    store.post("cpp1", "next-turn", R"({"id":"q2"})");
    EXPECT(second.receive() == 2);
    EXPECT_EQ(second.next_turn(), R"([{"id":"q1","content":"hi"},{"id":"q2"}])");
    EXPECT(contains(second.events(2), "\"post\":\"" + post + "\""));
    EXPECT(second.receive() == 0);
    expect_error(INBOXLOG_STATUS_NOT_FOUND, [&] { store.post("cpp-none", "next-turn", R"({"id":"x"})"); });

    // verify reads beside the live writer and changes nothing.
    EXPECT(contains(store.verify("cpp1"), R"("events":4,)"));
    expect_error(INBOXLOG_STATUS_NOT_FOUND, [&] { store.verify("cpp-none"); });

    expect_follower_sees_writer(store, "cpp-live", 10);

    first = inboxlog::Session(nullptr);
    second.close();
    for (const char *id : {"cpp1", "cpp-live"}) store.remove(id);
    std::puts("wrapper_postgres: ok");
    return 0;
}
