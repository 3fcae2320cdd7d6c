// Test helpers for the C++ hosts: every mismatch prints where and exits non-zero.
#ifndef INBOXLOG_TEST_CHECK_HPP
#define INBOXLOG_TEST_CHECK_HPP

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "inboxlog.hpp"

#define EXPECT(cond)                                                                  \
    do {                                                                              \
        if (!(cond)) {                                                                \
            std::fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);  \
            std::exit(1);                                                             \
        }                                                                             \
    } while (0)

#define EXPECT_EQ(got, want)                                                          \
    do {                                                                              \
        if ((got) != (want)) {                                                        \
            std::fprintf(stderr, "%s:%d:\n got  %s\n want %s\n", __FILE__, __LINE__,  \
                         std::string(got).c_str(), std::string(want).c_str());        \
            std::exit(1);                                                             \
        }                                                                             \
    } while (0)

/// Runs `body`, which must throw inboxlog::Error with `code`; returns the error.
template <class F> inboxlog::Error expect_error(int code, F body) {
    try {
        body();
    } catch (const inboxlog::Error &e) {
        if (e.code() != code) {
            std::fprintf(stderr, "wanted code %d, got %d (%s): %s\n", code, e.code(), e.kind().c_str(), e.what());
            std::exit(1);
        }
        return e;
    }
    std::fprintf(stderr, "wanted an inboxlog::Error with code %d, nothing was thrown\n", code);
    std::exit(1);
}

inline bool contains(const std::string &haystack, const std::string &needle) {
    return haystack.find(needle) != std::string::npos;
}

/// A writer appends `turns` turns (each a posted prompt, a step, a host event) and one
/// host/done event to session `id` while a follower polls it from a second thread; the
/// follower must see every event of the log exactly once, in seq order, byte for byte
/// as the writer's events() prints it.
inline void expect_follower_sees_writer(const inboxlog::Store &store, const std::string &id, int turns) {
    auto s = store.create(id);
    auto follower = store.follow(id);
    std::vector<std::string> seen;
    std::thread reader([&] {
        // Bounded so a lost event fails the test instead of hanging it.
        for (int polls = 0; polls < 600; ++polls) {
            for (const std::string &event : follower.poll(std::chrono::milliseconds(100))) {
                seen.push_back(event);
                if (contains(event, R"("type":"host/done")")) return;
            }
        }
    });
    for (int k = 0; k < turns; ++k) {
        const std::string n = std::to_string(k);
        store.post(id, "next-turn", R"({"id":"p)" + n + R"(","content":"task )" + n + R"("})");
        s.open_turn();
        const std::string proposal = s.propose_step(); // takes the post in first
        EXPECT(contains(proposal, R"("id":"p)" + n + "\""));
        s.decide(R"({"kind":"enter","messages":[{"id":"p)" + n + R"("}]})");
        s.append("assistant/message",
                 R"({"turn":)" + std::to_string(k + 1) + R"(,"step":1,"message":{"id":"a)" + n +
                     R"(","role":"assistant","content":[{"type":"text","text":"done"}],)"
                     R"("source":{"kind":"model","provider":"c++","model":"host"}},"answers":"p)" +
                     n + R"("})");
        EXPECT(!s.end_step("completed"));
        s.close_turn();
    }
    s.append("host/done", "{}");
    reader.join();
    const inboxlog::Events written(s.events());
    EXPECT(written.size() == static_cast<std::size_t>(turns) * 8 + 1);
    EXPECT(seen.size() == written.size());
    for (std::size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], written[i]);
    EXPECT(follower.next_seq() == written.size());
    EXPECT(follower.poll().empty());
    s.close();
}

#endif
