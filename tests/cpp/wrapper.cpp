// The C++17 wrapper (include/inboxlog.hpp) over the C ABI: RAII handles, exceptions,
// a whole turn with steering on a JSONL store, and the error statuses.
#include <cstdio>
#include <cstdlib>
#include <stdlib.h>
#include <string>
#include <unistd.h>
#include <utility>

#include "check.hpp"

// The test hook of a library built with the ffi crate's testing feature (make test-c
// builds it so for the hosts); the shipped library and inboxlog.h have none.
extern "C" int inboxlog_test_panic(char **error);


int main() {
    char root[] = "/tmp/inboxlog-cpp-XXXXXX";
    EXPECT(mkdtemp(root) != nullptr);
    const std::string dir = root;
    EXPECT_EQ(inboxlog::version(), INBOXLOG_EXPECTED_VERSION);
    // Malformed error JSON (a host's own, or a truncated one) still yields the
    // inboxlog::Error with the real status, never std::invalid_argument or
    // std::out_of_range from parsing a \u escape.
    for (const char *json : {R"({"kind":"io","message":"bad \u12")", R"({"kind":"io","message":"\u)",
                             R"({"kind":"io","message":"x\uZZZZy"})", R"({"kind":"io","message":"\uD83D\u")",
                             R"({"kind":"io","message":"\uD83D\uDE00 ok"})", R"({"kind":"io","message":"\)",
                             R"({"message":"\u00e9\uDC00"})", ""}) {
        const inboxlog::Error e = inboxlog::detail::error_from(INBOXLOG_STATUS_IO, json);
        EXPECT(e.code() == INBOXLOG_STATUS_IO);
        EXPECT_EQ(e.kind(), "io");
    }
    auto message = [](const char *json) {
        return std::string(inboxlog::detail::error_from(INBOXLOG_STATUS_IO, json).what());
    };
    EXPECT_EQ(message(R"({"message":"\uD83D\uDE00 ok"})"), "\xF0\x9F\x98\x80 ok");
    EXPECT_EQ(message(R"({"message":"x\uZZZZy"})"), "x\xEF\xBF\xBD" "ZZZZy");
    EXPECT_EQ(message(R"({"message":"\u00e9\uDC00"})"), "\xC3\xA9\xEF\xBF\xBD");
    {
        auto store = inboxlog::Store::jsonl(dir, "batched");
        auto s = store.create("cpp", R"({"agentPreset":"coder"})");
        s.watch();
        s.inbox_append("next-turn", R"({"id":"m1","content":"caf\u00e9"})");
        EXPECT(s.open_turn() == 1);
        const std::string proposal = s.propose_step();
        EXPECT_EQ(proposal, R"({"turn":1,"step":1,"messages":[{"id":"m1","content":"caf\u00e9"}]})");
        EXPECT_EQ(s.decide(R"({"kind":"enter","messages":[{"id":"m1"}]})"), R"({"kind":"step","turn":1,"step":1})");
        s.append("tool/result",
                 R"({"turn":1,"step":1,"message":{"id":"r1","role":"user","content":[{"type":"tool-result",)"
                 R"("toolCallId":"c1","content":[{"type":"text","text":"ok"}]}],"source":{"kind":"tool","callId":"c1"}}})",
                 R"({"sourceEventSeqs":[0]})");
        // What the model sees: the entered message, then the result.
        EXPECT(contains(s.surface(), R"({"nodes":[4,5],"messages":[{"id":"m1"},{"id":"r1","role":"user")"));
        EXPECT_EQ(store.surface("cpp"), s.surface());
        s.inbox_append("next-step", R"({"id":"steer"})");
        EXPECT(s.end_step("continue"));
        EXPECT(contains(s.propose_step(), R"("messages":[{"id":"steer"}])"));
        s.decide(R"({"kind":"enter","messages":[{"id":"steer"}]})");
        EXPECT(!s.end_step("completed"));
        EXPECT_EQ(s.close_turn(R"({"usage":{"out":3}})"),
                  R"({"kind":"turn-end","turn":1,"reason":{"kind":"completed"}})");
        EXPECT(contains(s.events(), R"("data":{"turn":1,"reason":{"kind":"completed"},"usage":{"out":3}})"));
        s.flush();
        const std::string notes = s.poll();
        EXPECT(contains(notes, R"({"inbox":{"type":"agent/inbox/claimed","message":{"id":"steer"},"turn":1}})"));
        EXPECT_EQ(s.poll(), "[]");

        // Errors arrive as exceptions with the C status and the library's message.
        std::string msg = expect_error(INBOXLOG_STATUS_PROTOCOL, [&] { s.close_turn(); }).what();
        EXPECT(contains(msg, "idle"));
        msg = expect_error(INBOXLOG_STATUS_INVALID_JSON, [&] { s.inbox_append("next-turn", "{"); }).what();
        EXPECT(contains(msg, "message_json"));
        expect_error(INBOXLOG_STATUS_INVALID_INPUT, [&] { s.end_step("done"); });
        expect_error(INBOXLOG_STATUS_PANIC, [] {
            char *error = nullptr;
            const int status = inboxlog_test_panic(&error);
            inboxlog::detail::check(status, error);
        });
        msg = expect_error(INBOXLOG_STATUS_LOCKED, [&] { store.open("cpp"); }).what();
        EXPECT(contains(msg, "locked"));

        // Reject and cancel.
        s.inbox_append("next-turn", R"({"id":"m2"})");
        s.open_turn();
        s.propose_step();
        EXPECT(contains(s.decide(R"({"kind":"reject"})"), R"("reason":{"kind":"blocked"})"));
        s.inbox_append("next-turn", R"({"id":"m3"})");
        s.open_turn();
        EXPECT(s.current_turn() == 3);
        s.cancel(R"({"kind":"parent"})", /*keep_inbox=*/true);
        EXPECT(s.current_turn() == INBOXLOG_ABSENT);
        EXPECT(s.has_pending());
        s.cancel(R"({"kind":"parent"})");
        EXPECT(!s.has_pending());
        msg = expect_error(INBOXLOG_STATUS_INVALID_INPUT, [&] { s.baseline(s.last_seq() + 1); }).what();
        EXPECT(contains(msg, "past the end of the log"));

        // Projection and fold over the whole log.
        auto p = inboxlog::Projection::replay(s.events());
        EXPECT_EQ(p.baseline(), s.baseline());
        EXPECT(contains(inboxlog::fold_consumed_work(s.events()), R"("droppedUnrun":true)"));

        // Moves transfer ownership; the moved-from handle refuses calls.
        inboxlog::Session moved = std::move(s);
        expect_error(INBOXLOG_STATUS_NULL_ARGUMENT, [&] { s.id(); }); // NOLINT(bugprone-use-after-move)
        EXPECT_EQ(moved.id(), "cpp");
        moved.close();
        moved.close();
        expect_error(INBOXLOG_STATUS_CLOSED, [&] { moved.events(); });

        auto again = store.open("cpp");
        EXPECT_EQ(again.open_report(), R"({"tornBytes":0,"repairedTurn":null,"repairedCompaction":null})");
        EXPECT(contains(again.header(), R"("agentPreset":"coder")"));
        auto child = store.fork("cpp", "cpp-child", R"({"origin":"subagent","delegationDepth":1})");
        EXPECT(child.last_seq() == again.last_seq() + 1);
        EXPECT(contains(store.list(), R"("id":"cpp-child")"));
        expect_error(INBOXLOG_STATUS_LOCKED, [&] { store.remove("cpp-child"); });
        child.close();
        store.remove("cpp-child");
        EXPECT(!contains(store.list(), R"("id":"cpp-child")"));
        expect_error(INBOXLOG_STATUS_NOT_FOUND, [&] { store.remove("cpp-child"); });
    }
    std::string cleanup = "rm -rf '" + dir + "'";
    EXPECT(std::system(cleanup.c_str()) == 0);
    std::puts("wrapper: ok");
    return 0;
}
