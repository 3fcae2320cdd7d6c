// Store::from_url, the one constructor for every backend (inboxlog_store_open): memory,
// a JSONL directory, and the refusals of an option a backend has no use for.
#include <stdlib.h>
#include <string>
#include <unistd.h>

#include "check.hpp"

int main() {
    {
        const auto memory = inboxlog::Store::from_url("memory:");
        memory.create("m").append("host/a", R"({"n":1})");
        EXPECT(contains(memory.list(), R"("id":"m")"));
        expect_error(INBOXLOG_STATUS_INVALID_INPUT,
                     [] { inboxlog::Store::from_url("memory:", R"({"schema":"x"})"); });
    }
    char root[] = "/tmp/inboxlog-cpp-store-open-XXXXXX";
    EXPECT(mkdtemp(root) != nullptr);
    {
        const auto jsonl = inboxlog::Store::from_url(root, R"({"durability":"none"})");
        jsonl.create("j").append("host/a", R"({"n":1})");
        // The same directory through the backend's own constructor sees the same log.
        EXPECT(contains(inboxlog::Store::jsonl(root).list(), R"("id":"j")"));
        const auto refused = expect_error(INBOXLOG_STATUS_INVALID_INPUT,
                                          [&] { inboxlog::Store::from_url(root, R"({"schema":"x"})"); });
        EXPECT(contains(refused.what(), "schema"));
        jsonl.remove("j");
    }
    EXPECT(rmdir(root) == 0);
    std::puts("wrapper_store_open: ok");
    return 0;
}
