// The C++ wrapper's errors as data and the checks that report them: Store::verify of a
// sound and of a corrupt JSONL log (the Error names session, path, line, offset, seq),
// location keys read from the error JSON's own keys only, and
// Session::take_observer_failures.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdlib.h>
#include <string>

#include "check.hpp"

// The test hook of a library built with the ffi crate's testing feature (make test-c
// builds it so for the hosts): an event observer that fails on every event.
extern "C" int inboxlog_test_failing_observer(inboxlog_session *session, char **error);

static std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream all;
    all << in.rdbuf();
    return all.str();
}

int main() {
    char root[] = "/tmp/inboxlog-cpp-errors-XXXXXX";
    EXPECT(mkdtemp(root) != nullptr);
    const std::string dir = root;
    {
        const auto store = inboxlog::Store::jsonl(dir);
        {
            auto s = store.create("log");
            s.append("host/a", R"({"n":1})");
            s.append("host/b", R"({"n":2})");
            s.append("host/c", R"({"n":3})");
            s.open_turn();
        }
        // Sound, with an open turn that opening would close as interrupted.
        const std::string report = store.verify("log");
        EXPECT(contains(report, R"("events":4,"tornBytes":0,"openTurn":1,"openStep":null,"parked":false,"needsRepair":true)"));
        const auto absent = expect_error(INBOXLOG_STATUS_NOT_FOUND, [&] { store.verify("nope"); });
        EXPECT(absent.session() == std::optional<std::string>("nope"));
        EXPECT(!absent.line() && !absent.offset());

        // Line 3 (the event at seq 1) rewritten with a seq that skips ahead, in a log as
        // a crash leaves it: without the checkpoint its close wrote (opening trusts a
        // checkpoint for the lines before it; verify reads them all either way).
        EXPECT(std::remove((dir + "/log.checkpoint").c_str()) == 0);
        const std::string path = dir + "/log.jsonl";
        std::string text = read_file(path);
        std::size_t line3 = text.find('\n', text.find('\n') + 1) + 1;
        const std::size_t at = text.find(R"("seq":1,)", line3);
        EXPECT(at != std::string::npos && at < text.find('\n', line3));
        text.replace(at, 8, R"("seq":7,)");
        std::ofstream(path, std::ios::binary | std::ios::trunc) << text;

        const auto corrupt = expect_error(INBOXLOG_STATUS_CORRUPT, [&] { store.verify("log"); });
        EXPECT_EQ(corrupt.kind(), "corrupt");
        EXPECT(corrupt.session() == std::optional<std::string>("log"));
        EXPECT(corrupt.path() == std::optional<std::string>(path));
        EXPECT(corrupt.line() == std::optional<std::uint64_t>(3));
        EXPECT(corrupt.offset() == std::optional<std::uint64_t>(line3));
        EXPECT(corrupt.seq().has_value());
        EXPECT(contains(corrupt.json(), R"("code":2,"kind":"corrupt")"));
        // Opening refuses it with the same location, and changes no byte.
        const auto refused = expect_error(INBOXLOG_STATUS_CORRUPT, [&] { store.open("log"); });
        EXPECT(refused.line() == corrupt.line() && refused.offset() == corrupt.offset());
        EXPECT(refused.seq() == corrupt.seq() && refused.path() == corrupt.path());
        EXPECT_EQ(read_file(path), text);

        // Observer failures are contained and taken once; readable after close.
        auto s = store.create("watched");
        EXPECT_EQ(s.take_observer_failures(), "[]");
        char *error = nullptr;
        inboxlog::detail::check(inboxlog_test_failing_observer(s.get(), &error), error);
        s.append("host/x", "{}");
        s.append("host/x", "{}");
        EXPECT_EQ(s.take_observer_failures(), R"(["event observer failed on seq 0: test observer refused seq 0",)"
                                              R"("event observer failed on seq 1: test observer refused seq 1"])");
        EXPECT_EQ(s.take_observer_failures(), "[]");
        s.append("host/x", "{}");
        s.close();
        expect_error(INBOXLOG_STATUS_CLOSED, [&] { s.append("host/x", "{}"); });
        EXPECT(contains(s.take_observer_failures(), "refused seq 2"));
        inboxlog::Session gone = std::move(s);
        expect_error(INBOXLOG_STATUS_NULL_ARGUMENT, [&] { s.take_observer_failures(); }); // NOLINT
    }
    // Location keys are the error object's own keys, never text inside its message.
    const std::string quoting =
        R"({"code":2,"kind":"corrupt","message":"bad \"seq\":9, \"line\":4 \"path\":\"x\"","session":"s\"1","line":12,"offset":340,"seq":5})";
    const auto e = inboxlog::detail::error_from(INBOXLOG_STATUS_CORRUPT, quoting);
    EXPECT_EQ(std::string(e.what()), R"(bad "seq":9, "line":4 "path":"x")");
    EXPECT(e.session() == std::optional<std::string>("s\"1"));
    EXPECT(!e.path());
    EXPECT(e.line() == std::optional<std::uint64_t>(12));
    EXPECT(e.offset() == std::optional<std::uint64_t>(340));
    EXPECT(e.seq() == std::optional<std::uint64_t>(5));
    // Keys of the wrong type, out of range or past damage stay empty.
    for (const char *json : {R"({"message":"m","seq":"5","line":-1,"offset":1.5})",
                             R"({"message":"m","seq":99999999999999999999999})", R"({"message":"m" "seq":5})",
                             R"({"message":"m","line" 3})", R"(["seq",5])", R"({"message":"m","seq":)"}) {
        const auto odd = inboxlog::detail::error_from(INBOXLOG_STATUS_CORRUPT, json);
        EXPECT(!odd.seq() && !odd.line() && !odd.offset() && !odd.session());
        EXPECT(odd.code() == INBOXLOG_STATUS_CORRUPT);
    }
    EXPECT(inboxlog::detail::error_from(INBOXLOG_STATUS_IO, R"({ "seq" : 7 , "message" : "m" })").seq() ==
           std::optional<std::uint64_t>(7));

    const std::string cleanup = "rm -rf '" + dir + "'";
    EXPECT(std::system(cleanup.c_str()) == 0);
    std::puts("wrapper_errors: ok");
    return 0;
}
