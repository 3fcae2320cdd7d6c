// Fleet features through the C++ wrapper on a JSONL store: Store::post to a closed
// session, Session::receive, a rejected post, a Follower in a second thread seeing every
// event of a writer once and in order, a new follower resuming at next_seq.
#include <chrono>
#include <cstdlib>
#include <stdlib.h>
#include <string>

#include "check.hpp"

int main() {
    char root[] = "/tmp/inboxlog-cpp-fleet-XXXXXX";
    EXPECT(mkdtemp(root) != nullptr);
    const std::string dir = root;
    {
        const auto store = inboxlog::Store::jsonl(dir);
        store.create("web").close();

        // Posted while nobody owns the session; opening takes it in as one splice.
        const std::string post = store.post("web", "next-turn", R"({"id":"p1","content":"hi"})");
        EXPECT(!post.empty());
        EXPECT(store.post("web", "next-turn", R"({"id":"p2"})") != post);
        const auto missing = expect_error(INBOXLOG_STATUS_NOT_FOUND, [&] { store.post("nope", "next-turn", R"({"id":"x"})"); });
        EXPECT(missing.session() == std::optional<std::string>("nope"));
        expect_error(INBOXLOG_STATUS_INVALID_INPUT, [&] { store.post("web", "later", R"({"id":"x"})"); });
        expect_error(INBOXLOG_STATUS_INVALID_JSON, [&] { store.post("web", "next-turn", "{"); });

        auto follower = store.follow("web");
        EXPECT(follower.poll().empty());
        auto s = store.open("web");
        EXPECT_EQ(s.next_turn(), R"([{"id":"p1","content":"hi"},{"id":"p2"}])");
        const inboxlog::Events first = follower.poll(std::chrono::milliseconds(5000));
        EXPECT(first.size() == 2);
        EXPECT(contains(first[0], R"("seq":0,)") && contains(first[0], "\"post\":\"" + post + "\""));
        EXPECT(contains(first[1], R"("seq":1,)"));
        EXPECT_EQ(first.json(), "[" + first[0] + "," + first[1] + "]");
        std::size_t n = 0;
        for (const std::string &event : first) n += contains(event, "agent/inbox/spliced") ? 1 : 0;
        EXPECT(n == 2);

        // receive: nothing waiting, then a post whose id is pending becomes one rejection.
        EXPECT(s.receive() == 0);
        store.post("web", "next-step", R"({"id":"p1"})");
        store.post("web", "next-step", R"({"id":"s1"})");
        EXPECT(s.receive() == 2);
        EXPECT_EQ(s.next_step(), R"([{"id":"s1"}])");
        EXPECT(follower.next_seq() == 2);

        // Edits of the pending input travel as posts do and apply at receive.
        const std::string replaced = store.replace_pending("web", "s1", R"({"id":"s2"})");
        const std::string removed = store.remove_pending("web", "s2");
        EXPECT(!replaced.empty() && replaced != removed);
        expect_error(INBOXLOG_STATUS_INVALID_INPUT, [&] { store.remove_pending("web", ""); });
        expect_error(INBOXLOG_STATUS_NOT_FOUND, [&] { store.replace_pending("nope", "a", R"({"id":"b"})"); });
        EXPECT(s.receive() == 2);
        EXPECT_EQ(s.next_step(), "[]");

        // A new follower resumes where this one stood, with nothing skipped or repeated.
        const auto resumed = store.follow("web", follower.next_seq());
        const inboxlog::Events later = resumed.poll(std::chrono::milliseconds(5000));
        EXPECT(later.size() == 4);
        EXPECT(contains(later[0], R"({"type":"agent/inbox/rejected","seq":2,)"));
        EXPECT(contains(later[0], R"("kind":"duplicate_message")"));
        EXPECT(contains(later[1], R"("seq":3,)"));
        EXPECT(contains(later[2], R"("outcome":"canceled","post":")" + replaced + "\""));
        EXPECT(contains(later[3], R"("outcome":"canceled","post":")" + removed + "\""));
        expect_error(INBOXLOG_STATUS_NOT_FOUND, [&] { store.follow("nope"); });

        // A negative timeout is refused by the wrapper, never passed on as a huge one.
        const auto negative =
            expect_error(INBOXLOG_STATUS_INVALID_INPUT, [&] { follower.poll(std::chrono::milliseconds(-5)); });
        EXPECT(contains(negative.what(), "timeout is negative (-5 ms)"));

        // Moved-from followers refuse calls; the moved-to one goes on.
        inboxlog::Follower moved = std::move(follower);
        expect_error(INBOXLOG_STATUS_NULL_ARGUMENT, [&] { follower.next_seq(); }); // NOLINT(bugprone-use-after-move)
        EXPECT(moved.next_seq() == 2);
        s.close();

        // A writer and a follower in a second thread.
        expect_follower_sees_writer(store, "live", 25);
    }
    // The split of a poll's array: what the library never returns is refused, not guessed.
    for (const char *bad : {"", "{}", "[", "[1,]", "[,1]", "[1] x", R"(["a)", "[}]"}) {
        const auto e = expect_error(INBOXLOG_STATUS_INVALID_JSON, [&] { inboxlog::Events events(bad); });
        EXPECT(contains(e.what(), "not a JSON array"));
    }
    const inboxlog::Events nested(R"( [ {"a":[1,{"b":"],"}]} , "x\"]" ,[]] )");
    EXPECT(nested.size() == 3);
    EXPECT_EQ(nested[0], R"({"a":[1,{"b":"],"}]})");
    EXPECT_EQ(nested[1], R"("x\"]")");
    EXPECT_EQ(nested[2], "[]");
    EXPECT(inboxlog::Events(" [ ] ").empty());

    const std::string cleanup = "rm -rf '" + dir + "'";
    EXPECT(std::system(cleanup.c_str()) == 0);
    std::puts("fleet (c++): ok");
    return 0;
}
