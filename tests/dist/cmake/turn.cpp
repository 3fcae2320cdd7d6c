// A C++17 host over the installed headers (inboxlog.hpp over inboxlog.h): the version the
// CMake package reported is the library's, and one turn runs.
#include <inboxlog.hpp>

#include <cstdio>
#include <cstring>
#include <string>

int main() {
    if (std::strcmp(inboxlog_version(), INBOXLOG_EXPECTED_VERSION) != 0 ||
        std::strcmp(INBOXLOG_VERSION_STRING, INBOXLOG_EXPECTED_VERSION) != 0) {
        std::fprintf(stderr, "version: library %s, header %s, CMake package %s\n", inboxlog_version(),
                     INBOXLOG_VERSION_STRING, INBOXLOG_EXPECTED_VERSION);
        return 1;
    }
    try {
        inboxlog::Store store = inboxlog::Store::memory();
        inboxlog::Session session = store.create("installed");
        session.inbox_append("next-turn", R"({"id":"m1","content":"hi"})");
        const std::uint64_t turn = session.open_turn();
        session.propose_step();
        session.decide(R"({"kind":"enter","messages":[{"id":"m1"}]})");
        if (session.end_step("completed")) {
            std::fprintf(stderr, "end_step asked for another step\n");
            return 1;
        }
        const std::string end = session.close_turn();
        std::printf("inboxlog %s: turn %llu: %s\n", inboxlog_version(),
                    static_cast<unsigned long long>(turn), end.c_str());
        std::printf("%s\n", session.events().c_str());
    } catch (const inboxlog::Error &e) {
        std::fprintf(stderr, "inboxlog error %d (%s): %s\n", e.code(), e.kind().c_str(), e.what());
        return 1;
    }
    return 0;
}
